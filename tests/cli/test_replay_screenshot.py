"""`gpuconsole replay --screenshot FILE --screenshot-after S` (issue 22 item 3), as the console takes them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from console.core.recording import Recorder
from console.core.state import HostInfo, HostState, LogAppended
from console.host.parsers.sglang_log import parse_line


def test_replay_saves_a_screenshot_and_exits(tmp_path: Path) -> None:
    state = HostState("gpu-07", label="gpu-07")
    recorder = Recorder(state, tmp_path / "rec").start()
    state.apply(HostInfo("gpu-07", "gpu-07", log_label="journal: sglang.service"))
    state.apply(LogAppended("gpu-07", (parse_line("[2026-01-01 10:00:00] replayed line one"),)))
    recorder.close()
    assert recorder.path is not None
    shot = tmp_path / "out" / "replay.svg"
    shot.parent.mkdir()
    env = dict(os.environ, HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_STATE_HOME=str(tmp_path / "state"))
    done = subprocess.run([sys.executable, "-c", "import sys; from console.cli.main import main; sys.exit(main())", "replay", "--screenshot", str(shot),
                           "--screenshot-after", "1.5", "--screenshot-size", "80x24", str(recorder.path)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    svg = shot.read_text()
    assert "REPLAY" in svg and "gpu-07" in svg
