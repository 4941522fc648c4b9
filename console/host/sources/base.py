"""The polling policy in one place: poll, then sleep; back off on errors; keep the last good data."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Generic, TypeVar

from console.host.backoff import Backoff
from console.host.parsers import ParseError
from console.host.transport.errors import TransportError
from console.model import Reading
from console.sanitize import clean_line

T = TypeVar("T")


def describe_error(exc: BaseException) -> str:
    """One line for the operator: never a traceback, never a terminal escape from the host's
    stderr (issue 21, item 1)."""
    return clean_line(_describe(exc))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"not found: {exc.filename or exc.args[0] if exc.args else exc}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {exc.filename or (exc.args[0] if exc.args else '')}"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if isinstance(exc, (TransportError, ParseError)) else f"{type(exc).__name__}: {text}"


class PolledSource(Generic[T]):
    """Turns a `poll()` coroutine into a stream of Readings at a cadence, with backoff."""

    def __init__(self, name: str, poll: Callable[[], Awaitable[T]], interval_s: float,
                 *, max_backoff_s: float = 30.0) -> None:
        self.name = name
        self._poll = poll
        self.interval_s = interval_s
        self.backoff = Backoff(initial_s=interval_s, cap_s=max(max_backoff_s, interval_s))
        self.reading: Reading[T] = Reading(name)
        # Said with each reading (`Reading.detail`): e.g. the server poll's cadence when it is not the usual.
        self.detail: str | None = None

    def wake(self) -> None:
        """Poll now instead of at the end of the current sleep (the operator changed something, or
        the connection came back)."""
        self.backoff.wake()

    async def poll_once(self) -> Reading[T]:
        try:
            data = await self._poll()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a source never raises: errors become data
            self.reading = replace(self.reading, error=describe_error(exc), error_at_s=time.time())
        else:
            self.reading = Reading(self.name, data, time.time(), detail=self.detail)
        return self.reading

    async def readings(self) -> AsyncIterator[Reading[T]]:
        while True:
            reading = await self.poll_once()
            yield reading
            if reading.error is None:
                self.backoff.reset()
                await self.backoff.sleep(self.interval_s)
            else:
                await self.backoff.failed()
