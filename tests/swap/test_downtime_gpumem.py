"""Issue 24 item 6: the simulated GPUs' memory follows the simulated server's own lifecycle, not
the story's fixed timeline: a server started with CUDA_VISIBLE_DEVICES=4,5,6,7 fills those GPUs
phase by phase as it boots (weights, KV, graphs), and frees them when it stops."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.demo.hostsim import drive, placement
from console.demo.hostsim.fake_sglang import lifecycle
from console.demo.sshd import free_port

OLD, NEW = "old.service", "new.service"


def test_the_memory_follows_the_phases_the_server_reports() -> None:
    rec = {"started_at_t": 100.0, "booted": False, "weights_s": 10.0, "graphs_s": 5.0, "ended_at_t": None,
           "phases": [["launch", 100.3], ["weights loading", 104.0]]}
    assert lifecycle.memory_mib(rec, "new", 99.0) == 0
    assert lifecycle.memory_mib(rec, "new", 102.0) == lifecycle.CONTEXT_MIB
    half = lifecycle.memory_mib(rec, "new", 109.0)
    full_weights = lifecycle.memory_mib(rec, "new", 500.0)  # still loading: no more than all the weights
    assert lifecycle.CONTEXT_MIB < half < full_weights
    rec["phases"] += [["weights loaded", 130.0], ["caches", 131.0], ["graphs", 132.0], ["graphs done", 137.0]]
    # A slow load (page cache cold): the weights end when the server says, not at the story's 14 s.
    assert lifecycle.memory_mib(rec, "new", 125.0) == full_weights
    assert lifecycle.memory_mib(rec, "new", 131.5) > full_weights
    assert lifecycle.memory_mib(rec, "new", 140.0) == lifecycle.FULL_MIB["new"]
    rec["ended_at_t"] = 150.0
    assert lifecycle.memory_mib(rec, "new", 151.0) == 0
    assert lifecycle.gpus_from_env({"CUDA_VISIBLE_DEVICES": "4,5,6,7"}, 4) == [4, 5, 6, 7]
    assert lifecycle.gpus_from_env({}, 2) == [0, 1]


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "host"
    (root / ".sim").mkdir(parents=True)
    monkeypatch.setenv("GPUSIM_ROOT", str(root))
    drive.init(root, OLD, NEW)
    placement.set_gpu_count(root, 8)
    return root


async def test_a_server_on_gpus_4_to_7_fills_them_as_it_boots_and_frees_them_when_stopped(host: Path) -> None:
    speed, start = 10.0, time.time()
    data = json.loads((host / ".sim" / "drive.json").read_text())
    data["windows"][NEW] = [[0.0, None]]  # the console's `systemctl start` at scenario time 0
    (host / ".sim" / "drive.json").write_text(json.dumps(data))
    env = {**os.environ, "GPUSIM_ROOT": str(host), "GPUSIM_UNIT": NEW, "GPUSIM_SPEED": str(speed),
           "GPUSIM_START": str(start), "CUDA_VISIBLE_DEVICES": "4,5,6,7"}
    proc = subprocess.Popen([sys.executable, "-m", "console.demo.hostsim.fake_sglang.launch_server", "--model-path",
                             str(host / "m"), "--tp", "4", "--port", str(free_port())], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: list[int] = []
    try:
        full = lifecycle.FULL_MIB["new"]
        for _ in range(3000):
            gpus = drive.gpu_states((time.time() - start) * speed)
            assert all(g.used_mib > 80_000 for g in gpus[:4])  # the old server, untouched
            new = [g.used_mib for g in gpus[4:]]
            seen.append(min(new))
            if min(new) >= full:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError(f"GPUs 4-7 never filled: {seen[-5:]}")
        assert any(lifecycle.CONTEXT_MIB < m < full for m in seen)  # the boot's ramp, not a jump
        assert seen == sorted(seen)  # memory only grows while it boots
        assert all(p[1].startswith("sglang::") for g in gpus[4:] for p in g.processes) and all(g.processes for g in gpus[4:])
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        gpus = drive.gpu_states((time.time() - start) * speed)
        assert [g.used_mib for g in gpus[4:]] == [0, 0, 0, 0]  # a stopped server frees its GPUs
        assert lifecycle.read(host, NEW)["ended"] == "stopped"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
