"""The seeds' swap in containers (`--demo-scenario docker`, issue 26): the simulator's services
run as before (real fake-SGLang processes along the story's timeline) and are mirrored, four times
a second, as the Docker containers an operator would have: `docker inspect` objects whose state
follows the service's, the model directories bind-mounted at /models, and each service's output
as `docker logs --timestamps` prints it. The simulated `docker` CLI (fake_docker.py) reads them.
"""

from __future__ import annotations

import hashlib

import asyncio
import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.demo.hostsim import story
from console.demo.hostsim.fake_docker import docker_state_time
from console.host.parsers.systemd import parse_unit

if TYPE_CHECKING:
    from console.demo.hostsim.server import HostSimulator

IMAGE = "lmsysorg/sglang:v0.5.23-cu129"


def _rfc3339(us: int) -> str:
    dt = datetime.fromtimestamp(us / 1e6, timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{(us % 1_000_000) * 1000:09d}Z"


def container_inspect(sim: HostSimulator, unit: str, name: str, models_host: str,
                      state: dict[str, Any], image: str = IMAGE, inside: str = "/models") -> dict[str, Any]:
    """The container a unit would be: its ExecStart argv with the model path as seen inside
    (`inside`: where the models' directory is mounted; the host's own path is a bind of itself)."""
    text = sim.path(f"/etc/systemd/system/{unit}").read_text()
    main = parse_unit(text, unit).main_command
    host_models = sim.path(models_host)
    inside = str(host_models) if inside == "=" else inside
    argv = [a.replace(str(host_models), inside) for a in (main.argv if main else ())]
    argv = ["python3", *argv[1:]] if argv else []
    # A unit that pins its GPUs (Environment=CUDA_VISIBLE_DEVICES=4,5,6,7) is a container run with
    # --gpus '"device=4,5,6,7"'; else --gpus all.
    pinned = re.search(r"CUDA_VISIBLE_DEVICES=([0-9,]+)", text)
    request = ({"Driver": "", "Count": 0, "DeviceIDs": pinned.group(1).split(","), "Capabilities": [["gpu"]],
                "Options": {}} if pinned else
               {"Driver": "", "Count": -1, "DeviceIDs": None, "Capabilities": [["gpu"]], "Options": {}})
    started, finished = state.get("started_ns"), state.get("finished_ns")
    exiting = isinstance(started, int) and (not isinstance(finished, int) or finished < started)
    # As Docker's: a container is running until its process has exited (a `docker stop` under way
    # still says running), and its exit time comes with the state that says it exited.
    running = state.get("active") == "active" or (exiting and state.get("active") != "failed")
    failed = state.get("active") == "failed"
    return {
        "Id": container_id(name), "Created": "2026-11-28T07:41:12.118503992Z",
        "Path": "/opt/nvidia/nvidia_entrypoint.sh", "Args": argv,
        "State": {"Status": "running" if running else "exited", "Running": running, "Paused": False,
                  "Restarting": False, "OOMKilled": False, "Dead": False, "Pid": int(state.get("pid") or 0),
                  "ExitCode": 1 if failed else 0, "Error": "",
                  "StartedAt": docker_state_time(started if isinstance(started, int) else None),
                  "FinishedAt": docker_state_time(finished if isinstance(finished, int) else None)},
        "Image": "sha256:" + "9b1f0c3d" * 8, "Name": "/" + name, "RestartCount": 0,
        "HostConfig": {"Binds": [f"{host_models}:{inside}:ro"], "NetworkMode": "host",
                       "PortBindings": {}, "RestartPolicy": {"Name": "no", "MaximumRetryCount": 0},
                       "IpcMode": "host", "ShmSize": 67108864,
                       "DeviceRequests": [request]},
        "Mounts": [{"Type": "bind", "Source": str(host_models), "Destination": inside, "Mode": "ro",
                    "RW": False, "Propagation": "rprivate"}],
        "Config": {"Hostname": name, "Env": ["NCCL_P2P_LEVEL=NVL", "PATH=/usr/local/bin:/usr/bin:/bin"],
                   "Cmd": argv, "Image": image, "Entrypoint": ["/opt/nvidia/nvidia_entrypoint.sh"], "Labels": {}},
    }


# `cat` on the simulated host: /proc/PID/cgroup of a simulated GPU process (its pid exists only in
# the simulated nvidia-smi and NVML) is its container's cgroup, as Docker's systemd cgroup driver
# writes it; every other read is this machine's own `cat`.
_CAT = """#!/bin/sh
if [ "$#" = 1 ]; then
  case "$1" in
    /proc/[0-9]*/cgroup) p=${1#/proc/}; f="$GPUSIM_ROOT/.sim/proc/${p%/cgroup}/cgroup"
                         if [ -f "$f" ]; then exec /bin/cat "$f"; fi ;;
  esac
fi
exec /bin/cat "$@"
"""


def container_id(name: str) -> str:
    """The simulated container's full id (64 hex digits, `docker inspect`'s `Id`): a hash of its name,
    so two containers differ in the 12 digits `docker ps` shows, as real ids do (the name's own hex
    made every `sglang-…` container `73676c616e67…`, and a GPU's process could not be told apart)."""
    return hashlib.sha256(name.encode()).hexdigest()


def place_gpu_processes_in_containers(sim: HostSimulator, mapping: dict[str, tuple[str, ...]]) -> None:
    """Give each unit's simulated GPU processes (story.OLD_PID_BASE/NEW_PID_BASE + rank, what the
    simulated nvidia-smi and NVML report) its container's cgroup, read through the host's `cat`."""
    bases = {story.OLD_UNIT: story.OLD_PID_BASE, story.NEW_UNIT: story.NEW_PID_BASE}
    for unit, (name, *_rest) in mapping.items():
        base = bases.get(unit)
        if base is None:
            continue
        for rank in range(8):
            d = sim.root / ".sim" / "proc" / str(base + rank)
            d.mkdir(parents=True, exist_ok=True)
            (d / "cgroup").write_text(f"0::/system.slice/docker-{container_id(name)}.scope\n")
    cat = sim.bin_dir / "cat"
    cat.write_text(_CAT)
    cat.chmod(0o755)


async def mirror_units_as_containers(sim: HostSimulator, mapping: dict[str, tuple[str, ...]],
                                     every_s: float = 0.25) -> None:
    """`mapping`: unit → (container name, the host directory mounted at /models[, its image[, the
    mount's path inside, "=" for the host's own]])."""
    d = sim.root / ".sim" / "containers"
    d.mkdir(parents=True, exist_ok=True)
    place_gpu_processes_in_containers(sim, mapping)
    offsets: dict[str, int] = {}
    last: dict[str, str] = {}
    while True:
        try:
            units = json.loads((sim.root / ".sim" / "units.json").read_text())
        except (OSError, ValueError):
            units = {}
        for unit, (name, models, *image) in mapping.items():
            if not sim.path(f"/etc/systemd/system/{unit}").exists():
                continue
            # The output first, then the state: a `docker logs -f` that sees the container stopped has
            # its last lines already (Docker's follow ends after them).
            _copy_journal(sim.root / ".sim" / "journal" / f"{unit}.jsonl", d / f"{name}.log", offsets, unit)
            obj = json.dumps(container_inspect(sim, unit, name, models, units.get(unit, {}), *image), indent=4)
            if last.get(name) != obj:
                tmp = d / f".{name}.tmp"
                tmp.write_text(obj)
                tmp.replace(d / f"{name}.json")
                last[name] = obj
        await asyncio.sleep(every_s)


def _copy_journal(journal: Path, log: Path, offsets: dict[str, int], key: str) -> None:
    if not journal.exists():
        log.touch()
        return
    with journal.open("rb") as f:
        f.seek(offsets.get(key, 0))
        chunk = f.read()
    end = chunk.rfind(b"\n") + 1
    if end <= 0:
        return
    offsets[key] = offsets.get(key, 0) + end
    lines = []
    for raw in chunk[:end].splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        message = entry.get("MESSAGE")
        if isinstance(message, str):
            lines.append(f"{_rfc3339(int(entry.get('__REALTIME_TIMESTAMP', 0)))} {message}\n")
    with log.open("a", encoding="utf-8") as f:
        f.writelines(lines)
