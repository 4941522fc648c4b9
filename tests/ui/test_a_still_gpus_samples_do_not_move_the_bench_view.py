"""A quiet host's GPU at 0 %: each 1 Hz sample bumped the bench view's version, so each of the
screen's flushes named "bench" as a cause and asked the bench pane to look again (15-16 times in
the quiet host's 30 s, issue 36), though the only thing such a sample changes on the bench pane is
how far a flat line reaches, which the chart's own clock draws. A sample at the value of the two
before it, within seconds of them, now moves no version; a new value, the series' first points or
a sample after a silence still do, and the chart still shows the line reaching "now"."""

from __future__ import annotations

from console.core.state import HostState, ReadingChanged
from console.domain.analysis.bench_view import FLAT_SAMPLE_GAP_S, BenchView
from console.model import GpuDevice, GpuStatus, Reading
from console.ui.app import ConsoleApp
from tests.kit.clocks import Clock


def _gpu(state: HostState, at: float, util: int) -> None:
    gpu = GpuDevice(0, "x", "GPU-0", 1, 2, util, 40, 100.0, 600.0)
    state.apply(ReadingChanged("h", "gpu", Reading("gpu", GpuStatus("nvml", (gpu,), sampled_at_s=at), at)))


def test_a_sample_at_the_same_value_is_held_without_a_new_version() -> None:
    view = BenchView()
    view.add_gpu(100.0, 0.0)
    view.add_gpu(101.0, 0.0)  # the series' first two points: a line appears
    version = view.version
    assert version == 2
    for t in range(102, 132):
        view.add_gpu(float(t), 0.0)
    # before: 30 more versions, one per sample
    assert view.version == version
    assert len(view.gpu_util) == 32 and view.gpu_util[-1] == (131.0, 0.0)  # every sample kept

    view.add_gpu(132.0, 35.0)  # a new value moves it
    assert view.version == version + 1
    view.add_gpu(133.0, 35.0)  # the value before it was 0: the line bends here
    assert view.version == version + 2
    view.add_gpu(134.0, 35.0)
    assert view.version == version + 2
    view.add_gpu(134.0 + FLAT_SAMPLE_GAP_S + 1, 35.0)  # after a silence: news of its own
    assert view.version == version + 3


async def test_a_still_gpu_is_no_bench_flush_cause_and_its_line_still_reaches_now() -> None:
    clock = Clock()
    state = HostState("h", label="h", clock=clock)
    for age in range(10, 0, -1):  # the console opened 10 s ago: 10 samples of 0 %
        _gpu(state, clock.t - age, 0)
    app = ConsoleApp(state, None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.host_screen
        pane = screen.pane("bench")
        pane.redraw(force=True)
        assert "GPU util %" in pane.query_one("#bench-chart").render().plain
        screen.flush()
        bench, gpu = screen.flush_causes["bench"], screen.flush_causes["gpu"]
        for _ in range(30):  # 30 s of a still GPU, a sample and a flush each second
            clock.t += 1.0
            _gpu(state, clock.t, 0)
            screen.flush()
            pane.update_age()
        assert screen.flush_causes["gpu"] - gpu == 30  # the GPU pane is told of every sample
        # before: 30 (one per sample)
        assert screen.flush_causes["bench"] - bench == 0
        # The line is drawn to "now": the picture's flat GPU series ends within two dots of it.
        inputs = pane._inputs
        assert inputs is not None and inputs.now_s >= clock.t
        points = inputs.series(inputs.now_s, 120)["GPU util %"]
        assert points and points[-1][0] >= -2 * inputs.dot_s and points[0][0] <= -30

        clock.t += 1.0
        _gpu(state, clock.t, 70)  # a new value is news for the bench pane at once
        screen.flush()
        assert screen.flush_causes["bench"] - bench == 1
        await pilot.pause()
