"""A quiet host's chart: its GPU utilization a flat line that only grows longer while its
history fills the chart's two minutes. It was rebuilt with plotext and repainted every 5 s (6
times in the quiet host's 30 s window, a fifth of the console's CPU there; issue 36 item 1). The
same flat lines, only longer, are now drawn every 30 s (`FLAT_GROWTH_EVERY_S`); a new value, a
mark, or a line that stopped short of "now" is drawn at the old cadence."""

from __future__ import annotations

from console.core.state import HostState, ReadingChanged
from console.model import GpuDevice, GpuStatus, Reading
from tests.kit.clocks import Clock


def _gpu(state: HostState, at: float, util: int) -> None:
    gpu = GpuDevice(0, "x", "GPU-0", 1, 2, util, 40, 100.0, 600.0)
    state.apply(ReadingChanged("h", "gpu", Reading("gpu", GpuStatus("nvml", (gpu,), sampled_at_s=at), at)))


async def test_a_flat_line_growing_is_drawn_every_30s_and_a_new_value_at_once() -> None:
    from console.ui.app import ConsoleApp

    clock = Clock()
    state = HostState("h", label="h", clock=clock)
    for age in range(10, 0, -1):  # the console opened 10 s ago: 10 samples of 0 %
        _gpu(state, clock.t - age, 0)
    app = ConsoleApp(state, None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        pane = app.host_screen.pane("bench")
        shown = pane.query_one("#bench-chart")
        pane.redraw(force=True)
        assert "GPU util %" in shown.render().plain
        builds, draws = pane.chart_builds, pane.chart_draws
        for _ in range(60):  # a minute of a still GPU, a sample and a redraw each second
            clock.t += 1.0
            _gpu(state, clock.t, 0)
            pane.redraw()
        # before: 12 rebuilds and 12 repaints (one per 5 s)
        assert pane.chart_builds - builds <= 2 and pane.chart_draws - draws <= 2, (
            pane.chart_builds - builds, pane.chart_draws - draws)

        n = pane.chart_draws  # a new value: drawn at the 5 s cadence, not 30 s later
        for _ in range(6):
            clock.t += 1.0
            _gpu(state, clock.t, 60)
            pane.redraw()
        assert pane.chart_draws > n

        n = pane.chart_draws  # the samples stop: the line ends short of "now" within 5 s, drawn
        for _ in range(8):
            clock.t += 1.0
            pane.redraw()
        assert pane.chart_draws > n
        await pilot.pause()
