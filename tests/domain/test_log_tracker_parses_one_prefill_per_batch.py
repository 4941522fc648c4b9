"""A batch of log lines costs one parse of a Prefill line's statistics, the batch's last (issue 36:
every Prefill line of a flood was parsed on the UI loop, 9,000 parses in a 6 s flood, for a
summary that keeps only the newest). A new boot in the batch still clears what the old server's
lines said."""

from __future__ import annotations

from typing import Any

from console.domain.analysis import log_state
from console.domain.analysis.log_state import LogTracker
from console.host.parsers.sglang_log import parse_line

PREFILL = ("[2026-04-08 14:05:{s:02d} TP0] Prefill batch, #new-seq: 2, #new-token: {n}, #cached-token: 512, "
           "full token usage: 0.11, #running-req: 46, #queue-req: 3, cuda graph: False, "
           "input throughput (token/s): 18234.11")
LAUNCH = "[2026-04-08 14:06:00] server_args=ServerArgs(model_path='/models/next', port=30000)"


def test_a_batch_of_prefill_lines_parses_only_its_last(monkeypatch: Any) -> None:
    parsed: list[str] = []
    real = log_state.batch_fields

    def counting(event: Any) -> dict[str, Any]:
        parsed.append(event.text)
        return real(event)

    monkeypatch.setattr(log_state, "batch_fields", counting)
    tracker = LogTracker("file")
    tracker.feed([parse_line(PREFILL.format(s=i % 60, n=1000 + i)) for i in range(1000)], 1_775_000_000.0)
    assert len(parsed) == 1
    assert tracker.last_prefill is not None and tracker.last_prefill["#new-token"] == 1999


def test_a_new_boot_after_the_prefill_lines_of_a_batch_clears_them() -> None:
    tracker = LogTracker("file")
    lines = [parse_line(PREFILL.format(s=1, n=2048)), parse_line(LAUNCH)]
    assert lines[1].kind == "boot"
    tracker.feed(lines, 1_775_000_000.0)
    assert tracker.last_prefill is None  # the prefill was the old server's
