"""The benchmark pane says what a run was (issue 35 item 5): the run before the swap beside the one
after on the pane itself (the core's like-workload pair), a peak that is a peak (never below the
mean output rate), and a sweep stopped with `x` shown as stopped, with how many of its requests
went out. At 80x24, 120x40 and 200x60."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.core.state import BenchChanged
from tests.kit.hosts import wait_for
from tests.kit.screens import offline_state, screen_text

SIZES = [(80, 24), (120, 40), (200, 60)]
WORK = {"host": "gpu-01", "max_concurrency": 4, "random_input_len": 256, "random_output_len": 128,
        "dataset_name": "random", "completed": 8, "failed": 0}
BEFORE = {**WORK, "model": "qwen3.5-397b", "timestamp": 1_000.0, "output_throughput": 470.0,
          "max_output_tokens_per_s": 512.0, "request_throughput": 1.1}
AFTER = {**WORK, "model": "qwen3.5-122b", "timestamp": 2_000.0, "output_throughput": 4280.0,
         "max_output_tokens_per_s": 4650.0, "request_throughput": 9.9}


def _bench_text(app: object) -> str:
    pane = app.host_screen.pane("bench")  # type: ignore[attr-defined]
    return " ".join(screen_text(app).split()) if pane.display else ""


@pytest.mark.parametrize("size", SIZES)
async def test_the_run_before_the_swap_stands_beside_the_run_after_it(size: tuple[int, int]) -> None:
    from console.ui.app import ConsoleApp

    state = offline_state()
    state.apply(BenchChanged("gpu-01", "history", runs=(BEFORE,)))
    app = ConsoleApp(state, None)
    async with app.run_test(size=size) as pilot:
        await pilot.press("5")  # the benchmark pane, whole
        await pilot.pause()
        # The new model's run, this session, after the swap.
        state.apply(BenchChanged("gpu-01", "start", label="c=4 · 8 × 256/128", total=8))
        state.apply(BenchChanged("gpu-01", "result", record=dict(AFTER)))
        state.apply(BenchChanged("gpu-01", "done"))
        await wait_for(lambda: "4,280" in _bench_text(app), 10)
        text = _bench_text(app)
        assert "470" in text and "4,280" in text, text
        assert "before" in text and "after" in text and "qwen3.5-3" in text and "qwen3.5-1" in text, text
        assert "before/after on gpu-01" in text, text


@pytest.mark.parametrize("size", SIZES)
async def test_a_peak_below_its_own_mean_is_not_shown_as_a_peak(size: tuple[int, int]) -> None:
    from console.ui.app import ConsoleApp

    state = offline_state()
    app = ConsoleApp(state, None)
    async with app.run_test(size=size) as pilot:
        await pilot.press("5")
        await pilot.pause()
        # A record written with whole-second bins (bench_serving's, an older console's): 610 "peak" beside 761.
        old = {**WORK, "model": "qwen3.5-122b", "timestamp": 3_000.0, "output_throughput": 761.0,
               "max_output_tokens_per_s": 610.0}
        state.apply(BenchChanged("gpu-01", "start", label="c=4", total=8))
        state.apply(BenchChanged("gpu-01", "result", record=old))
        state.apply(BenchChanged("gpu-01", "done"))
        await wait_for(lambda: "761" in _bench_text(app), 10)
        assert "610" not in _bench_text(app)


async def test_a_sweep_stopped_with_x_says_so_and_how_many_requests_went_out(tmp_path: Path) -> None:
    from console.ui.app import ConsoleApp
    from console.demo.hostsim.process import SimulatorThread
    from console.host.session import HostSession, make_transport

    sim = SimulatorThread()
    profile = sim.start()
    try:
        app = ConsoleApp.for_session(HostSession(profile, make_transport(profile), demo=True,
                                                 bench_path=tmp_path / "bench.jsonl"))
        await _stop_a_sweep(app)
    finally:
        sim.stop()


async def _stop_a_sweep(app: object) -> None:
    async with app.run_test(size=(120, 40)) as pilot:  # type: ignore[attr-defined]
        await wait_for(lambda: app.state.data("server") is not None, 30, 0.2)
        runner = app.runner
        assert runner.start_bench("sweep", [(1, 8, 16, 400), (4, 8, 16, 16), (16, 32, 16, 16)]) is None
        await wait_for(lambda: (app.state.bench.live is not None and app.state.bench.live.done >= 1)
                       or app.state.bench.error is not None, 60, 0.1)
        assert app.state.bench.error is None, app.state.bench.error
        app.host_screen.pane("bench").focus()
        await pilot.press("x")
        await wait_for(lambda: runner.bench is not None and not runner.bench.running
                       and app.state.bench.live is None, 60, 0.1)
        view = app.state.bench
        note = view.stopped_note or ""
        assert note.startswith("sweep stopped (x) in run 1 of 3: "), note
        assert " of 8 requests sent, " in note and "not run: c=4, c=16" in note, note
        assert len(view.results) == 1 and view.results[0]["stopped"]
        await wait_for(lambda: "sweep stopped (x) in run 1 of 3" in _bench_text(app), 10, 0.1)
        assert "c=1 stopped" in _bench_text(app)


async def test_at_200_columns_the_results_stand_at_the_panes_edge_not_in_empty_space() -> None:
    """Issue 35 item 9: at 200x60 the table floated with 40 empty columns right of it."""
    from console.ui.app import ConsoleApp

    state = offline_state()
    state.apply(BenchChanged("gpu-01", "history", runs=(BEFORE,)))
    app = ConsoleApp(state, None)
    async with app.run_test(size=(200, 60)) as pilot:
        state.apply(BenchChanged("gpu-01", "start", label="c=4 · 8 × 256/128", total=8))
        state.apply(BenchChanged("gpu-01", "result", record=dict(AFTER)))
        state.apply(BenchChanged("gpu-01", "done"))
        await wait_for(lambda: "4,280" in screen_text(app), 10)
        await pilot.pause()
        row = next(line for line in screen_text(app).splitlines() if "out tok/s" in line)
        inside = row.rstrip().rstrip("│")
        assert len(inside) - len(inside.rstrip()) <= 3, row  # the figures end at the border
