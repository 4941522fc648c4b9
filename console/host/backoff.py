"""One retry policy for every loop that retries (sources, streams, connecting): exponential from
`initial_s` to `cap_s`, with ±`jitter` so that many loops (or many hosts) never retry in step,
and a wake-up that cuts the wait short (the connection came back, the operator asked)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

INITIAL_S = 1.0
CAP_S = 30.0
JITTER = 0.2


@dataclass
class Backoff:
    initial_s: float = INITIAL_S
    cap_s: float = CAP_S
    jitter: float = JITTER
    failures: int = 0
    _wake: asyncio.Event | None = field(default=None, repr=False)

    def reset(self) -> None:
        self.failures = 0

    def next_delay_s(self) -> float:
        """The wait after one more failure (and count it)."""
        base = min(self.cap_s, self.initial_s * (2 ** min(self.failures, 30)))
        self.failures += 1
        if self.jitter:
            base *= 1 + random.uniform(-self.jitter, self.jitter)
        return max(0.0, min(base, self.cap_s * (1 + self.jitter)))

    @property
    def event(self) -> asyncio.Event:
        if self._wake is None:
            self._wake = asyncio.Event()
        return self._wake

    def wake(self) -> None:
        """Cut the current wait short and start again from `initial_s` (thread-unsafe: call on the loop)."""
        self.failures = 0
        self.event.set()

    async def sleep(self, delay_s: float) -> bool:
        """Sleep `delay_s` or until woken; True when woken."""
        event = self.event
        try:
            await asyncio.wait_for(event.wait(), delay_s)
            woken = True
        except asyncio.TimeoutError:
            woken = False
        event.clear()
        return woken

    async def failed(self) -> bool:
        """After a failure: wait the next delay (or until woken)."""
        return await self.sleep(self.next_delay_s())
