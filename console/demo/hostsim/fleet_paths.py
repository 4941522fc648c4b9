"""The fleet demo's hosts swap by more than one path (issue 24 item 5), each played host-side, as
an operator in a shell on the host would do it; the console only observes (console/core/derive/swap_observer.py):

- "restart": the story (console/demo/hostsim/scenario.py): the old unit stops at 45 s, the new one starts.
- "in-place": the 122B serves (an earlier checkpoint of it); once the download is complete the
  host's operator installs the unit with the new --model-path (not restarted) and POSTs
  `/update_weights_from_disk` to the running server, which writes SGLang's log lines for it.
- "beside": an 8-GPU host whose old server uses GPUs 0-3; the new unit (GPUs 4-7, another port)
  starts at 50 s while the old one serves; once the new one answers /health, the old one stops.

The in-place and beside hosts use the driven units (console/demo/hostsim/drive.py's windows), so the
simulated GPUs follow each server's own lifecycle. Simulator behaviour, never a real host's."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from console.config import HostProfile
from console.demo.hostsim import drive, placement, story
from console.demo.hostsim.downloader import DownloadPlan, LocalDirDownloader, qwen122b_config, qwen122b_files
from console.demo.hostsim.downtime_scenario import write_model
from console.demo.hostsim.ports import server_ports
from console.demo.hostsim.scenario import MODEL_DIR, NEW_UNIT, OLD_MODEL_DIR, OLD_UNIT, demo_profile, start_scenario
from console.demo.hostsim.services import UNITS_DIR, Timeline, UnitRunner, install_units

if TYPE_CHECKING:
    from console.demo.hostsim.server import HostSimulator

PATHS = ("restart", "in-place", "beside")
INPLACE_OLD_DIR = "/data/models/Qwen3.5-122B-A10B-r1"  # the checkpoint served before the update
T_UPDATE = 45.0  # scenario seconds: the download is complete at 40 s
T_BESIDE_START = story.T_NEW_START
BESIDE_GPUS = "4,5,6,7"
HEALTH_TIMEOUT_S = 3.0
OLD_HOLD_S = 30.0  # scenario seconds both servers serve before the old one stops


def fleet_path(index: int) -> str:
    """Which path host `index` of the fleet demo takes: two of every ten in place, one beside,
    the rest restart (the first two restart: a two-host demo still shows the old model serving)."""
    return {2: "in-place", 3: "beside", 5: "in-place"}.get(index % 10, "restart")


def _start_downloader(sim: HostSimulator) -> None:
    sim.path(MODEL_DIR).mkdir(parents=True, exist_ok=True)
    downloader = LocalDirDownloader(sim.path(MODEL_DIR), DownloadPlan(tree_listing=True), sim.elapsed_s,
                                    lfs_manifest=sim.root / ".sim" / "lfs.json")
    sim.add_task(downloader.run())


def _edit_unit(sim: HostSimulator, name: str, pairs: list[tuple[str, str]]) -> None:
    unit = sim.path(f"{UNITS_DIR}/{name}")
    text = unit.read_text()
    for pattern, repl in pairs:
        text = re.sub(pattern, repl, text)
    tmp = unit.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(unit)


def _set_windows(root: Path, change: dict[str, list[list[float | None]]]) -> None:
    """What the host's `systemctl start/stop` does in the driven units (drive.py's windows)."""
    path = root / ".sim" / "drive.json"
    data = json.loads(path.read_text())
    data.setdefault("windows", {}).update(change)
    tmp = path.with_name("drive.json.fleet.tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def _http(url: str, body: dict[str, object] | None = None, timeout_s: float = HEALTH_TIMEOUT_S) -> int:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"},
                                 method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as reply:  # noqa: S310 - loopback only
            return int(reply.status)
    except OSError:
        return 0


async def _at(sim: HostSimulator, t: float) -> None:
    # the scenario clock is wall time × speed: sleep until then
    await asyncio.sleep(max(0.0, (t - sim.elapsed_s()) / sim.speed))


async def _healthy(sim: HostSimulator, port: int, within_s: float = 600.0) -> None:
    deadline = sim.elapsed_s() + within_s
    while sim.elapsed_s() < deadline:
        if await asyncio.to_thread(_http, f"http://127.0.0.1:{port}/health") == 200:
            return
        await asyncio.sleep(0.25)


async def _in_place_operator(sim: HostSimulator) -> None:
    await _at(sim, T_UPDATE)
    model = str(sim.path(MODEL_DIR))
    # installed, not restarted: a later restart serves the same model
    _edit_unit(sim, NEW_UNIT, [(r"--model-path \S+", f"--model-path {model}")])
    await _healthy(sim, sim.server_port)  # the serving process may still be starting up (a host started late)
    await asyncio.to_thread(_http, f"http://127.0.0.1:{sim.server_port}/update_weights_from_disk",
                            {"model_path": model}, 600.0)


async def _beside_operator(sim: HostSimulator, port: int) -> None:
    await _at(sim, T_BESIDE_START)
    _set_windows(sim.root, {NEW_UNIT: [[sim.elapsed_s(), None]]})
    await _healthy(sim, port)
    # the operator switches the clients over, lets the old one finish its requests, then stops it
    await asyncio.sleep(OLD_HOLD_S / sim.speed)
    _set_windows(sim.root, {OLD_UNIT: [[-1e9, sim.elapsed_s()]]})


async def start_path_host(sim: HostSimulator, path: str, *, oom: bool = False) -> HostProfile:
    """Lay out the host for `path` and start its host-side operator; the profile to reach it."""
    if path == "restart":
        await start_scenario(sim, oom=oom)
        return demo_profile(sim)
    if path not in PATHS:
        raise ValueError(f"no such path: {path}")
    _start_downloader(sim)
    runner = UnitRunner(sim, Timeline({}))
    runner.driven = True
    if path == "in-place":
        sizes = [f.size for f in qwen122b_files() if f.path.endswith(".safetensors")]
        write_model(sim.path(INPLACE_OLD_DIR), qwen122b_config(), sizes)  # same config: same architecture
        install_units(sim, [NEW_UNIT], sim.server_port)
        _edit_unit(sim, NEW_UNIT, [(r"--model-path \S+", f"--model-path {sim.path(INPLACE_OLD_DIR)}")])
        drive.init(sim.root, NEW_UNIT, NEW_UNIT)
        _set_windows(sim.root, {NEW_UNIT: [[-1e9, None]]})
        runner.extra_env[NEW_UNIT] = {"GPUSIM_BOOTED": "1"}
        sim.add_task(runner.run())
        sim.add_task(_in_place_operator(sim))
        return demo_profile(sim).with_overrides({"compare_unit": NEW_UNIT})
    placement.set_gpu_count(sim.root, 8)
    sim.path(OLD_MODEL_DIR).mkdir(parents=True, exist_ok=True)
    install_units(sim, [OLD_UNIT, NEW_UNIT], sim.server_port)
    port = server_ports()
    _edit_unit(sim, NEW_UNIT, [(r"CUDA_VISIBLE_DEVICES=[0-9,]+", f"CUDA_VISIBLE_DEVICES={BESIDE_GPUS}"),
                               (rf"--port {sim.server_port}\b", f"--port {port}")])
    drive.init(sim.root, OLD_UNIT, NEW_UNIT)
    runner.extra_env[OLD_UNIT] = {"GPUSIM_BOOTED": "1"}
    if oom:
        runner.extra_env[NEW_UNIT] = {"GPUSIM_OOM": "1"}
    sim.add_task(runner.run())
    sim.add_task(_beside_operator(sim, port))
    return demo_profile(sim)


__all__ = ["PATHS", "fleet_path", "start_path_host"]
