"""The seeds' swap in containers, driven from the console (`--demo-scenario docker-drive`, issue 26):
nothing moves on its own. The story's services run as in the "drive" scenario (real fake-SGLang
processes whose windows console/demo/hostsim/drive.py keeps), mirrored as Docker containers
(console/demo/hostsim/containers.py); here the other direction: the simulated `docker start NAME` and
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
    from console.demo.hostsim.server import HostSimulator

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


COMPOSE_FILE = "/etc/sglang/compose.yaml"
COMPOSE_SERVICE = "qwen122b"
COMPOSE_IMAGE = "lmsysorg/sglang:v0.5.24-cu129"  # not on the host yet: the swap pulls it


def compose_text(sim: HostSimulator) -> str:
    """The new service as a compose file: the new unit's launch, the model mounted at /models."""
    return f"""services:
  {COMPOSE_SERVICE}:
    image: {COMPOSE_IMAGE}
    container_name: sglang-qwen122b
    command: >-
      python3 -m sglang.launch_server --model-path /models/Qwen3.5-122B-A10B
      --served-model-name qwen3.5-122b --host 0.0.0.0 --port {sim.server_port} --tp 4
      --mem-fraction-static 0.85 --context-length 262144 --tool-call-parser qwen3_coder
      --reasoning-parser qwen3 --speculative-algo NEXTN --speculative-num-steps 3
      --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --enable-metrics --trust-remote-code
    volumes:
      - {sim.host_path("/shared/models")}:/models:ro
    ipc: host
    network_mode: host
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: all
              capabilities: [gpu]
"""


async def start(sim: HostSimulator, *, oom: bool = False, compose: bool = False) -> None:
    """Lay out the sandbox: the old container serving for hours, the new one created, not started
    (`compose`: not created yet; COMPOSE_FILE describes it and `docker compose create` makes it)."""
    from console.demo.hostsim import drive
    from console.demo.hostsim.containers import mirror_units_as_containers
    from console.demo.hostsim.story import (
        MODEL_DIR,
        NEW_CONTAINER,
        NEW_UNIT,
        OLD_CONTAINER,
        OLD_MODEL_DIR,
        OLD_UNIT,
    )
    from console.demo.hostsim.services import Timeline, UnitRunner, install_units

    sim.path(MODEL_DIR).mkdir(parents=True, exist_ok=True)
    sim.path(OLD_MODEL_DIR).mkdir(parents=True, exist_ok=True)
    # The unit files are the simulation's own launch definitions here: the console reads containers.
    install_units(sim, [OLD_UNIT, NEW_UNIT], sim.server_port)
    services: dict[str, list[str]] = {}
    if compose:  # the new service's definition waits beside, until compose creates its container
        staged = sim.root / ".sim" / "compose-staged"
        staged.mkdir(parents=True, exist_ok=True)
        sim.path(f"/etc/systemd/system/{NEW_UNIT}").replace(staged / NEW_UNIT)
        sim.path(COMPOSE_FILE).parent.mkdir(parents=True, exist_ok=True)
        sim.path(COMPOSE_FILE).write_text(compose_text(sim))
        services[COMPOSE_SERVICE] = [sim.host_path(COMPOSE_FILE), NEW_CONTAINER, NEW_UNIT]
    drive.init(sim.root, OLD_UNIT, NEW_UNIT)
    (sim.root / ".sim" / MAP_FILE).write_text(json.dumps(
        {"containers": {OLD_CONTAINER: OLD_UNIT, NEW_CONTAINER: NEW_UNIT}, "compose": services}))
    runner = UnitRunner(sim, Timeline({}))
    runner.driven = True
    runner.extra_env[OLD_UNIT] = {"GPUSIM_BOOTED": "1"}
    if oom:
        runner.extra_env[NEW_UNIT] = {"GPUSIM_OOM": "1"}
    sim.add_task(runner.run())
    new: tuple[str, ...] = (NEW_CONTAINER, "/shared/models") + ((COMPOSE_IMAGE,) if compose else ())
    sim.add_task(mirror_units_as_containers(sim, {OLD_UNIT: (OLD_CONTAINER, "/data/models"), NEW_UNIT: new}))


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
    from console.demo.hostsim import drive

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


def compose_mapped(path: str) -> bool:
    """Whether the driven scenario stages this compose file's service (else the plain simulated compose)."""
    try:
        services = json.loads((_root() / ".sim" / MAP_FILE).read_text()).get("compose", {})
    except (OSError, ValueError):
        return False
    return any(isinstance(e, list) and e and e[0] == path for e in services.values())


def compose(args: list[str]) -> int:
    """`docker compose -f FILE create [--no-recreate] [--] SERVICE` for the driven scenario: the
    service's container appears (created, not started); an existing one is kept (--no-recreate)."""
    path = args[args.index("-f") + 1] if "-f" in args and args.index("-f") + 1 < len(args) else None
    rest = args[args.index("-f") + 2:] if path is not None else args
    if not rest or rest[0] != "create":
        print(f"unknown docker command: \"compose {rest[0] if rest else ''}\"", file=sys.stderr)
        return 1
    names = rest[rest.index("--") + 1:] if "--" in rest else [a for a in rest[1:] if not a.startswith("-")]
    if path is None or not Path(path).is_file():
        print(f"open {path}: no such file or directory", file=sys.stderr)
        return 1
    try:
        services = json.loads((_root() / ".sim" / MAP_FILE).read_text()).get("compose", {})
    except (OSError, ValueError):
        services = {}
    status = 0
    for service in names:
        entry = services.get(service)
        if entry is None or entry[0] != path:
            print(f"no such service: {service}", file=sys.stderr)
            status = 1
            continue
        _file, container, unit = entry
        target = _root() / "etc" / "systemd" / "system" / unit
        if not target.exists():
            (_root() / ".sim" / "compose-staged" / unit).replace(target)
            _wait(lambda c=container: _container_running(c) is not None, 5)
            print(f" Container {container}  Created", file=sys.stderr)
        else:
            print(f" Container {container}  Running" if _container_running(container) else
                  f" Container {container}  Created", file=sys.stderr)
    return status
