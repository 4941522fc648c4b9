"""The simulated hosts of issue 24's three paths (driven: nothing moves until the console's
commands move it; console/demo/hostsim/drive.py):

- "in-place": the 122B serves on 4 GPUs; the new checkpoint is its fine-tune (same config.json),
  downloaded beside it; the drafted unit is the same unit with the new --model-path.
- "beside": an 8-GPU host where the 397B serves on GPUs 0-3; the 122B fits on 4-7; a router
  (console/demo/hostsim/fake_sglang/router.py) fronts the old server.
- "restart": the story's 4-GPU host, 397B → 122B.

Runtime "container" (every path) mirrors the units as Docker containers (console/demo/hostsim/
containers.py), `docker stop|start` driving them as Docker does; runtime "compose" (the restart)
has the new server as a compose service whose container the swap's install creates.

In all three the weights phase of a boot (and of an in-place update) follows the simulated page
cache (console/demo/hostsim/pagecache.py: SIMULATOR PARAMETERS, not measurements), and the host has
`fincore`, `free` and a counting `dd`. `earlier_boot`: the old server boots at the start (as the
host's recorded boot for the restart prediction) instead of having served for hours.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from console.config import HostProfile
from console.demo.hostsim import docker_drive, drive, pagecache, placement
from console.demo.hostsim.containers import IMAGE, mirror_units_as_containers
from console.demo.hostsim.downloader import qwen122b_config, qwen122b_files
from console.demo.hostsim.ports import server_ports
from console.demo.hostsim.scenario import MODEL_DIR, NEW_UNIT, OLD_MODEL_DIR, OLD_UNIT, demo_profile
from console.demo.hostsim.services import TEMPLATES, UNITS_DIR, Timeline, UnitRunner, install_units
from console.demo.hostsim.story import NEW_CONTAINER, OLD_CONTAINER
from console.locations import PACKAGE_PARENT

if TYPE_CHECKING:
    from console.demo.hostsim.server import HostSimulator

FT_MODEL_DIR = "/shared/models/Qwen3.5-122B-A10B-ft"
OLD_397B_BYTES = 230_000_000_000
OLD_397B_SHARDS = 36
# No SGLANG_LOG_MS: the simulated servers stamp their lines in whole seconds, as SGLang does by default
# (the report dates lines by the host's time of them, never by a millisecond stamp)
SIM_ENV = {"GPUSIM_PAGECACHE_MODEL": "1"}


def qwen397b_config() -> dict[str, object]:
    """The 397B's text fields (research/qwen35_fit.md §2.3), NVFP4 (ModelOpt)."""
    cfg = qwen122b_config()
    tc = dict(cfg["text_config"])  # type: ignore[arg-type]
    tc.update({"hidden_size": 4096, "num_hidden_layers": 60, "num_experts": 512, "num_experts_per_tok": 10})
    return {**cfg, "text_config": tc, "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}


def write_model(directory: Path, config: dict[str, object], sizes: list[int]) -> None:
    """config.json and sparse shards (no disk used) of these sizes."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    n = len(sizes)
    for i, size in enumerate(sizes, 1):
        with open(directory / f"model-{i:05d}-of-{n:05d}.safetensors", "wb") as fh:
            fh.truncate(size)


@dataclass
class Downtime:
    """What the scenario set up (for the demo and the tests)."""

    path: str
    profile: HostProfile
    runner: UnitRunner
    router_url: str | None = None
    router_log: str | None = None  # the file the router writes its log to (its add/remove-worker lines)
    router_proc: asyncio.subprocess.Process | None = None

    async def close(self) -> None:
        if self.router_proc is not None and self.router_proc.returncode is None:
            self.router_proc.terminate()
            await self.router_proc.wait()


def _draft(sim: HostSimulator, name: str, replace: dict[str, str]) -> Path:
    text = (TEMPLATES / name).read_text().replace("{ROOT}", str(sim.root))
    text = text.replace("--port 30000", f"--port {sim.server_port}")
    for a, b in replace.items():
        text = text.replace(a, b)
    draft = sim.root / ".sim" / "drafts" / name
    draft.parent.mkdir(parents=True, exist_ok=True)
    draft.write_text(text)
    return draft


def _router_launch(sim: HostSimulator, port: int, refuse: bool) -> tuple[list[str], dict[str, str], Any]:
    env = {**sim.env(), "PYTHONUNBUFFERED": "1"}
    if refuse:
        env["GPUSIM_ROUTER_REFUSE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_PARENT), env.get("PYTHONPATH", "")])
    argv = [sys.executable, "-m", "console.demo.hostsim.fake_sglang.router", "--port", str(port),
            "--worker-startup-timeout-secs", "5", "--worker-urls", f"http://127.0.0.1:{sim.server_port}"]
    return argv, env, open(sim.root / ".sim" / "router.log", "ab")  # noqa: SIM115 - closed by the caller


FT_UNIT = "sglang-qwen122b-ft.service"  # in place in containers: the launch of the new container
FT_CONTAINER = "sglang-qwen122b-ft"


async def start(sim: HostSimulator, path: str, *, earlier_boot: bool = False, update_fail: bool = False,
                update_die: bool = False, router_refuse: bool = False, beside_oom: bool = False,
                memory_pressure: float = 0.0, with_router: bool = True, runtime: str = "systemd",
                ready_late_in_second: float = 0.0) -> Downtime:
    if path not in ("in-place", "beside", "restart"):
        raise ValueError(f"no such path: {path}")
    if runtime not in ("systemd", "container", "compose") or (runtime == "compose" and path != "restart"):
        raise ValueError(f"no simulated {runtime} host for the {path} path")
    pagecache.install(sim.bin_dir)
    if memory_pressure:
        pagecache.set_pressure(memory_pressure, sim.root)
    placement.set_gpu_count(sim.root, 8 if path == "beside" else 4)
    sizes_122b = [f.size for f in qwen122b_files() if f.path.endswith(".safetensors")]
    if path == "in-place":
        old_unit = new_unit = NEW_UNIT
        write_model(sim.path(MODEL_DIR), qwen122b_config(), sizes_122b)  # the 122B serving now
        model_dir = FT_MODEL_DIR
        install_units(sim, [NEW_UNIT], sim.server_port)
        draft = _draft(sim, NEW_UNIT, {f"{sim.root}{MODEL_DIR} ": f"{sim.root}{FT_MODEL_DIR} ",
                                       "--served-model-name qwen3.5-122b": "--served-model-name qwen3.5-122b-ft"})
    else:
        old_unit, new_unit = OLD_UNIT, NEW_UNIT
        per = OLD_397B_BYTES // OLD_397B_SHARDS
        write_model(sim.path(OLD_MODEL_DIR), qwen397b_config(), [per] * OLD_397B_SHARDS)
        model_dir = MODEL_DIR
        install_units(sim, [OLD_UNIT], sim.server_port)
        draft = _draft(sim, NEW_UNIT, {})
    sim.path(model_dir).mkdir(parents=True, exist_ok=True)
    assert not sim.path(f"{UNITS_DIR}/{new_unit}").exists() or path == "in-place"
    drive.init(sim.root, old_unit, new_unit)
    if old_unit == new_unit:  # in place: one unit, serving since before the scenario began
        state = json.loads((sim.root / ".sim" / "drive.json").read_text())
        state["windows"] = {old_unit: [[-1e9, None]]}
        (sim.root / ".sim" / "drive.json").write_text(json.dumps(state))
    runner = UnitRunner(sim, Timeline({}))
    runner.driven = True
    old_env = dict(SIM_ENV)
    if not earlier_boot:
        old_env["GPUSIM_BOOTED"] = "1"
    else:  # the first boot reads the old weights from a cold cache
        pass
    new_env = dict(SIM_ENV)
    if update_fail:
        old_env["GPUSIM_UPDATE_FAIL"] = "1"
    if update_die:
        old_env["GPUSIM_UPDATE_DIE"] = "1"
    if beside_oom:
        new_env["GPUSIM_OOM"] = "1"
    if ready_late_in_second:  # the new server writes its ready line that far into a whole second: its
        # host time (journald's, Docker's) is later than its stamp
        new_env["GPUSIM_READY_LATE_IN_SECOND"] = str(ready_late_in_second)
    runner.extra_env[old_unit] = old_env
    if new_unit != old_unit:
        runner.extra_env[new_unit] = new_env
    over: dict[str, object] = {"unit": new_unit, "compare_unit": old_unit, "model_dir": sim.host_path(model_dir),
                               "unit_draft": str(draft), "gpu_interval_s": 0.5}
    if runtime == "container" and path == "in-place":
        over = _in_place_containers(sim, runner, draft, model_dir)
    elif runtime == "container" and path == "beside":
        over = _beside_containers(sim, draft, model_dir)
    elif runtime in ("container", "compose"):
        over = _restart_containers(sim, draft, model_dir, compose=runtime == "compose")
    sim.add_task(runner.run())
    profile = demo_profile(sim)
    dt = Downtime(path, profile.with_overrides(over), runner)
    if path == "beside" and with_router:
        port = server_ports()
        argv, env, log = _router_launch(sim, port, router_refuse)
        try:
            dt.router_proc = await asyncio.create_subprocess_exec(
                *argv, env=env, stdout=log, stderr=log, stdin=asyncio.subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()
        sim.unit_pids.add(dt.router_proc.pid)
        dt.router_url = f"http://127.0.0.1:{port}"
        dt.router_log = str(sim.root / ".sim" / "router.log")
    return dt


def _in_place_containers(sim: HostSimulator, runner: UnitRunner, draft: Path, model_dir: str) -> dict[str, object]:
    """In place when SGLang runs in containers (issue 26): the 122B serves in NEW_CONTAINER with
    /shared/models mounted at /models; the fine-tune's container (FT_CONTAINER, the launch a later
    restart uses) is created, not started. Each container mirrors a unit of the simulator
    (console/demo/hostsim/containers.py); the serving server reads an update's container path
    through the mount."""
    sim.path(f"{UNITS_DIR}/{FT_UNIT}").write_text(draft.read_text())
    (sim.root / ".sim" / docker_drive.MAP_FILE).write_text(json.dumps(
        {"containers": {NEW_CONTAINER: NEW_UNIT, FT_CONTAINER: FT_UNIT}, "compose": {}}))
    runner.extra_env.setdefault(NEW_UNIT, {})["GPUSIM_CONTAINER_MOUNT"] = f"{sim.path('/shared/models')}:/models"
    models = "/shared/models"
    sim.add_task(mirror_units_as_containers(sim, {NEW_UNIT: (NEW_CONTAINER, models), FT_UNIT: (FT_CONTAINER, models)}))
    return {"unit": None, "compare_unit": None, "container": FT_CONTAINER, "compare_container": NEW_CONTAINER,
            "model_dir": sim.host_path(model_dir), "unit_draft": None, "gpu_interval_s": 0.5}


def _beside_containers(sim: HostSimulator, draft: Path, model_dir: str) -> dict[str, object]:
    """Beside when SGLang runs in containers (issue 26): the 397B serves in OLD_CONTAINER on GPUs 0-3;
    the 122B's container is created for the beside path (a container's launch cannot be edited
    once created): `--gpus '"device=4,5,6,7"'` and the next port, behind the same router as the
    systemd host's. Each container mirrors a unit of the simulator (console/demo/hostsim/containers.py)."""

    text = draft.read_text().replace(f"--port {sim.server_port}", f"--port {sim.server_port + 1}")
    sim.path(f"{UNITS_DIR}/{NEW_UNIT}").write_text(text.replace('"CUDA_VISIBLE_DEVICES=0,1,2,3"',
                                                                '"CUDA_VISIBLE_DEVICES=4,5,6,7"'))
    (sim.root / ".sim" / docker_drive.MAP_FILE).write_text(json.dumps(
        {"containers": {OLD_CONTAINER: OLD_UNIT, NEW_CONTAINER: NEW_UNIT}, "compose": {}}))
    sim.add_task(mirror_units_as_containers(sim, {OLD_UNIT: (OLD_CONTAINER, "/data/models"),
                                                  NEW_UNIT: (NEW_CONTAINER, "/shared/models")}))
    return {"unit": None, "compare_unit": None, "container": NEW_CONTAINER, "compare_container": OLD_CONTAINER,
            "model_dir": sim.host_path(model_dir), "unit_draft": None, "gpu_interval_s": 0.5}


