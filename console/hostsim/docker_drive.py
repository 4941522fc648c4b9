"""The seeds' swap in containers, driven from the console (`--demo-scenario docker-drive`, issue 26):
nothing moves on its own. The story's services run as in the "drive" scenario (real fake-SGLang
processes whose windows console/hostsim/drive.py keeps), mirrored as Docker containers
(console/hostsim/containers.py); here the other direction: the simulated `docker start NAME` and
`docker stop NAME` open and close the mapped service's window and return as Docker's do: `start`
once the container's process runs (a server that dies while booting is seen later, in `docker
inspect`), `stop` once it has exited (SIGTERM, SIGKILL after --time seconds).

State: $GPUSIM_ROOT/.sim/docker-drive.json = {"containers": {NAME: UNIT}} (stdlib only: the host's
python3 runs the fake CLI).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from console.hostsim.server import HostSimulator

MAP_FILE = "docker-drive.json"


def _root() -> Path:
    return Path(os.environ["GPUSIM_ROOT"])


def mapped(name: str, root: Path | None = None) -> str | None:
    """The simulated service behind a container of the driven scenario (None: a plain container)."""
    try:
        data: dict[str, Any] = json.loads(((root or _root()) / ".sim" / MAP_FILE).read_text())
    except (OSError, ValueError):
        return None
    unit = data.get("containers", {}).get(name.lstrip("/"))
    return unit if isinstance(unit, str) else None


async def start(sim: HostSimulator, *, oom: bool = False) -> None:
    """Lay out the sandbox: the old container serving for hours, the new one created, not started."""
    from console.hostsim import drive
    from console.hostsim.containers import mirror_units_as_containers
    from console.hostsim.scenario import (
        MODEL_DIR,
        NEW_CONTAINER,
        NEW_UNIT,
        OLD_CONTAINER,
        OLD_MODEL_DIR,
        OLD_UNIT,
    )
    from console.hostsim.services import Timeline, UnitRunner, install_units

    sim.path(MODEL_DIR).mkdir(parents=True, exist_ok=True)
    sim.path(OLD_MODEL_DIR).mkdir(parents=True, exist_ok=True)
    # The unit files are the simulation's own launch definitions here: the console reads containers.
    install_units(sim, [OLD_UNIT, NEW_UNIT], sim.server_port)
    drive.init(sim.root, OLD_UNIT, NEW_UNIT)
    (sim.root / ".sim" / MAP_FILE).write_text(json.dumps(
        {"containers": {OLD_CONTAINER: OLD_UNIT, NEW_CONTAINER: NEW_UNIT}}))
    runner = UnitRunner(sim, Timeline({}))
    runner.driven = True
    runner.extra_env[OLD_UNIT] = {"GPUSIM_BOOTED": "1"}
    if oom:
        runner.extra_env[NEW_UNIT] = {"GPUSIM_OOM": "1"}
    sim.add_task(runner.run())
    sim.add_task(mirror_units_as_containers(sim, {OLD_UNIT: (OLD_CONTAINER, "/data/models"),
                                                  NEW_UNIT: (NEW_CONTAINER, "/shared/models")}))


def _unit_active(unit: str) -> str:
    try:
        units = json.loads((_root() / ".sim" / "units.json").read_text())
    except (OSError, ValueError):
        units = {}
    return str(units.get(unit, {}).get("active", "inactive"))


def _container_running(name: str) -> bool | None:
    try:
        obj = json.loads((_root() / ".sim" / "containers" / f"{name}.json").read_text())
    except (OSError, ValueError):
        return None
    return bool(obj.get("State", {}).get("Running"))


def _wait(predicate: Any, timeout_s: float) -> bool:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def start_stop(cmd: str, name: str, unit: str, grace_s: float, t: float) -> int:
    """`docker start|stop NAME` for a mapped container; prints what Docker prints."""
    from console.hostsim import drive

    if cmd == "start":
        if _unit_active(unit) == "active":
            print(name)  # Docker: starting a running container is a no-op that names it
            return 0
        drive._set_window(unit, True, t)
        if not _wait(lambda: _unit_active(unit) == "active", 10):
            print(f"Error response from daemon: failed to create task for container: {name}: the process did "
                  "not start", file=sys.stderr)
            print(f"Error: failed to start containers: {name}", file=sys.stderr)
            return 1
        _wait(lambda: _container_running(name) is True, 5)  # what `docker inspect` says next agrees
        print(name)
        return 0
    drive._set_window(unit, False, t)
    if not _wait(lambda: _unit_active(unit) != "active", grace_s + 10):
        print(f"Error response from daemon: cannot stop container: {name}: tried to kill container, but did "
              "not receive an exit event", file=sys.stderr)
        return 1
    _wait(lambda: _container_running(name) is False, 5)
    print(name)
    return 0
