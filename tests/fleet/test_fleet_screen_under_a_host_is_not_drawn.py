"""The fleet screen under a host's screen (Enter on a row) draws nothing while it is covered: its
timer's refreshes are skipped (issue 36: nothing drawn for what the operator cannot see), the
rows' news is kept, and the return to the fleet draws every row as it is then, at once."""

from __future__ import annotations

import time

from console.core.state import ConnectionChanged, HostState, ReadingChanged
from console.host.transport.base import ConnectionState
from console.model import GpuDevice, GpuStatus, Reading
from tests.kit.hosts import wait_for


def _gpu(used: int) -> GpuDevice:
    return GpuDevice(0, "NVIDIA H200", "GPU-0", used, 143771, 5, 40, 120.0, 700.0)


def _states(count: int) -> list[HostState]:
    now = time.time()
    states = []
    for i in range(count):
        host = f"gpu-{i:02d}"
        state = HostState(host)
        state.apply(ConnectionChanged(host, ConnectionState(host, "connected", now)))
        state.apply(ReadingChanged(host, "gpu", Reading("gpu", GpuStatus("nvml", (_gpu(1000),), sampled_at_s=now),
                                                        now)))
        states.append(state)
    return states


async def test_a_covered_fleet_screen_draws_nothing_and_the_return_shows_the_newest() -> None:
    from console.ui.app import FleetApp
    from console.ui.fleet_screen import FleetScreen, HostScreen

    states = _states(3)
    app = FleetApp(states, host_for=lambda key: (next(s for s in states if s.host == key), None, None))
    async with app.run_test(size=(120, 40)) as pilot:
        fleet = app.fleet_screen
        assert isinstance(fleet, FleetScreen)
        await wait_for(lambda: app.screen is fleet and fleet.rows, timeout=30)
        fleet.open_host("gpu-01")
        await wait_for(lambda: isinstance(app.screen, HostScreen), timeout=30)
        refreshes = len(fleet.refresh_times_s)
        now = time.time()
        states[2].apply(ReadingChanged("gpu-02", "gpu", Reading(
            "gpu", GpuStatus("nvml", (_gpu(99_000),), sampled_at_s=now), now)))
        for _ in range(3):  # the fleet's timer, as it fires every 2 s: covered, nothing drawn
            fleet._tick()
        assert len(fleet.refresh_times_s) == refreshes
        assert fleet.rows["gpu-02"].memory_used_mib == 1000  # the row as last drawn
        await pilot.press("escape")
        await wait_for(lambda: app.screen is fleet, timeout=30)
        await wait_for(lambda: len(fleet.refresh_times_s) > refreshes, timeout=30)  # drawn at the return
        assert fleet.rows["gpu-02"].memory_used_mib == 99_000
