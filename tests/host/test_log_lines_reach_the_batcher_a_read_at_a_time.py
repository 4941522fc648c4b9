"""A log flood reaches the log's batcher one list of lines per read (64 KiB), not one queue item
per line (issue 36: the per-line hand-over between the stream and the batcher, a queue put and get
for each of 20k lines a second, was the UI thread's largest cost under a flood). Every line still
arrives, in order, whole across reads, with a CR-LF's CR gone."""

from __future__ import annotations

import asyncio

from console.host.sources.log import _END, _pump
from console.host.transport.streams import ProcessLineStream


class Buffered:
    """A reader with everything buffered: `read` never waits (asyncssh's SSHReader with data)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    async def read(self, n: int = -1) -> bytes:
        chunk, self.data = self.data[:n], self.data[n:]
        return chunk


async def test_a_flood_is_queued_a_read_at_a_time_and_every_line_arrives_in_order() -> None:
    lines = [f"{i:06d} ".encode() + b"x" * (90 + i % 50) for i in range(8000)]  # ~1.1 MB: 18 reads
    lines[10] += b"\r"  # a CR-LF line
    data = b"\n".join(lines) + b"\n"
    stream = ProcessLineStream(Buffered(data), Buffered(b""), lambda: None, lambda: 0)
    queue: asyncio.Queue[object] = asyncio.Queue()
    await _pump(stream, queue)
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    assert items[-1] is _END
    reads = -(-len(data) // (1 << 16))
    assert len(items) - 1 <= reads, f"{len(items) - 1} queue items for {len(lines)} lines in {reads} reads"
    got = [line for item in items[:-1] for line in item]  # type: ignore[attr-defined]
    lines[10] = lines[10][:-1]
    assert got == lines  # every line, in order, whole across the reads' boundaries
    await stream.close()
