"""The demo as a process: SIGTERM restores the terminal and removes the demo's temporary
directories (one holds a private key); a demo killed outright is swept by the next one."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

from console.demo.hostsim.sandbox import PREFIXES, sweep_stale
from tests.kit.pty import read_pty


def leftovers(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith(PREFIXES))


def start_demo(tmp: Path) -> tuple[subprocess.Popen[bytes], int]:
    main, child = pty.openpty()
    env = {**os.environ, "TMPDIR": str(tmp), "TERM": "xterm-256color", "XDG_DATA_HOME": str(tmp / "data"),
           "COLUMNS": "120", "LINES": "40"}
    proc = subprocess.Popen([sys.executable, "-m", "console", "--demo"], stdin=child, stdout=child, stderr=child,
                            env=env, start_new_session=True)
    os.close(child)
    return proc, main


def read_until(fd: int, needle: bytes, timeout: float) -> bytes:
    return read_pty(fd, timeout, until=needle)


def drain(fd: int, proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    return read_pty(fd, timeout, proc=proc)


def test_sigterm_restores_the_terminal_and_removes_the_sandbox(tmp_path: Path) -> None:
    proc, fd = start_demo(tmp_path)
    try:
        seen = read_until(fd, b"gpu-sim-01", 40)
        assert b"\x1b[?1049h" in seen, "the app entered the alternate screen"
        assert leftovers(tmp_path), "the demo made its sandbox under TMPDIR"
        proc.send_signal(signal.SIGTERM)
        rest = drain(fd, proc, 30)
        assert proc.wait(30) == 128 + signal.SIGTERM
        assert b"\x1b[?1049l" in rest, "the alternate screen was left: the terminal is restored"
        assert leftovers(tmp_path) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        os.close(fd)


def test_a_killed_demo_is_swept_by_the_next(tmp_path: Path) -> None:
    proc, fd = start_demo(tmp_path)
    try:
        read_until(fd, b"gpu-sim-01", 40)
        left = leftovers(tmp_path)
        assert left
        os.killpg(proc.pid, signal.SIGKILL)  # no handler of the console runs
        proc.wait(10)
        # The simulator runs in its own process and dies with the console (PR_SET_PDEATHSIG), taking
        # its sandbox (the one with a private key) with it; the console's own cache dir stays behind.
        deadline = time.monotonic() + 20
        while any(n.startswith("gpusim-") for n in leftovers(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.2)
        stayed = leftovers(tmp_path)
        assert stayed and set(stayed) <= set(left) and not any(n.startswith("gpusim-") for n in stayed)
        removed = sweep_stale(tmp_path)  # what the next demo does first
        assert sorted(p.name for p in removed) == stayed and leftovers(tmp_path) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        os.close(fd)
