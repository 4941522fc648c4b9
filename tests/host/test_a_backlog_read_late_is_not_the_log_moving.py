"""A log stream's backlog (the old lines `tail`, `journalctl -n` or `docker logs --tail` print at its
start) is not the log moving now, however late the console gets to parse it: on a loaded machine a
quiet host's backlog was parsed more than BACKLOG_S after the stream opened, counted as new lines,
and woke the server poll (issue 36: server-status updates on a host whose log never moved). Lines the
log writes after the opening still are the log moving."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from console.host.sources import log as log_source
from console.host.sources.log import Backlog, LogFollower
from console.host.transport import LocalTransport


def _slow_parse(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Every batch parsed `seconds` late, as on a machine whose cores are busy elsewhere."""
    real = LogFollower._parse_batch

    def slow(self: LogFollower, raw_lines: list[bytes]) -> list[object]:
        time.sleep(seconds)
        return real(self, raw_lines)  # type: ignore[return-value]

    monkeypatch.setattr(LogFollower, "_parse_batch", slow)


async def test_a_files_backlog_parsed_late_does_not_wake_the_listeners(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_source, "BACKLOG_S", 0.3)
    _slow_parse(monkeypatch, 0.6)
    path = tmp_path / "sglang.log"
    path.write_text("".join(f"[2026-01-01 10:00:0{i} TP0] old line {i}\n" for i in range(5)))
    transport = LocalTransport()
    follower = LogFollower(transport, log_file=str(path))
    moved: list[int] = []
    follower.tracker.on_lines.append(lambda: moved.append(follower.tracker.lines_seen))
    seen: list[str] = []

    async def follow() -> None:
        async for batch in follower.batches():
            seen.extend(e.text for e in batch.events)
            if len(seen) == 5:
                assert moved == [], "the backlog, parsed late, was taken for the log moving"
                with open(path, "a") as fh:
                    fh.write("[2026-01-01 10:01:00 TP0] a new line\n")
            if any("a new line" in text for text in seen):
                return

    try:
        await asyncio.wait_for(follow(), 20)
    finally:
        await transport.close()
    assert moved == [6], "a line written after the opening is the log moving"


def test_lines_read_in_the_first_seconds_are_the_backlog_whenever_they_are_fed() -> None:
    backlog = Backlog(100.0)
    backlog.read(300, 100.5)  # the journal's `-n 300`, read at once
    backlog.read(2, 100.0 + log_source.BACKLOG_S + 5)  # two lines the log wrote later
    assert not backlog.live(200)  # fed late (the parse was slow): still the backlog
    assert not backlog.live(100)
    assert backlog.live(2)


def test_a_files_lines_up_to_its_size_at_the_opening_are_the_backlog_however_late_they_are_read() -> None:
    backlog = Backlog(100.0, file_end=4096)
    backlog.read(40, 100.0 + log_source.BACKLOG_S + 3)  # a slow connection: read late
    assert not backlog.live(40, offset=4096)
    backlog.read(1, 110.0)
    assert backlog.live(1, offset=4200)
