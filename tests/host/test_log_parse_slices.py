"""A big batch of log lines is parsed in slices with a turn of the loop between (issue 23 item
2): 2,000 lines parsed at once held the UI's loop 60-200 ms in a 20k lines/s flood."""

from __future__ import annotations

import asyncio
from pathlib import Path

from console.sources.log import LogFollower
from console.transport import LocalTransport


async def test_a_big_batch_gives_the_loop_turns_while_it_is_parsed(tmp_path: Path) -> None:
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
    parse = follower._parse

    def counting(raw: bytes) -> object:
        seen_turns.append(turns)
        return parse(raw)

    follower._parse = counting  # type: ignore[method-assign]
    ticker = asyncio.ensure_future(other_work())
    got = 0
    try:
        async with asyncio.timeout(30):
            async for batch in follower.batches():
                got += len(batch.events)
                if got >= 1500:
                    break
    finally:
        stop.set()
        await ticker
        await transport.close()
    assert got == 1500
    # Within each slice the counter stands still; between slices the loop ran.
    assert len(seen_turns) == 1500
    changes = sum(1 for a, b in zip(seen_turns, seen_turns[1:], strict=False) if b != a)
    assert changes >= 10, f"the loop ran {changes} times during 1,500 lines"
