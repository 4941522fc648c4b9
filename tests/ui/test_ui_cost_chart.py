"""Issue 23 item 3: the time chart is not rebuilt with plotext when only time passed within its
resolution. A flat GPU series sampled every second scrolled through a plotext rebuild at every
redraw (~8 ms each, every 5 s on a quiet host) to draw the same picture; the chart now keys its
pictures by its inputs at its own resolution (braille dots), and a real change is drawn."""

from __future__ import annotations

from typing import Any

import pytest

from console.domain.analysis.bench_view import BenchView
from console.core.state import HostState, ReadingChanged
from console.model import GpuDevice, GpuStatus, Reading
from tests.kit.clocks import Clock


def _gpu(state: HostState, at: float, util: int) -> None:
    gpu = GpuDevice(0, "x", "GPU-0", 1, 2, util, 40, 100.0, 600.0)
    state.apply(ReadingChanged("h", "gpu", Reading("gpu", GpuStatus("nvml", (gpu,), sampled_at_s=at), at)))


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    import console.ui.panes.bench as bench

    calls: list[float] = []
    real = bench.chart

    def counting(view: Any, width: int, height: int, now_s: float, span_s: int = 120) -> Any:
        calls.append(now_s)
        return real(view, width, height, now_s, span_s)

    monkeypatch.setattr(bench, "chart", counting)
    return calls


async def test_a_flat_series_scrolling_is_not_rebuilt_and_a_change_is(builds: list[float]) -> None:
    from console.ui.app import ConsoleApp

    clock = Clock()
    state = HostState("h", label="h", clock=clock)
    t = clock.t - 150.0
    while t < clock.t:  # 150 s of a flat 37 % already there
        _gpu(state, t, 37)
        t += 1.01
    app = ConsoleApp(state, None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        pane = app.host_screen.pane("bench")
        shown = pane.query_one("#bench-chart")
        assert "GPU util %" in shown.render().plain
        builds.clear()
        for _ in range(60):  # a minute: a sample a second, a redraw a second
            clock.t += 1.01
            _gpu(state, clock.t - 0.2, 37)
            pane.redraw(force=True)
        assert len(builds) <= 12, len(builds)  # before: 60, one per redraw
        before = shown.render().plain
        n = len(builds)
        _gpu(state, clock.t, 95)  # a real change: drawn at once
        clock.t += 0.5
        pane.redraw(force=True)
        await pilot.pause()
        assert len(builds) == n + 1
        assert shown.render().plain != before


def test_the_chart_at_its_resolution_draws_what_the_exact_chart_draws() -> None:
    """The inputs at the chart's resolution keep every #22 behaviour: the legend row, the size,
    the same rows and labels (points move by less than a dot)."""
    from console.ui.panes.bench import ChartInputs, chart

    now = 10_000.0
    view = BenchView()
    for i in range(120):
        view.add_gpu(now - 120 + i, 20.0 + (i % 30))
    view.add_server_points([(now - 120 + i, 400.0 + 10 * (i % 20), None) for i in range(120)])
    view.mark(now - 62, "old server stopped")
    inputs = ChartInputs(view, 76, now)
    snapped = chart(inputs, 76, 10, inputs.now_s).plain.split("\n")
    exact = chart(view, 76, 10, now).plain.split("\n")
    assert snapped[0] == exact[0] and len(snapped) == len(exact) == 10
    assert snapped[-1] == exact[-1]  # the x ticks
    assert [line[:3] for line in snapped] == [line[:3] for line in exact]  # the left axis' labels
    assert any("old server" in line for line in snapped)
    assert ChartInputs(view, 76, now + 0.1).key == inputs.key  # within a dot: the same picture
