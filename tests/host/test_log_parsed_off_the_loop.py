"""A flood's lines are decoded, redacted and parsed off the UI's event loop (issue 36 item 3):
at 20k lines/s, parsing on the loop held it 60-200 ms a batch (issue 23), then most of its time.
Every line still arrives, in the order written."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from console.host.sources import log as log_source
from console.host.sources.log import LogFollower
from console.host.transport import LocalTransport


async def test_a_big_batch_is_parsed_off_the_loop_and_every_line_arrives_in_order(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # The parser thread's own path (a flood's batch goes to the parser process when there is one:
    # tests/host/test_a_log_flood_is_parsed_in_another_process.py; the thread parses when there is none).
    monkeypatch.setattr(log_source, "PROCESS_MIN_LINES", 10**9)
    path = tmp_path / "sglang.log"
    path.write_text("".join(f"[2026-04-08 14:05:00] line {i}\n" for i in range(1500)))
    transport = LocalTransport()
    follower = LogFollower(transport, log_file=str(path))
    turns = 0
    stop = asyncio.Event()

    async def other_work() -> None:  # the UI, in the real console
        nonlocal turns
        while not stop.is_set():
            turns += 1
            await asyncio.sleep(0)

    seen_turns: list[int] = []
    parsed_on: set[int] = set()
    parse = follower._parse

    gave_up: list[bool] = []

    def counting(raw: bytes) -> object:
        seen_turns.append(turns)
        parsed_on.add(threading.get_ident())
        if len(seen_turns) % 100 == 0 and not gave_up:
            # Every 100 lines, wait (10 s at most) for the loop to turn while this batch is being
            # parsed: it can only if the parse is off the loop. A wait, not a count of GIL
            # hand-overs: on a loaded machine the loop's thread can miss a whole batch's slices.
            before, deadline = turns, time.monotonic() + 10
            while turns == before and time.monotonic() < deadline:
                time.sleep(0.001)
            gave_up.extend([True] if turns == before else [])
        return parse(raw)

    follower._parse = counting  # type: ignore[method-assign]
    ticker = asyncio.ensure_future(other_work())
    texts: list[str] = []
    try:
        async with asyncio.timeout(30):
            async for batch in follower.batches():
                texts += [event.text for event in batch.events]
                if len(texts) >= 1500:
                    break
    finally:
        stop.set()
        await ticker
        await transport.close()
    assert texts == [f"[2026-04-08 14:05:00] line {i}" for i in range(1500)]
    assert parsed_on and threading.get_ident() not in parsed_on, "parsed on the event loop's thread"
    # The loop went on turning while the lines were parsed.
    changes = sum(1 for a, b in zip(seen_turns, seen_turns[1:], strict=False) if b != a)
    assert changes >= 10, f"the loop ran {changes} times during 1,500 lines"


async def test_the_backlog_is_parsed_off_the_loop_too(tmp_path: Path) -> None:
    path = tmp_path / "sglang.log"
    path.write_text("".join(f"[2026-04-08 14:05:00] line {i}\n" for i in range(300)))
    transport = LocalTransport()
    follower = LogFollower(transport, log_file=str(path))
    parsed_on: set[int] = set()
    parse = follower._parse

    def recording(raw: bytes) -> object:
        parsed_on.add(threading.get_ident())
        return parse(raw)

    follower._parse = recording  # type: ignore[method-assign]
    try:
        events = await asyncio.wait_for(follower.read_backlog(), 30)
    finally:
        await transport.close()
    assert [e.text for e in events] == [f"[2026-04-08 14:05:00] line {i}" for i in range(300)]
    assert parsed_on and threading.get_ident() not in parsed_on
    assert follower.offset is None  # the backlog's read leaves the follow's resume point alone
