"""The simulated host's command-line tools, installed as small scripts on the sandbox PATH.

Each reads the scenario state ($GPUSIM_ROOT/.sim/state.json) and answers like the real tool.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

TOOLS: tuple[str, ...] = ("hostname", "df", "nvidia-smi")


def install_pylib(pylib: Path) -> None:
    """Python modules the host's `python3` finds first (a simulated `pynvml`)."""
    source = Path(__file__).with_name("fake_pynvml.py").read_text()
    (pylib / "pynvml.py").write_text(source)


def scenario_time() -> float:
    import time

    state = load_state()
    return (time.time() - float(state["start_s"])) * float(state.get("speed", 1.0))


def _root() -> Path:
    return Path(os.environ["GPUSIM_ROOT"])


def load_state() -> dict[str, Any]:
    state: dict[str, Any] = json.loads((_root() / ".sim" / "state.json").read_text())
    return state


def _du_apparent(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def _hostname(args: list[str]) -> int:
    print(load_state()["hostname"])
    return 0


def _df(args: list[str]) -> int:
    """`df -P -B1 PATH...` with the simulated disks; the bytes of sparse files count as used."""
    state = load_state()
    root = _root()
    paths = [a for a in args if not a.startswith("-")] or ["/"]
    disks: dict[str, list[int]] = state["disks"]
    print("Filesystem     1-blocks         Used    Available Capacity Mounted on")
    status = 0
    for raw in paths:
        p = Path(raw)
        try:
            rel = "/" + str(p.resolve().relative_to(root)) if p.resolve() != root else "/"
        except ValueError:
            rel = "/"
        if not p.exists():
            print(f"df: {raw}: No such file or directory", file=sys.stderr)
            status = 1
            continue
        mount = max((m for m in disks if rel == m or rel.startswith(m.rstrip("/") + "/")), key=len)
        size, base_used = disks[mount]
        ours = _du_apparent(root / mount.lstrip("/")) if mount != "/" else 0
        used = min(size, base_used + ours)
        avail = size - used
        dev = "/dev/nvme0n1p" + str(sorted(disks).index(mount) + 1)
        mounted = f"{root}{mount if mount != '/' else ''}"
        print(f"{dev:<14} {size:>12} {used:>12} {avail:>12} {used * 100 // size:>7}% {mounted}")
    return status


def _nvidia_smi(args: list[str]) -> int:
    from console.hostsim import fake_nvidia_smi

    def out(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    return fake_nvidia_smi.main(args, scenario_time(), out)


def main(name: str, args: list[str]) -> int:
    try:
        handler = {"hostname": _hostname, "df": _df, "nvidia-smi": _nvidia_smi}[name]
        return handler(args)
    except BrokenPipeError:
        return 141
    except KeyboardInterrupt:
        return 130
