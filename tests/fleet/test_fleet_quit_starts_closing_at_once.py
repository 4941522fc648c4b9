"""Quitting the fleet starts closing its hosts' connections when `q` is pressed, beside Textual
taking the screens down, not after it (issue 36: with 100 hosts the close began 0.6 s after `q`,
once every screen was gone, and the app's exit took 2.2 s). The close runs once, to its end."""

from __future__ import annotations

import asyncio

from console.core.state import HostState
from tests.kit.hosts import wait_for


async def test_q_starts_the_fleets_close_while_its_screen_is_still_up_and_the_app_waits_for_it() -> None:
    from console.ui.app import ConsoleApp

    states = [HostState(f"gpu-{i:02d}", label=f"gpu-{i:02d}") for i in range(3)]
    seen: list[bool] = []
    release = asyncio.Event()
    closed: list[bool] = []

    async def close() -> None:
        assert app.fleet_screen is not None
        seen.append(app.fleet_screen in app.screen_stack)  # the screen still up: the close began at `q`
        await release.wait()  # the hosts' connections take a while to close
        closed.append(True)

    app = ConsoleApp.for_fleet(states, close=close, title="test")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: app.screen is app.fleet_screen, timeout=30)
        await pilot.press("q")
        await wait_for(lambda: bool(seen), timeout=30)
        assert seen == [True]
        assert not closed
        release.set()
    assert closed == [True]  # the app waited for the close, which ran once, to its end
