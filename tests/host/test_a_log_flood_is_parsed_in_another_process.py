"""A flood's batches are decoded, cleaned, redacted and parsed in a process of their own, not on a
thread of the console (issue 36 item 3: on a thread the parse held the console's GIL ~70 % of a
flood, and the UI's thread waited for it between slices). Every line still arrives once, in the
order written, redacted, with the stream's resume point advanced as if parsed here; a parser
process that dies loses nothing (the batch is parsed on the thread from the same resume point)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

from console.host.sources import log as log_source
from console.host.sources.log import LogFollower
from console.host.transport import LocalTransport

LINES = 3000
SECRET = "hf_AbCdEfGhIjKlMnOpQrSt"


def _write(path: Path, n: int, start: int = 0) -> None:
    with path.open("a") as fh:
        fh.write("".join(f"[2026-04-08 14:05:00] line {i} hf_token: {SECRET}\n" for i in range(start, start + n)))


async def _read(follower: LogFollower, n: int, on_batch: object = None) -> list[str]:
    texts: list[str] = []
    async with asyncio.timeout(120):
        async for batch in follower.batches():
            texts += [event.text for event in batch.events]
            if on_batch is not None and batch.events:
                on_batch()  # type: ignore[operator]
            if len(texts) >= n:
                return texts
    return texts


async def test_a_floods_batches_are_parsed_in_another_process_redacted_and_in_order(tmp_path: Path) -> None:
    path = tmp_path / "sglang.log"
    _write(path, LINES)
    transport = LocalTransport()
    follower = LogFollower(transport, log_file=str(path))
    try:
        texts = await _read(follower, LINES)
    finally:
        await transport.close()
    assert follower.parsed_in is not None and follower.parsed_in != os.getpid(), \
        f"a {LINES}-line backlog parsed in this process ({follower.parsed_in})"
    assert len(texts) == LINES
    assert [t.split(" hf_token")[0] for t in texts] == [f"[2026-04-08 14:05:00] line {i}" for i in range(LINES)]
    assert not any(SECRET in t for t in texts), "a secret reached the events"
    assert follower.offset == path.stat().st_size  # the resume point came back from the process


async def test_a_journals_cursor_comes_back_from_the_parser_process() -> None:
    follower = LogFollower(LocalTransport(), units=("sglang.service",))
    raw = [json.dumps({"__CURSOR": f"s=1;i={i}", "MESSAGE": f"[2026-04-08 14:05:00] line {i} api_key={SECRET}",
                       "_SYSTEMD_UNIT": "sglang.service"}).encode() for i in range(log_source.PROCESS_MIN_LINES)]
    events = await follower._parse_off_loop(raw)
    assert follower.parsed_in is not None and follower.parsed_in != os.getpid()
    assert [e.text.split(" api_key")[0] for e in events] == [f"[2026-04-08 14:05:00] line {i}"
                                                             for i in range(len(raw))]
    assert not any(SECRET in e.text for e in events)
    assert follower.cursor == f"s=1;i={len(raw) - 1}"
    # The same lines parsed here give the same events (the thread's path, for a small batch).
    here = LogFollower(LocalTransport(), units=("sglang.service",))
    assert events == here._parse_batch(raw)
    assert here.cursor == follower.cursor


async def test_each_lines_host_time_comes_back_from_the_parser_process_beside_the_servers_stamp() -> None:
    """journald's time of each entry (µs) and Docker's (ns, to the µs) are the events' `at_s`, through
    the parser process and on the thread alike; the server's own whole-second stamp stays `ts`."""
    t0 = 1_775_628_300_000_000  # µs since the epoch
    raw = [json.dumps({"__CURSOR": f"s=1;i={i}", "__REALTIME_TIMESTAMP": str(t0 + i * 1_001),
                       "MESSAGE": f"[2026-04-08 14:05:00] line {i}", "_SYSTEMD_UNIT": "sglang.service"}).encode()
           for i in range(log_source.PROCESS_MIN_LINES)]
    follower = LogFollower(LocalTransport(), units=("sglang.service",))
    events = await follower._parse_off_loop(raw)
    assert follower.parsed_in is not None and follower.parsed_in != os.getpid()
    assert [e.at_s for e in events] == [(t0 + i * 1_001) / 1e6 for i in range(len(raw))]
    assert {e.ts for e in events} == {"2026-04-08 14:05:00"}
    assert events == LogFollower(LocalTransport(), units=("sglang.service",))._parse_batch(raw)
    docker = [f"2026-04-08T14:05:{i // 1000:02d}.{i * 1_000_037 % 10**9:09d}Z [2026-04-08 14:05:00] line {i}".encode()
              for i in range(log_source.PROCESS_MIN_LINES)]
    follower = LogFollower(LocalTransport(), container="sglang")
    events = await follower._parse_off_loop(docker)
    assert follower.parsed_in is not None and follower.parsed_in != os.getpid()
    start = 1_775_657_100  # 2026-04-08T14:05:00Z
    assert [e.at_s for e in events] == [start + i // 1000 + (i * 1_000_037 % 10**9) // 1000 / 1e6
                                        for i in range(len(docker))]
    assert events == LogFollower(LocalTransport(), container="sglang")._parse_batch(docker)
    # a file's line has no host time: its facts read the server's stamp
    file = LogFollower(LocalTransport(), log_file="/x")
    file.offset = 0
    assert file._parse_batch([b"[2026-04-08 14:05:00] a line"])[0].at_s is None


