"""Shared test kit: moved from test_cli.py so that no test imports another test module."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path


def gpuconsole(*args: str, timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "GPUCONSOLE_CONFIG": "", "XDG_CONFIG_HOME": "/nonexistent", **(env or {})}
    return subprocess.run([sys.executable, "-m", "console", *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env)


def popen(*args: str, tmp: Path) -> subprocess.Popen[str]:
    # The environment of this test (its own HOME, from conftest), read now: not at import.
    env = {**os.environ, "GPUCONSOLE_CONFIG": "", "XDG_CONFIG_HOME": "/nonexistent",
           "XDG_DATA_HOME": str(tmp), "XDG_RUNTIME_DIR": str(tmp)}
    return subprocess.Popen([sys.executable, "-m", "console", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=tmp)


class Lines:
    """A pipe's lines, read by a thread as they come: a test waits for a line, not for a time."""

    def __init__(self, pipe: object) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: object) -> None:
        for line in pipe:  # type: ignore[attr-defined]
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()

    def wait_for(self, needle: str, timeout: float = 60) -> None:
        with self._cond:
            found = self._cond.wait_for(lambda: any(needle in line for line in self.lines), timeout)
        assert found, f"no line with {needle!r} in {timeout:g}s: {self.lines[-5:]}"

    def text(self, timeout: float = 15) -> str:
        """Everything, once the pipe is closed (the process has exited)."""
        self._thread.join(timeout)
        with self._cond:
            return "".join(self.lines)
