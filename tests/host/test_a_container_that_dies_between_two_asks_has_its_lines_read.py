"""A container followed beside another is waited for on the host until it runs; one that starts and
dies between two asks (a boot that fails fast) must still have its lines read: they hold its death's
cause. The follower's command run by a real /bin/sh against a stand-in `docker` whose `inspect` says
"created" and then "exited" (never "running")."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from console.host.sources.log import LogFollower

DOCKER = """#!/bin/sh
n=$(cat "$STATE_DIR/n" 2>/dev/null || echo 0); echo $((n + 1)) > "$STATE_DIR/n"
case "$1" in
  inspect)
    case "$*" in
      *Running*) [ "$n" -ge 1 ] && echo "false exited 2026-12-03T10:00:01.5Z" || echo "false created 0001-01-01T00:00:00Z" ;;
      *) echo "created 0001-01-01T00:00:00Z" ;;
    esac ;;
  logs) echo "2026-12-03T10:00:01.9Z torch.OutOfMemoryError: CUDA out of memory." ;;
esac
"""


def test_a_container_that_started_and_died_between_two_asks_is_read(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(DOCKER)
    (bin_dir / "docker").chmod(0o755)
    follower = LogFollower.__new__(LogFollower)
    follower.decoder = type("D", (), {"since_of": {}})()
    follower.backlog = 300
    command, _ = follower._container_command("sglang-qwen122b")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STATE_DIR": str(tmp_path)}
    out = subprocess.run(["/bin/sh", "-c", command], env=env, capture_output=True, text=True, timeout=20)
    assert "CUDA out of memory" in out.stdout, (out.stdout, out.stderr)
