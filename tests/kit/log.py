"""Shared test kit: moved from test_log.py so that no test imports another test module."""

from __future__ import annotations

import asyncio

from console.host.sources.log import LogFollower


async def collect(follower: LogFollower, until: object, timeout: float = 15.0) -> list[str]:
    seen: list[str] = []

    async def run() -> None:
        async for batch in follower.batches():
            seen.extend(e.text for e in batch.events)
            if until(seen):  # type: ignore[operator]
                return

    await asyncio.wait_for(run(), timeout)
    return seen
