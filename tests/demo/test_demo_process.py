"""The demo runs its host simulator in its own process (the console's CPU is the console's), and
that process ends with the console, however the console ends."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from console.demo.hostsim.process import SimulatorThread

ROOT = Path(__file__).resolve().parent.parent.parent


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_the_demo_simulator_is_another_process_and_stop_ends_it() -> None:
    sim = SimulatorThread()
    profile = sim.start()
    pid = sim.process.pid
    try:
        assert pid != os.getpid() and alive(pid)
        assert profile.host == "127.0.0.1" and profile.port and profile.unit
        assert sim.sim is not None
        began = sim.sim.elapsed_s()
        deadline = time.monotonic() + 60  # the simulated host's clock moves: it runs (fails only after 60 s)
        while sim.sim.elapsed_s() <= began:
            assert time.monotonic() < deadline, "the simulated host's clock did not move"
            time.sleep(0.05)
    finally:
        sim.stop()
    assert not alive(pid)


def test_the_simulator_dies_with_a_console_that_is_killed() -> None:
    script = ("import os, sys\nfrom console.demo.hostsim.process import SimulatorThread\n"
              "s = SimulatorThread(); s.start(); print(s.process.pid, flush=True)\nos.kill(os.getpid(), 9)\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    pid = int(out.stdout.split()[0])
    deadline = time.time() + 15
    while alive(pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not alive(pid)
    # The killed console had no chance to remove its Hub cache: the next demo sweeps it.
    from console.demo.hostsim.sandbox import sweep_stale

    assert [p.name.startswith("gpuconsole-demo-cache-") for p in sweep_stale()] == [True]
