"""Colour means one thing (issue 22 item 16): red (and magenta) only for errors. The REPLAY badge,
the GPU utilization history, the diff's old and removed values are not red; fleet rows are
coloured by their server's status."""

from __future__ import annotations

import dataclasses
import time

from rich.text import Text

from console.core.state import HostInfo, HostState, ReadingChanged
from tests.kit.readings import gpu, gpu_reading

ALARM = ("red", "magenta")


def alarm_spans(text: Text) -> list[str]:
    return [str(span.style) for span in text.spans if any(c in str(span.style) for c in ALARM)]


def test_the_replay_badge_is_not_an_alarm() -> None:
    from console.ui.panes.header import format_header

    assert alarm_spans(format_header("gpu-01", False, None, None, mode="replay")) == []


def test_the_gpu_utilization_history_is_not_red_or_magenta() -> None:
    from console.ui.panes.gpu import format_gpu_status

    state = HostState("h")
    now = time.time()
    for i in range(30):
        state.apply(ReadingChanged("h", "gpu", gpu_reading(gpu(0, 20_000, util=10 * (i % 10)),
                                                          gpu(1, 30_000, util=50), at=now - 30 + i)))
    text = format_gpu_status(state.reading("gpu"), 160, 12, now_s=now)
    assert "▁" in text.plain or "█" in text.plain  # the history is drawn
    assert alarm_spans(text) == []


def test_the_diffs_old_and_removed_values_are_not_red() -> None:
    from console.ui.panes import service

    assert "red" not in service.MARK["removed"][1] and "red" not in service.OLD


def test_fleet_rows_are_coloured_by_status() -> None:
    from console.domain.fleet.rows import fleet_row
    from console.ui.fleet_screen import FleetScreen

    state = HostState("gpu-01")
    state.apply(HostInfo("gpu-01", "gpu-01"))
    row = fleet_row(state)
    styles = {status: FleetScreen._cell(dataclasses.replace(row, server_status=status), "server", status)
              for status in ("ready", "starting", "degraded", "dead")}
    assert all(isinstance(cell, Text) for cell in styles.values())
    assert "green" in str(styles["ready"].style) and "red" in str(styles["dead"].style)
    assert "red" not in str(styles["starting"].style) and "red" not in str(styles["degraded"].style)


def test_the_sweep_axis_says_seconds_and_a_few_runs_are_marked() -> None:
    """Issue 22 item 17: "2.0 s", not "2kms"; a sweep of four points shows each point."""
    from console.domain.analysis.bench_view import BenchView
    from console.ui.panes.bench import sweep_chart

    view = BenchView()
    for c, tok, p99 in ((1, 100.0, 40.0), (4, 380.0, 300.0), (16, 1200.0, 900.0), (64, 2100.0, 2000.0)):
        view.finish({"max_concurrency": c, "output_throughput": tok, "p99_ttft_ms": p99})
    for width, height in ((76, 10), (116, 14)):
        plain = sweep_chart(view, width, height).plain
        assert "kms" not in plain and "2.0 s" in plain, plain
        assert plain.count("●") >= 4, plain  # every run a point (the two series share cells at times)
        assert "← ⣿ output tok/s" in plain and "⣿ p99 TTFT →" in plain  # each axis named by its series
