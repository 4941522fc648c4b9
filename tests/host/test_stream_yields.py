"""A flood on a stream lets the loop run (issue 23 item 2): asyncssh's read returns at once while
its buffer holds data, so splitting MBs of buffered lines ran in one step of the loop (100-170 ms
of UI lag at 20k lines/s). Now one turn of the loop per chunk read."""

from __future__ import annotations

import asyncio

from console.host.transport.streams import split_lines


class Buffered:
    """A reader with everything buffered: `read` never waits (asyncssh's SSHReader with data)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    async def read(self, n: int = -1) -> bytes:
        chunk, self.data = self.data[:n], self.data[n:]
        return chunk


async def test_splitting_a_buffered_flood_gives_the_loop_turns() -> None:
    lines = [b"x" * 199 for _ in range(5000)]  # 1 MB: 16 chunks of 64 KiB
    turns = 0
    stop = asyncio.Event()

    async def other_work() -> None:  # the UI's repaints, in the real console
        nonlocal turns
        while not stop.is_set():
            turns += 1
            await asyncio.sleep(0)

    ticker = asyncio.ensure_future(other_work())
    await asyncio.sleep(0)
    seen = turns
    got = [line async for line in split_lines(Buffered(b"\n".join(lines) + b"\n"))]
    stop.set()
    await ticker
    assert got == lines  # every line, in order
    assert turns - seen >= 10, f"the loop ran {turns - seen} times while 1 MB was split"


async def test_a_host_line_of_64_kib_arrives_whole_and_a_longer_one_is_cut_and_says_so() -> None:
    at_cap, over = b"a" * (64 << 10), b"b" * ((64 << 10) + 7)
    got = [line async for line in split_lines(Buffered(at_cap + b"\n" + over + b"\nend\n"))]
    assert got[0] == at_cap
    assert got[1] == b"b" * (64 << 10) + " …[7 bytes cut]".encode()
    assert got[2] == b"end"
