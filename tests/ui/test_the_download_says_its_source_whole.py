"""The download pane's source line, at the grid's 56 columns, read 'the simulated host's Hub file list
· /shared/models/Qw': the line cut at the width mid-name. The source is said whole, the directory by
its last name when both do not fit, and a line never runs past the pane nor stops mid-word."""

from __future__ import annotations

import pytest

from console.domain.analysis.download import DownloadProgress
from console.model import Reading
from console.ui.panes.download import format_download

NOTE = "the simulated host's Hub file list"


def _pane(width: int, note: str = NOTE, model_dir: str = "/shared/models/Qwen3.5-122B-A10B") -> list[str]:
    p = DownloadProgress(model_dir, "Qwen/Qwen3.5-122B-A10B", "hub", 10, 10, 1, 1, 1, 1, (), None, None, None,
                         10**12, True, True, (), 0.0, expected_note=note)
    return format_download(Reading("download", p, 0.0), width, 12, 0).plain.splitlines()


def test_wide_the_source_and_the_whole_directory() -> None:
    assert f"{NOTE} · /shared/models/Qwen3.5-122B-A10B" in _pane(100)


@pytest.mark.parametrize("width", [56, 60, 68])
def test_narrow_the_source_whole_and_the_directory_by_its_name(width: int) -> None:
    lines = _pane(width)
    assert f"{NOTE} · …/Qwen3.5-122B-A10B" in lines, lines
    assert all(len(line) <= width for line in lines), lines


@pytest.mark.parametrize("width", [47, 50, 53])
def test_narrower_the_directorys_name_keeps_both_ends(width: int) -> None:
    lines = _pane(width)
    (line,) = [line for line in lines if line.startswith(NOTE)]
    assert line.startswith(f"{NOTE} · Qwen") and line.endswith("-A10B") and "…" in line, lines
    assert all(len(line) <= width for line in lines), lines


def test_too_narrow_for_the_name_the_source_alone() -> None:
    lines = _pane(40)
    assert NOTE in lines and not any(line.startswith(NOTE + " ·") for line in lines), lines


def test_a_source_longer_than_the_pane_stops_at_a_word() -> None:
    long_note = "weights only: index.json total_size (tensor bytes)"
    (line,) = [line for line in _pane(32, long_note) if line.startswith("weights")]
    assert len(line) <= 32 and line.endswith("…"), line
    assert line[:-1] in long_note and long_note[len(line) - 1] == " ", line
