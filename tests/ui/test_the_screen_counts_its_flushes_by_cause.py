"""The host screen counts what each flush was for (`flush_causes`: a count per source, header,
swap, ages or presence handed on), so a benchmark says why the screen was drawn in a window,
not only how often (issue 36 item 1: the compositor's refreshes counted per cause)."""

from __future__ import annotations

from console.core.state import HostState, ReadingChanged
from console.model import DiskUsage, GpuDevice, GpuStatus, HostSummary, Reading
from console.ui.app import ConsoleApp
from tests.kit.hosts import wait_for


def _gpu(used: int, at: float) -> Reading[GpuStatus]:
    gpus = tuple(GpuDevice(i, "NVIDIA H200", f"GPU-{i}", used, 143771, 0, 40, 118.7, 700.0) for i in range(2))
    return Reading("gpu", GpuStatus("nvidia-smi-stream", gpus, sampled_at_s=at), at)


def _host(load: float, at: float) -> Reading[HostSummary]:
    disk = DiskUsage("/", "/", 500 * 10**9, 100 * 10**9, 400 * 10**9)
    return Reading("host", HostSummary("gpu-a", "6.1", 1000.0, load, 0.1, 0.1, 2, (disk,)), at)


async def test_each_flush_is_counted_by_what_it_handed_on() -> None:
    state = HostState("h")
    app = ConsoleApp(state, None, mode="replay")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.host_screen
        before = dict(screen.flush_causes)
        flushes = screen.flushes
        state.apply(ReadingChanged("h", "gpu", _gpu(41579, 100.0)))
        await wait_for(lambda: screen.flushes > flushes, timeout=30)
        assert screen.flush_causes["gpu"] == before.get("gpu", 0) + 1
        assert screen.flush_causes["host"] == before.get("host", 0)  # nothing said for the host

        flushes = screen.flushes
        state.apply(ReadingChanged("h", "host", _host(0.5, 101.0)))
        await wait_for(lambda: screen.flushes > flushes, timeout=30)
        assert screen.flush_causes["host"] == before.get("host", 0) + 1
        # The header draws the host's reading from "host" (streaming news, held with the rest): no
        # header cause of its own, which would make it news never held.
        assert screen.flush_causes["header"] == before.get("header", 0)
        assert sum(screen.flush_causes.values()) >= screen.flushes
        await pilot.pause()
