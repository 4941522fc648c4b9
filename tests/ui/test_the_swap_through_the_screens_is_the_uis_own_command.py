"""The demo's swap driven through the console's screens runs the App, so it stands on the UI's floor
(console/ui/swap_tui_demo.py), not in the demo below it; `swap_demo --tui` says where it went."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from console.demo import swap_demo


def test_the_swap_through_the_screens_is_a_command_of_the_ui() -> None:
    spec = importlib.util.find_spec("console.ui.swap_tui_demo")
    assert spec is not None and spec.origin is not None, spec
    out = subprocess.run([sys.executable, "-m", "console.ui.swap_tui_demo", "--help"], capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 0 and "usage: python -m console.ui.swap_tui_demo" in out.stdout, out


def test_swap_demo_tui_names_the_command_and_runs_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "shots"
    assert swap_demo.main([str(out), "--tui", "--speed", "4"]) == 2
    said = capsys.readouterr()
    assert f"python -m console.ui.swap_tui_demo {out} --speed 4" in said.err, said
    assert not out.exists()  # nothing was driven, nothing written
