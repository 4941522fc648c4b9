"""The runner's close ends its tasks even when one swallows a cancel (Python 3.11's
`asyncio.wait_for` does, when the cancel lands as its inner await completes): a swap test's
teardown waited 60 s on the GPU source so, and a run once hung in a fixture's teardown."""

from __future__ import annotations

import asyncio
from pathlib import Path

from console.core.runner import HostRunner
from console.core.state import HostState
from console.demo.hostsim.scenario import demo_profile
from console.host.session import HostSession, make_transport
from console.domain.swap.controller import SwapController


async def test_close_ends_a_task_that_swallowed_the_first_cancel(tmp_path: Path) -> None:
    class _Sim:  # demo_profile reads the simulator's port, keys and paths only
        port = 1
        client_key_path = tmp_path / "key"
        known_hosts_path = tmp_path / "known_hosts"
        root = tmp_path / "host"
        server_port = 2
        scenario = "drive"

        def host_path(self, p: str) -> str:
            return str(tmp_path / "host" / p.lstrip("/"))

    profile = demo_profile(_Sim())  # type: ignore[arg-type]
    runner = HostRunner(HostSession(profile, make_transport(profile), demo=True), HostState("h", label="h"), swap=SwapController)
    swallowed = asyncio.Event()

    async def source() -> None:
        while True:
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                if swallowed.is_set():
                    raise
                swallowed.set()  # as wait_for does on 3.11: the loop runs on

    runner._spawn(source(), "gpu")
    await asyncio.sleep(0.1)
    closing = asyncio.ensure_future(runner.close())
    done, _ = await asyncio.wait([closing], timeout=20)
    assert closing in done, "close() waited forever on a task that swallowed one cancel"
    assert swallowed.is_set() and not runner._tasks
