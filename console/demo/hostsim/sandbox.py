"""The demo's temporary directories: removed when the demo ends (exit, SIGTERM), and, for a demo
that was killed outright (SIGKILL leaves no chance), by the next demo, which sweeps the ones whose
owner process is gone. A sandbox holds a private key: none may be left behind for long."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

PREFIXES = ("gpusim-", "gpuconsole-demo-cache-")
OWNER = ".gpuconsole-owner-pid"


def mark_owner(path: Path) -> None:
    with contextlib.suppress(OSError):
        (path / OWNER).write_text(str(os.getpid()))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(tmp: Path | None = None) -> list[Path]:
    """Remove the demo directories under `tmp` whose owner process no longer runs; return them."""
    root = Path(tmp or tempfile.gettempdir())
    removed = []
    with contextlib.suppress(OSError):
        for path in root.iterdir():
            if not path.name.startswith(PREFIXES) or not path.is_dir() or path.is_symlink():
                continue
            try:
                pid = int((path / OWNER).read_text().strip())
            except (OSError, ValueError):
                continue  # not marked: not ours to judge
            if pid != os.getpid() and not _alive(pid) and path.stat().st_uid == os.getuid():
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed
