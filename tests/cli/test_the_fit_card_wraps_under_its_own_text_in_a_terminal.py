"""`gpuconsole fit` in an 80-column terminal (the seeds' 122B with MTP) broke its binding constraint
and its assumptions at column 0: "…GDN state slots (134 slots / 3 per" then "request), below…"
under the labels, as if a new row. The card wraps at the terminal's width, each continuation under
its own text, as the console's fit screen does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from console.demo.hostsim.downloader import qwen122b_config

W122 = 248_837_128_000  # the simulated checkpoint's bytes (tests/domain/test_fit.py's)


def _fit(tmp_path: Path, columns: int) -> list[str]:
    model = tmp_path / "Qwen3.5-122B-A10B"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps(qwen122b_config()))
    (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": W122}}))
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "40", "TERM": "dumb", "NO_COLOR": "1"}
    out = subprocess.run([sys.executable, "-m", "console", "fit", str(model), "--gpus", "4", "--gpu-mem", "95.59",
                          "--speculative-algorithm", "NEXTN", "--mem-fraction", "0.85", "--context-len", "262144"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_the_binding_constraint_continues_under_its_text_at_80_columns(tmp_path: Path) -> None:
    lines = _fit(tmp_path, 80)
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("binding constraint"))
    assert "GDN state slots" in lines[at]
    following = lines[at + 1]
    assert following.strip() and following.startswith("    "), lines[at:at + 2]  # not at column 0


def test_every_row_of_text_starts_indented_or_is_a_heading(tmp_path: Path) -> None:
    """No continuation of a wrapped row at column 0: a row there is a heading, the badge or a warning."""
    for line in _fit(tmp_path, 80):
        if line and not line.startswith(" "):
            assert line.startswith((" FITS", "per GPU", "capacity", "assumed:", "⚠", "124.4 B params")), line


def test_a_wide_terminal_keeps_each_row_whole(tmp_path: Path) -> None:
    lines = _fit(tmp_path, 160)
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("binding constraint"))
    assert lines[at].rstrip().endswith("below speculative decoding's default of 48"), lines[at]
