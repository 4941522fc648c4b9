"""Long-lived remote commands read line by line, with bounded memory.

Without a pty a remote `journalctl -f` on a quiet log never notices that its channel is gone
and lingers on the GPU host. So every stream runs inside a small wrapper that watches its
own stdin: when the channel (or local pipe) closes, `cat` sees EOF and the wrapper kills the
command and its children.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable

from console.host.transport.shell import ByteReader

MAX_LINE_BYTES = 64 << 10


def stream_wrapper(script: str) -> str:
    """`script` run so that it dies when our end of the channel goes away."""
    return (
        # POSIX gives a background job /dev/null as stdin, so hand the watcher ours as fd 3.
        "exec 3<&0\n"
        f"{{ {script}\n}} </dev/null 3<&- &\n"
        "__gc_p=$!\n"
        # The watcher must not hold our stdout/stderr, or a command that exits never reaches EOF.
        "( cat <&3; pkill -TERM -P $__gc_p; kill -TERM $__gc_p ) >/dev/null 2>&1 &\n"
        "__gc_w=$!\n"
        "exec 3<&-\n"
        "wait $__gc_p\n"
        "__gc_rc=$?\n"
        "kill $__gc_w 2>/dev/null\n"
        "exit $__gc_rc\n"
    )


async def split_chunks(reader: ByteReader, max_line: int = MAX_LINE_BYTES) -> AsyncIterator[list[bytes]]:
    """The lines of each read (64 KiB at most) as one list, without their newlines; a line longer
    than `max_line` is cut and marked. A flood's 20k lines a second are a few dozen lists, not
    20k steps of the loop for whoever takes them (issue 36: the per-line hand-over to the log's
    batcher was the UI thread's largest cost under a flood)."""
    buf = bytearray()
    dropping = 0
    first = True
    while True:
        if not first:
            # asyncssh's read returns at once while its buffer holds data, so a flood (MBs
            # buffered) was split and queued in one step of the loop: 100-170 ms with the UI
            # waiting (20k lines/s, asyncio debug). One turn of the loop per 64 KiB chunk.
            await asyncio.sleep(0)
        first = False
        chunk = await reader.read(1 << 16)
        if not chunk:
            if buf or dropping:
                yield [_cut(bytes(buf), dropping)]
            return
        pieces = chunk.split(b"\n")
        lines: list[bytes] = []
        rest = pieces[:-1]
        if rest and not buf and not dropping and b"\r" not in chunk and max(map(len, rest)) <= max_line:
            # The common case (a flood's 64 KiB of whole, short lines): the pieces are the lines,
            # with no step of Python per line on the UI thread.
            lines, rest = rest, []
        for piece in rest:
            if buf or dropping or len(piece) > max_line:  # the rest of a line begun in an earlier read, or a long one
                room = max_line - len(buf)
                if room > 0:
                    buf += piece[:room]
                dropping += max(0, len(piece) - max(room, 0))
                piece = _cut(bytes(buf), dropping)
                buf.clear()
                dropping = 0
            lines.append(piece.rstrip(b"\r") if piece.endswith(b"\r") else piece)
        tail = pieces[-1]
        room = max_line - len(buf)
        if room > 0:
            buf += tail[:room]
        dropping += max(0, len(tail) - max(room, 0))
        if lines:
            yield lines


async def split_lines(reader: ByteReader, max_line: int = MAX_LINE_BYTES) -> AsyncIterator[bytes]:
    """Yield lines without their newline; a line longer than `max_line` is cut and marked."""
    async for lines in split_chunks(reader, max_line):
        for line in lines:
            yield line


def _cut(line: bytes, dropped: int) -> bytes:
    return line + (f" …[{dropped} bytes cut]".encode() if dropped else b"")


STDERR_SETTLE_S = 2.0


class ProcessLineStream:
    """A running command's stdout as lines; stderr kept as a short tail for error messages."""

    def __init__(self, stdout: ByteReader, stderr: ByteReader, closer: Callable[[], None],
                 exit_status: Callable[[], int | None],
                 reaper: Callable[[], Awaitable[object]] | None = None) -> None:
        self._stdout = stdout
        self._closer = closer
        self._reaper = reaper
        self._exit_status = exit_status
        self._stderr_tail: deque[bytes] = deque(maxlen=20)
        self._stderr_task = asyncio.ensure_future(self._drain_stderr(stderr))

    async def _drain_stderr(self, stderr: ByteReader) -> None:
        with contextlib.suppress(Exception):
            async for line in split_lines(stderr, 4096):
                self._stderr_tail.append(line)

    async def __aiter__(self) -> AsyncIterator[bytes]:  # type: ignore[override]
        async for lines in self.chunks():
            for line in lines:
                yield line

    async def chunks(self) -> AsyncIterator[list[bytes]]:
        """The lines as they arrive, one list per read (see `split_chunks`)."""
        try:
            async for lines in split_chunks(self._stdout):
                yield lines
        except (OSError, ConnectionError, asyncio.IncompleteReadError):
            return
        # stdout ended: let stderr's last lines arrive too (they may come after stdout's EOF, even
        # after the exit status), so whoever reads `stderr_tail` next sees why the command ended.
        await asyncio.wait({self._stderr_task}, timeout=STDERR_SETTLE_S)

    @property
    def exit_status(self) -> int | None:
        return self._exit_status()

    @property
    def stderr_tail(self) -> str:
        return b"\n".join(self._stderr_tail).decode("utf-8", "replace").strip()

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            self._closer()
        if self._reaper is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._reaper(), 5)
        self._stderr_task.cancel()
        # asyncio.wait, not `await task` under suppress(BaseException): that swallowed the cancel of
        # whoever was closing (a source's `finally` as the runner stopped it), so a quitting fleet's
        # GPU sources ran on for another round each (issue 36).
        await asyncio.wait({self._stderr_task})
        if not self._stderr_task.cancelled():
            self._stderr_task.exception()  # retrieved: a reader that failed is not reported again
