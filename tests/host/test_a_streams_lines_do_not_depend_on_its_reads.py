"""A stream's lines are the same whatever sizes its reads come in: a line split across reads is
whole, CRs before a newline dropped, a line longer than the limit cut and marked (the split's fast
path for a read of whole short lines gives exactly what the line-by-line path gives)."""

from __future__ import annotations

import random

from console.host.transport.streams import split_lines


class Reads:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def read(self, n: int = -1) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""


def expected(data: bytes, max_line: int) -> list[bytes]:
    *whole, tail = data.split(b"\n")
    out = [line[:max_line] + f" …[{len(line) - max_line} bytes cut]".encode() if len(line) > max_line
           else line.rstrip(b"\r") for line in whole]
    if tail:
        out.append(tail[:max_line] + (f" …[{len(tail) - max_line} bytes cut]".encode() if len(tail) > max_line else b""))
    return out


async def test_a_streams_lines_are_the_same_whatever_its_reads() -> None:
    rnd = random.Random(36)
    for _ in range(1500):
        data = b"".join(rnd.choice([b"a", b"bc", b"\n", b"\r\n", b"\r", b"x" * rnd.randint(0, 40), b"\n\n"])
                        for _ in range(rnd.randint(0, 60)))
        cuts = sorted(rnd.sample(range(len(data) + 1), min(len(data), rnd.randint(0, 6))))
        chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)]) if data[a:b]]
        max_line = rnd.choice([3, 10, 30, 1 << 16])
        got = [line async for line in split_lines(Reads(list(chunks)), max_line)]
        assert got == expected(data, max_line), (chunks, max_line)
