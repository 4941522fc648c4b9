"""The seeds' swap in containers, driven from the console (`--demo-scenario docker-drive`, issue 26):
nothing moves on its own. The story's services run as in the "drive" scenario (real fake-SGLang
processes whose windows console/demo/hostsim/drive.py keeps), mirrored as Docker containers
(console/demo/hostsim/containers.py). This lays the scenario out and writes which container is which
service ($GPUSIM_ROOT/.sim/docker-drive.json); the other direction, the simulated `docker start|stop
NAME` and `docker compose create` opening and closing the mapped service's window, is the fake
docker CLI's own (console/demo/hostsim/fake_docker.py, `drive_*`: the host's python3 runs it).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from console.demo.hostsim import drive
from console.demo.hostsim.containers import mirror_units_as_containers
from console.demo.hostsim.fake_docker import MAP_FILE
from console.demo.hostsim.services import Timeline, UnitRunner, install_units
from console.demo.hostsim.story import MODEL_DIR, NEW_CONTAINER, NEW_UNIT, OLD_CONTAINER, OLD_MODEL_DIR, OLD_UNIT

if TYPE_CHECKING:
    from console.demo.hostsim.server import HostSimulator

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
