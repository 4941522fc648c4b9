"""Shared test kit: moved from test_cli.py so that no test imports another test module."""

from __future__ import annotations

import os
import subprocess
import sys


def gpuconsole(*args: str, timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "GPUCONSOLE_CONFIG": "", "XDG_CONFIG_HOME": "/nonexistent", **(env or {})}
    return subprocess.run([sys.executable, "-m", "console", *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env)
