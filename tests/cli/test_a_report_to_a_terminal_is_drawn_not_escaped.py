"""`gpuconsole report FILE` to a terminal printed the Markdown's source: 'time to ready 18s \\(from the
new unit's start \\(systemctl start\\)…', 'verify\\_sha', every escape that keeps host text from being
read as Markdown. To a terminal the report is drawn; piped, it is the Markdown itself, escapes and all."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from tests.kit.pty import read_pty

RECORDING = Path(__file__).resolve().parent.parent / "data" / "recordings" / "made-before-events-py.jsonl.gz"
ENV = {**os.environ, "GPUCONSOLE_CONFIG": "", "COLUMNS": "200", "LINES": "50", "TERM": "xterm-256color"}


def test_to_a_terminal_the_report_reads_without_escapes() -> None:
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "console", "report", str(RECORDING)], stdin=follower,
                            stdout=follower, stderr=follower, env=ENV, close_fds=True)
    os.close(follower)
    try:
        out = read_pty(leader, 60, proc=proc).decode("utf-8", "replace")
        assert proc.wait(timeout=30) == 0, out
    finally:
        os.close(leader)
    assert "Swap report" in out and "time to ready" in out, out[:2000]
    assert "\\(" not in out and "\\_" not in out and "**" not in out, out[:2000]


def test_piped_the_report_is_its_markdown() -> None:
    out = subprocess.run([sys.executable, "-m", "console", "report", str(RECORDING)], capture_output=True,
                         text=True, env=ENV, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("# Swap report") and "\\(" in out.stdout