async def test_two_containers_lines_keep_their_container_and_resume_points_through_the_parser_process() -> None:
    """Beside, the old and the new container are followed at once: a flood's tagged lines come back
    from the process each with its container, and each container's own last Docker time."""
    follower = LogFollower(LocalTransport(), container="new", compare_container="old")
    raw = [f"{'new' if i % 2 else 'old'} 2026-04-08T14:05:00.{i:09d}Z line {i} api_key={SECRET}".encode()
           for i in range(log_source.PROCESS_MIN_LINES)]
    events = await follower._parse_off_loop(raw)
    assert follower.parsed_in is not None and follower.parsed_in != os.getpid()
    assert [(e.fields["container"], e.text.split(" api_key")[0]) for e in events] == [
        ("new" if i % 2 else "old", f"line {i}") for i in range(len(raw))]
    assert not any(SECRET in e.text for e in events)
    last = len(raw) - 1
    assert follower.decoder.since_of == {"new": f"2026-04-08T14:05:00.{last:09d}Z",
                                         "old": f"2026-04-08T14:05:00.{last - 1:09d}Z"}
    # A line already read from one container (a reconnect's --since is inclusive) is dropped; the other's is not.
    again = await follower._parse_off_loop([raw[-1], f"old 2026-04-08T14:06:00.000000000Z later".encode()])
    assert [(e.fields["container"], e.text) for e in again] == [("old", "later")]


async def test_a_parser_process_killed_mid_flood_loses_no_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(log_source, "_PROCESS_FAILURES", 0)
    path = tmp_path / "sglang.log"
    _write(path, LINES)
    transport = LocalTransport()
    follower = LogFollower(transport, log_file=str(path))
    killed: list[int] = []

    def kill_once() -> None:
        if not killed and follower.parsed_in not in (None, os.getpid()):
            killed.append(follower.parsed_in)  # type: ignore[arg-type]
            os.kill(follower.parsed_in, signal.SIGKILL)  # type: ignore[arg-type]
            _write(path, LINES, start=LINES)  # the next batches meet a dead process

    try:
        texts = await _read(follower, 2 * LINES, kill_once)
    finally:
        await transport.close()
    assert killed, "no batch was parsed in the parser process"
    assert "the log parser process failed" in caplog.text  # the batch it had was parsed on the thread
    assert [t.split(" hf_token")[0] for t in texts] == [f"[2026-04-08 14:05:00] line {i}" for i in range(2 * LINES)]
    assert follower.offset == path.stat().st_size


async def test_a_one_shot_backlog_read_starts_no_parser_process(tmp_path: Path) -> None:
    """`snapshot` reads the backlog once: a process started for it would cost more than the parse."""
    path = tmp_path / "sglang.log"
    _write(path, LINES)
    transport = LocalTransport()
    follower = LogFollower(transport, log_file=str(path))
    try:
        events = await asyncio.wait_for(follower.read_backlog(), 60)
    finally:
        await transport.close()
    assert len(events) == LINES
    assert follower.parsed_in in (None, os.getpid())
