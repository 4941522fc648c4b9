"""The downtime clock's start and the words that say where it came from agree (one rule for a stop
run from here and one seen on the host: console/swap/observe.py downtime_from)."""

from __future__ import annotations

import pytest

from console.parsers.sglang_log import parse_line
from console.swap.observe import downtime_from, log_time

BATCH = ("[2026-12-03 09:00:{s} TP0] Decode batch, #running-req: 5, #full token: 12000, full token usage: 0.01, "
         "cuda graph: True, gen throughput (token/s): 100.00, #queue-req: 0")


def test_a_batch_before_the_stop_starts_the_clock_at_that_batch() -> None:
    stop = (log_time("2026-12-03 09:00:56") or 0) + 0.9
    d = downtime_from("h", [parse_line(BATCH.format(s="50"))], stop, "the stop command")
    assert (d.started_at_s, d.start_source) == (log_time("2026-12-03 09:00:50"),
                                                "the old server's last served request, in its log")


@pytest.mark.xfail(strict=True, reason=(
    "console/swap/observe.py downtime_from: when the old server's last batch is stamped after the stop "
    "command (its whole-second stamp, or a batch served while it stops), the clock starts at the stop "
    "command (min) but its source still says \"the old server's last served request, in its log\"; seen on "
    "the real systemd (tests/real/test_systemd_swap.py, one run in three under load)"))
def test_a_clock_that_starts_at_the_stop_command_says_so_though_the_log_has_a_later_batch() -> None:
    stop = (log_time("2026-12-03 09:00:56") or 0) + 0.912
    d = downtime_from("h", [parse_line(BATCH.format(s="57"))], stop, "the stop command")
    assert d.started_at_s == stop
    assert "the stop command" in d.start_source, d.start_source
