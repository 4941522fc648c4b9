"""Colour means one thing (issue 22 item 16): red (and magenta) only for errors. The REPLAY badge,
the GPU utilization history, the diff's old and removed values are not red; fleet rows are
coloured by their server's status."""

from __future__ import annotations

import dataclasses
import time

from rich.text import Text

from console.core.state import HostInfo, HostState, ReadingChanged
from tests.test_core import gpu, gpu_reading

ALARM = ("red", "magenta")


def alarm_spans(text: Text) -> list[str]:
    return [str(span.style) for span in text.spans if any(c in str(span.style) for c in ALARM)]


def test_the_replay_badge_is_not_an_alarm() -> None:
    from console.panes.header import format_header

    assert alarm_spans(format_header("gpu-01", False, None, None, mode="replay")) == []


def test_the_gpu_utilization_history_is_not_red_or_magenta() -> None:
    from console.panes.gpu import format_gpu_status

    state = HostState("h")
    now = time.time()
    for i in range(30):
        state.apply(ReadingChanged("h", "gpu", gpu_reading(gpu(0, 20_000, util=10 * (i % 10)),
                                                          gpu(1, 30_000, util=50), at=now - 30 + i)))
    text = format_gpu_status(state.reading("gpu"), 160, 12, now_s=now)
    assert "▁" in text.plain or "█" in text.plain  # the history is drawn
    assert alarm_spans(text) == []


def test_the_diffs_old_and_removed_values_are_not_red() -> None:
    from console.panes import service

    assert "red" not in service.MARK["removed"][1] and "red" not in service.OLD


def test_fleet_rows_are_coloured_by_status() -> None:
    from console.fleet.rows import fleet_row
    from console.fleet.screen import FleetScreen

    state = HostState("gpu-01")
    state.apply(HostInfo("gpu-01", "gpu-01"))
    row = fleet_row(state)
    styles = {status: FleetScreen._cell(dataclasses.replace(row, server_status=status), "server", status)
              for status in ("ready", "starting", "degraded", "dead")}
    assert all(isinstance(cell, Text) for cell in styles.values())
    assert "green" in str(styles["ready"].style) and "red" in str(styles["dead"].style)
    assert "red" not in str(styles["starting"].style) and "red" not in str(styles["degraded"].style)