def _restart_containers(sim: HostSimulator, draft: Path, model_dir: str, *, compose: bool) -> dict[str, object]:
    """The restart when SGLang runs in containers: the 397B serves in OLD_CONTAINER; the 122B's
    container is created, not started (`compose`: not created yet, its service in COMPOSE_FILE, and
    `docker compose create` makes it). `docker stop` and `docker start` of either close and open its
    service's window as Docker's do (console/demo/hostsim/fake_docker.py, `drive_start_stop`)."""
    services: dict[str, list[str]] = {}
    if compose:  # the new service's launch waits beside until compose creates its container
        staged = sim.root / ".sim" / "compose-staged"
        staged.mkdir(parents=True, exist_ok=True)
        (staged / NEW_UNIT).write_text(draft.read_text())
        sim.path(docker_drive.COMPOSE_FILE).parent.mkdir(parents=True, exist_ok=True)
        # the image the host has (a newer tag's flags cannot be checked against the built-in table:
        # the gate would refuse; the pull of a missing image is docker-drive's scenario)
        sim.path(docker_drive.COMPOSE_FILE).write_text(
            docker_drive.compose_text(sim).replace(docker_drive.COMPOSE_IMAGE, IMAGE))
        services[docker_drive.COMPOSE_SERVICE] = [sim.host_path(docker_drive.COMPOSE_FILE), NEW_CONTAINER, NEW_UNIT]
    else:
        sim.path(f"{UNITS_DIR}/{NEW_UNIT}").write_text(draft.read_text())
    (sim.root / ".sim" / docker_drive.MAP_FILE).write_text(json.dumps(
        {"containers": {OLD_CONTAINER: OLD_UNIT, NEW_CONTAINER: NEW_UNIT}, "compose": services}))
    sim.add_task(mirror_units_as_containers(sim, {OLD_UNIT: (OLD_CONTAINER, "/data/models"),
                                                  NEW_UNIT: (NEW_CONTAINER, "/shared/models")}))
    over: dict[str, object] = {"unit": None, "compare_unit": None, "compare_container": OLD_CONTAINER,
                               "model_dir": sim.host_path(model_dir), "unit_draft": None, "gpu_interval_s": 0.5}
    if compose:
        over.update(compose=sim.host_path(docker_drive.COMPOSE_FILE), compose_service=docker_drive.COMPOSE_SERVICE,
                    container=None)
    else:
        over["container"] = NEW_CONTAINER
    return over


__all__ = ["Downtime", "FT_CONTAINER", "FT_UNIT", "FT_MODEL_DIR", "qwen397b_config", "start", "write_model"]
