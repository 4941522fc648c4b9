"""The console's own cost on a quiet host: views repaint only what changed. A new reading every
second whose drawn text is the same must not repaint its pane; a pane whose text changes but
keeps its line count repaints alone, without laying out the whole screen; the one-line header
never lays out the screen."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from console.ui.app import ConsoleApp
from console.core.state import HostState, ReadingChanged
from console.model import DiskUsage, GpuDevice, GpuStatus, HostSummary, Reading
from console.ui.panes.gpu import GpuPane
from console.ui.panes.header import HostHeader
from tests.kit.hosts import wait_for


def gpu_reading(used: int, at: float) -> Reading[GpuStatus]:
    gpus = tuple(GpuDevice(i, "NVIDIA H200", f"GPU-{i}", used, 143771, 0, 40, 118.7, 700.0) for i in range(2))
    return Reading("gpu", GpuStatus("nvidia-smi-stream", gpus, sampled_at_s=at), at)


def host_reading(load: float, at: float) -> Reading[HostSummary]:
    disk = DiskUsage("/", "/", 500 * 10**9, 100 * 10**9, 400 * 10**9)
    return Reading("host", HostSummary("gpu-a", "6.1", 1000.0, load, 0.1, 0.1, 2, (disk,)), at)


@contextmanager
def counting_refreshes(widget: Any) -> Iterator[list[bool]]:
    """Every refresh of `widget`, as whether it asked for a layout."""
    calls: list[bool] = []
    original = widget.refresh

    def refresh(*args: Any, **kwargs: Any) -> Any:
        calls.append(bool(kwargs.get("layout")))
        return original(*args, **kwargs)

    widget.refresh = refresh
    try:
        yield calls
    finally:
        del widget.refresh


async def test_a_reading_that_draws_the_same_text_does_not_repaint_its_pane() -> None:
    state = HostState("h")
    app = ConsoleApp(state, None, mode="replay")
    async with app.run_test(size=(120, 40)) as pilot:
        # 70 samples fill the 60-sample history: from then on the same values draw the same text.
        for t in range(70):
            state.apply(ReadingChanged("h", "gpu", gpu_reading(41579, 100.0 + t)))
        await pilot.pause()
        pane = app.query_one(GpuPane)
        screen = app.host_screen
        with counting_refreshes(pane) as calls:
            flushes = screen.flushes
            for t in range(70, 75):
                state.apply(ReadingChanged("h", "gpu", gpu_reading(41579, 100.0 + t)))
            # The screen flushes streaming news once a second at most: wait for it, then look.
            await wait_for(lambda: screen.flushes > flushes, timeout=30)
            await pilot.pause()
        assert calls == []
        with counting_refreshes(pane) as calls:
            flushes = screen.flushes
            state.apply(ReadingChanged("h", "gpu", gpu_reading(90000, 176.0)))
            await wait_for(lambda: screen.flushes > flushes, timeout=30)
            await pilot.pause()
        assert calls, "a changed reading repaints the pane"
        assert not any(calls), "the same number of lines: the pane alone, no layout of the screen"
        assert "87.9" in str(pane.render())  # 90000 MiB is on screen


async def test_the_header_redraws_its_line_without_a_layout() -> None:
    state = HostState("h")
    app = ConsoleApp(state, None, mode="replay")
    async with app.run_test(size=(120, 40)) as pilot:
        state.apply(ReadingChanged("h", "host", host_reading(0.10, 100.0)))
        await pilot.pause()
        header = app.query_one(HostHeader)
        screen = app.host_screen
        # The host summary is streaming news, held up to a second after the last flush: waited for.
        with counting_refreshes(header) as calls:
            flushes = screen.flushes
            state.apply(ReadingChanged("h", "host", host_reading(0.10, 105.0)))  # same text
            await wait_for(lambda: screen.flushes > flushes, timeout=30)
            await pilot.pause()
        assert calls == []
        with counting_refreshes(header) as calls:
            flushes = screen.flushes
            state.apply(ReadingChanged("h", "host", host_reading(1.50, 110.0)))
            await wait_for(lambda: screen.flushes > flushes, timeout=30)
            await pilot.pause()
        assert calls and not any(calls)
        assert "1.50" in str(header.render())
