"""The benchmark view's client token bins (one per wall-clock second) stay within the chart's window
as they are written: a headless core (`serve`) draws no chart, and the looped soak's core held 15
more bins after every quick benchmark, carried in every snapshot, for as long as it ran."""

from __future__ import annotations

from console.domain.analysis.bench_view import WINDOW_S, BenchView
from console.domain.bench.runner import Progress


def test_the_bins_of_many_runs_stay_within_the_window_without_a_chart() -> None:
    view = BenchView()
    for run in range(6):  # six runs, each WINDOW_S / 2 seconds of tokens, one after another
        began = 1000.0 + run * (WINDOW_S / 2 + 10)
        view.start(f"run {run}", WINDOW_S // 2, now_s=began)
        for i in range(WINDOW_S // 2):
            view.progress(Progress(i + 1, 0, WINDOW_S // 2, [i + 0.5], 50.0, [], run_started_wall_s=began))
        view.end()
    newest = max(view.client_bins)
    assert newest == int(1000.0 + 5 * (WINDOW_S / 2 + 10) + WINDOW_S // 2 - 1)
    assert min(view.client_bins) >= newest - WINDOW_S
    assert len(view.client_bins) <= WINDOW_S + 1
    # what the chart shows of the last seconds is all there
    series = view.series(newest + 1.0, 60)["client tok/s"]
    assert len(series) == 60 and all(v == 1.0 for _, v in series)
