"""The seeds' swap, time-compressed: what the simulated host does, and the profile to reach it."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from console.config import HostProfile
from console.demo.hostsim import docker_drive, drive, story
from console.demo.hostsim.containers import mirror_units_as_containers
from console.demo.hostsim.downloader import DownloadPlan, LocalDirDownloader
from console.demo.hostsim.services import TEMPLATES, UNITS_DIR, Timeline, UnitRunner, install_units
from console.demo.hostsim.story import (  # noqa: F401 (the story's names, read from here too)
    MODEL_DIR,
    NEW_CONTAINER,
    NEW_UNIT,
    OLD_CONTAINER,
    OLD_MODEL_DIR,
    OLD_UNIT,
)
from console.host.hub import _cache_path

if TYPE_CHECKING:
    from console.demo.hostsim.server import HostSimulator

# "docker-drive": the containers' swap driven from the console (console/demo/hostsim/docker_drive.py)
DOCKER_SCENARIOS = ("docker", "docker-drive")


def demo_profile(sim: HostSimulator) -> HostProfile:
    return HostProfile(
        name="demo",
        host="127.0.0.1",
        port=sim.port,
        user="root",
        identity=str(sim.client_key_path),
        known_hosts=str(sim.known_hosts_path),
        model_dir=sim.host_path(MODEL_DIR),
        repo_id="Qwen/Qwen3.5-122B-A10B",
        unit=None if sim.scenario in DOCKER_SCENARIOS else NEW_UNIT,
        compare_unit=None if sim.scenario in DOCKER_SCENARIOS else OLD_UNIT,
        container=NEW_CONTAINER if sim.scenario in DOCKER_SCENARIOS else None,
        compare_container=OLD_CONTAINER if sim.scenario in DOCKER_SCENARIOS else None,
        forbidden_prefixes=(sim.host_path("/data"),),
        server_port=sim.server_port,
        disk_paths=(sim.host_path("/shared"), sim.host_path("/")),
        unit_draft=str(draft_unit_path(sim)) if sim.scenario == "drive" else None,
        # the simulated Hub on loopback: the demo never asks huggingface.co (a stand-in simulator may have none)
        hub_endpoint=hub.url if (hub := getattr(sim, "hub", None)) is not None else None,
        host_root=str(sim.root),  # the step's words name a file as the simulated host names it
    )


def write_hub_cache(cache_root: Path, plan: DownloadPlan, repo_id: str = "Qwen/Qwen3.5-122B-A10B") -> None:
    """What `HfApi.model_info(files_metadata=True)` answered for the simulated repo, in the
    console's Hub cache (tests of the cached path; the demo asks its simulated Hub, `sim.hub`)."""
    path = _cache_path(repo_id, "main")
    if not str(path).startswith(str(cache_root)):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"repo_id": repo_id, "revision": "main", "sha": "sim",
                                "fetched_at": time.time(), "siblings": plan.hub_siblings()}))


async def start_scenario(sim: HostSimulator, plan: DownloadPlan | None = None, *,
                         oom: bool = False, driven: bool | None = None) -> LocalDirDownloader | None:
    """Lay out the sandbox for the story and start its drivers. `driven` (default: the simulator's
    scenario is "drive"): nothing moves until the console's commands move it (console/demo/hostsim/drive.py)."""
    if sim.scenario == "docker-drive":
        await docker_drive.start(sim, oom=oom)
        return None
    if driven if driven is not None else sim.scenario == "drive":
        return await _start_driven(sim, oom=oom)
    sim.path(MODEL_DIR).mkdir(parents=True, exist_ok=True)
    sim.path(OLD_MODEL_DIR).mkdir(parents=True, exist_ok=True)
    downloader = LocalDirDownloader(sim.path(MODEL_DIR), plan or DownloadPlan(tree_listing=True), sim.elapsed_s,
                                    lfs_manifest=sim.root / ".sim" / "lfs.json")
    sim.add_task(downloader.run())
    install_units(sim, [OLD_UNIT, NEW_UNIT], sim.server_port)
    timeline = Timeline({OLD_UNIT: (-1e9, story.T_OLD_STOP), NEW_UNIT: (story.T_NEW_START, 1e9)})
    runner = UnitRunner(sim, timeline)
    runner.extra_env[OLD_UNIT] = {"GPUSIM_BOOTED": "1"}  # the old service has been serving for hours
    if oom:
        runner.extra_env[NEW_UNIT] = {"GPUSIM_OOM": "1"}
    sim.add_task(runner.run())
    if sim.loop_s is not None:
        sim.add_task(loop_story(sim, sim.loop_s))
    if sim.scenario == "docker":
        sim.add_task(mirror_units_as_containers(sim, {OLD_UNIT: (OLD_CONTAINER, "/data/models"),
                                                      NEW_UNIT: (NEW_CONTAINER, "/shared/models")}))
    return downloader


async def loop_story(sim: HostSimulator, every_s: float) -> None:
    """The story from its start again every `every_s` scenario seconds (at least past its ready):
    the new service stops and the old one serves again (a swap back), then the story's swap plays
    once more. The download stays done (its files are there)."""
    every_s = max(every_s, story.T_READY + 1.0)
    while True:
        left = every_s - sim.elapsed_s()
        if left <= 0:
            sim.rewind()
            continue
        await asyncio.sleep(max(0.05, left / sim.speed))


DRAFTS = ".sim/drafts"


def draft_unit_path(sim: HostSimulator) -> Path:
    """The new unit as the operator drafted it, on the operator's machine (not yet on the host)."""
    return sim.root / DRAFTS / NEW_UNIT


async def _start_driven(sim: HostSimulator, *, oom: bool = False) -> None:
    sim.path(MODEL_DIR).mkdir(parents=True, exist_ok=True)
    sim.path(OLD_MODEL_DIR).mkdir(parents=True, exist_ok=True)
    install_units(sim, [OLD_UNIT], sim.server_port)
    draft = draft_unit_path(sim)
    draft.parent.mkdir(parents=True, exist_ok=True)
    text = (TEMPLATES / NEW_UNIT).read_text().replace("{ROOT}", str(sim.root))
    draft.write_text(text.replace("--port 30000", f"--port {sim.server_port}"))
    assert not sim.path(f"{UNITS_DIR}/{NEW_UNIT}").exists()
    drive.init(sim.root, OLD_UNIT, NEW_UNIT)
    runner = UnitRunner(sim, Timeline({}))
    runner.driven = True
    runner.extra_env[OLD_UNIT] = {"GPUSIM_BOOTED": "1"}
    if oom:
        runner.extra_env[NEW_UNIT] = {"GPUSIM_OOM": "1"}
    sim.add_task(runner.run())
    return None
