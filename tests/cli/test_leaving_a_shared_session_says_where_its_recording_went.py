"""Leaving says where the session's recording went (issue 35 item 10), shared too: `--share` and
`serve` recorded the session and said nothing of the file; SIGTERM (what `kill` sends) ended
`--share` without its clean-up (the socket and the invites' files left behind)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def _recordings(data: Path) -> list[Path]:
    return list((data / "gpuconsole" / "recordings").rglob("*.jsonl.gz"))


@pytest.mark.parametrize("args", [("--demo", "--share", "--invite", "bob"), ("--demo", "serve", "--invite", "bob")],
                         ids=["share", "serve"])
def test_ending_a_shared_demo_says_where_it_was_recorded(args: tuple[str, ...], tmp_path: Path) -> None:
    # the socket goes in the test's own XDG_RUNTIME_DIR (conftest: short, as AF_UNIX paths must be;
    # tmp_path under pytest-xdist is too long for one)
    run = Path(os.environ["XDG_RUNTIME_DIR"])
    run.mkdir(mode=0o700, exist_ok=True)
    env = {**os.environ, "TERM": "dumb", "GPUCONSOLE_CONFIG": "", "XDG_DATA_HOME": str(tmp_path / "data")}
    proc = subprocess.Popen([sys.executable, "-m", "console", *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 90
        # the session up and recorded (the recorder flushes as the readings come)
        while time.monotonic() < deadline and not any(f.stat().st_size > 4096 for f in _recordings(tmp_path / "data")):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    recorded = _recordings(tmp_path / "data")
    assert len(recorded) == 1 and f"recorded in {recorded[0]}" in out + err, (out + err)[-800:]
    assert not list(run.rglob("*.sock*")), list(run.rglob("*"))  # the socket, the invites
