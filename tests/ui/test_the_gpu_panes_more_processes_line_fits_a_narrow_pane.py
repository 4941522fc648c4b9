"""The GPU pane at 80x24 (32 columns) ended its process list with '… 2 more processes (1': the line
was cropped mid-hint. In a narrow pane it says '… 2 more (1 maximizes)', whole; one left over is
'1 more process'."""

from __future__ import annotations

from dataclasses import replace

from console.model import GpuProcess
from console.ui.panes.gpu import format_gpu_status
from tests.kit.readings import gpu, gpu_reading


def _reading(n_gpus: int) -> object:
    return gpu_reading(*(replace(gpu(i, 88_000), processes=(GpuProcess(41200 + i, f"sglang::scheduler_TP{i}",
                                                                       88_000),))
                         for i in range(n_gpus)))


def _more_line(width: int, height: int, n_gpus: int = 4) -> str:
    lines = format_gpu_status(_reading(n_gpus), width, height).plain.splitlines()  # type: ignore[arg-type]
    return next(ln for ln in lines if "more" in ln)


def test_a_narrow_pane_says_the_hint_whole() -> None:
    line = _more_line(30, 9)
    assert len(line) <= 30 and line.rstrip().endswith("(1 maximizes)"), line


def test_a_wide_pane_names_the_processes() -> None:
    line = _more_line(56, 9)
    assert line.strip().startswith("…") and "more processes (1 maximizes)" in line, line


def test_one_left_over_is_one_process() -> None:
    line = _more_line(56, 10)
    assert "1 more process (1 maximizes)" in line, line
