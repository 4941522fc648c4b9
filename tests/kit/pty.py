"""Reading what a process writes to its terminal (a pty, as the operator's terminal sees it):
test_demo_lifecycle.py and test_hostile_text.py."""

from __future__ import annotations

import os
import select
import subprocess
import time


def read_pty(fd: int, timeout: float, *, until: bytes | None = None,
             proc: subprocess.Popen[bytes] | None = None) -> bytes:
    """What arrives on `fd` within `timeout` seconds: it stops early at end of file, once `until`
    has been seen, or (with `proc`) once nothing more comes and the process has exited."""
    out = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (until is None or until not in out):
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the other side of the pty is closed
                break
            if not chunk:
                break
            out += chunk
        elif proc is not None and proc.poll() is not None:
            break
    return bytes(out)
