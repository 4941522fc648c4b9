"""The benchmark pane: the results table takes the width its columns need and the chart the rest;
a run more widened the table while the chart, drawn at its old width as the run came (layout=False:
its size is the pane's), ran under the table. The sweep chart, which time does not move, stayed so
until the next run. And a column names its model by its last words
behind '…' ('…122B-A10B'), never a word cut ('n3.5-122B-A10B')."""

from __future__ import annotations

import pytest
from textual.widgets import Static

from console.core.state import BenchChanged
from console.ui.panes.bench import short_model
from tests.kit.hosts import wait_for
from tests.kit.screens import offline_state

RUN = {"host": "gpu-01", "random_input_len": 256, "random_output_len": 128, "dataset_name": "random",
       "completed": 8, "failed": 0, "model": "Qwen/Qwen3.5-122B-A10B", "output_throughput": 470.0,
       "max_output_tokens_per_s": 512.0, "request_throughput": 1.1, "p99_ttft_ms": 120.0,
       "median_ttft_ms": 80.0, "median_tpot_ms": 12.0, "p99_itl_ms": 30.0}


@pytest.mark.parametrize("size", [(120, 40), (200, 60)])
async def test_the_sweep_chart_is_drawn_again_at_the_width_the_wider_table_leaves(size: tuple[int, int]) -> None:
    from console.ui.app import ConsoleApp

    state = offline_state()
    app = ConsoleApp(state, None)
    async with app.run_test(size=size) as pilot:
        pane = app.host_screen.pane("bench")
        pane.IDLE_CHART_EVERY_S = 0.0  # each run drawn as it comes (a run more than 5 s after the last)
        chart = pane.query_one("#bench-chart", Static)
        now = pane.view.now()
        for i, c in enumerate((1, 4)):
            state.apply(BenchChanged("gpu-01", "result", record={**RUN, "max_concurrency": c, "timestamp": now + i,
                                                                 "output_throughput": 400.0 * (i + 1)}))
        pane.action_toggle_chart()  # the sweep chart: time does not move it
        await pilot.pause()

        def drawn_width() -> int:
            return max(len(line) for line in str(chart.render()).splitlines())

        await wait_for(lambda: drawn_width() == chart.content_size.width, 10, 0.05)
        first = chart.content_size.width
        for i, c in enumerate((16, 64)):
            state.apply(BenchChanged("gpu-01", "result", record={**RUN, "max_concurrency": c, "timestamp": now + 2 + i,
                                                                 "output_throughput": 1600.0 + 400 * i}))
        await wait_for(lambda: chart.content_size.width < first, 10, 0.05)  # the table widened
        await wait_for(lambda: drawn_width() <= chart.content_size.width, 10, 0.05)
        assert drawn_width() >= chart.content_size.width - 1, (drawn_width(), chart.content_size.width)


def test_a_long_model_name_keeps_its_last_words_behind_an_ellipsis() -> None:
    assert short_model("Qwen/Qwen3.5-122B-A10B", 14) == "…122B-A10B"
    assert short_model("Qwen/Qwen3.5-397B-A17B-FP8", 14) == "…397B-A17B-FP8"
    assert short_model("qwen3.5-397b", 14) == "qwen3.5-397b"
    assert short_model("averyveryverylongnamewithoutbreaks", 14) == "averyv…tbreaks"
