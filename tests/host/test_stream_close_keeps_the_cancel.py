"""Closing a stream never swallows the cancel of whoever closes it (issue 36): a source's
`finally: await stream.close()` ran as its task was cancelled (a fleet quitting), the close
awaited its stderr reader under `suppress(BaseException)`, and the cancel that landed there was
lost: the source ran on for another round, and 100 hosts took 97 s to quit."""

from __future__ import annotations

import asyncio

import pytest

from console.host.transport.streams import ProcessLineStream


class Silent:
    """A reader with nothing to read (a quiet stdout)."""

    async def read(self, n: int = -1) -> bytes:
        await asyncio.Event().wait()
        return b""


class SlowToCancel:
    """stderr whose read takes a while to give up once cancelled (asyncssh's reader, under load)."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()
        self.release = asyncio.Event()

    async def read(self, n: int = -1) -> bytes:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            await self.release.wait()
            raise
        return b""


async def test_a_cancel_landing_in_the_streams_close_reaches_the_closer() -> None:
    stderr = SlowToCancel()
    stream = ProcessLineStream(Silent(), stderr, lambda: None, lambda: None)
    await asyncio.sleep(0)  # its stderr reader is reading
    after_close: list[str] = []

    async def source() -> None:
        try:
            await asyncio.Event().wait()  # reading samples...
        finally:
            await stream.close()  # ...closed as the source is stopped
            after_close.append("ran on")

    task = asyncio.ensure_future(source())
    await asyncio.sleep(0)
    task.cancel()  # the first cancel: the source's finally closes the stream
    await asyncio.wait_for(stderr.cancelled.wait(), 30)
    task.cancel()  # the runner's second cancel lands in the close
    stderr.release.set()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)
    assert task.cancelled()
    assert after_close == []
