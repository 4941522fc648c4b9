"""A timeout that charges the host for its own silence, not for this process's lateness (issue 23
item 5).

A connect timeout of 10 s of wall clock is a promise about the host: it did not answer in 10 s.
On a busy console (100 hosts starting at once; a 2-core machine at load 15-30, where the event
loop woke 2-5 s late) the same 10 s covered only two or three of a handshake's round trips, so
hosts that were answering were given up on, retried after a backoff, and given up on again: 100
simulated hosts ended at 69-84 connected, each failure "no answer within 10s" while the console used
9-13 % of a core and its loop woke 2-5 s late.

`wait_for_host` looks at the clock every `tick_s`; a tick charges what it took, but at most
`1.5 * tick_s`: the time this loop spent not running (it was late) is not the host's. A loop that
is on time charges the wall clock, as `asyncio.wait_for` would. `max_stretch` bounds it all: a
host that never answers fails after `max_stretch * timeout_s` of wall clock at the latest, however
late the loop."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

TICK_S = 0.25
MAX_STRETCH = 6.0


async def wait_for_host(aw: Awaitable[T], timeout_s: float | None, *, tick_s: float | None = None,
                        max_stretch: float = MAX_STRETCH, discard: Callable[[T], object] | None = None) -> T:
    """`await aw` within `timeout_s` of the host's time (see the module); raises
    asyncio.TimeoutError (and cancels `aw`) when it is spent. `None`: no timeout. `discard`: what
    to do with a result that comes when nobody will take it (the wait was cancelled or timed out
    as it came, or `aw` finished in spite of its cancel): a connection is closed, never left open."""
    tick_s = TICK_S if tick_s is None else tick_s
    task = asyncio.ensure_future(aw)
    if timeout_s is None and discard is None:
        return await task
    charged = 0.0
    start = last = time.monotonic()
    returned = False
    try:
        while True:
            wait = None if timeout_s is None else max(0.0, min(tick_s, timeout_s - charged))
            done, _ = await asyncio.wait({task}, timeout=wait)
            if task in done:
                returned = True
                return task.result()
            assert timeout_s is not None
            now = time.monotonic()
            charged += min(now - last, 1.5 * tick_s)
            last = now
            if charged >= timeout_s or now - start >= max_stretch * timeout_s:
                raise asyncio.TimeoutError
    finally:
        if not returned:
            if discard is not None:
                task.add_done_callback(functools.partial(_discard_result, discard))
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task


def _discard_result(discard: Callable[[T], object], task: asyncio.Future[T]) -> None:
    if not task.cancelled() and task.exception() is None:
        discard(task.result())
