"""The demo's host simulator in its own process, so the console's CPU (what `top` shows for
gpuconsole) is the console's alone, and the simulator never competes with the UI's event loop.

`python -m console.demo.hostsim.process --speed S --scenario NAME` starts the simulator and its story,
prints one JSON line (the demo's HostProfile and the scenario clock), then runs until its stdin
closes: the console closes it to stop the demo, and a console that dies closes it too (the
kernel also sends SIGTERM then: PR_SET_PDEATHSIG). `SimulatorThread` below
drives it from the console's side (the demo, the screenshots, the tests).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import dataclasses
import json
import logging
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from console.config import HostProfile
from console.demo.hostsim import HostSimulator
from console.demo.hostsim.sandbox import mark_owner, sweep_stale
from console.demo.hostsim.scenario import demo_profile, start_scenario
from console.locations import PACKAGE_PARENT
from console.units import seconds


def die_with_parent() -> None:
    """If the console dies without stopping us (killed, crashed), so do we."""
    parent = os.getppid()
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the closed stdin still stops us
    if os.getppid() != parent:  # the parent died before the prctl took effect
        os._exit(0)


def profile_to_json(profile: Any) -> dict[str, Any]:
    return {f.name: getattr(profile, f.name) for f in dataclasses.fields(profile)}


def profile_from_json(data: dict[str, Any]) -> HostProfile:
    known = {f.name for f in dataclasses.fields(HostProfile)}
    values = {k: (tuple(v) if isinstance(v, list) else v) for k, v in data.items() if k in known}
    return HostProfile(**values)


async def run(speed: float, scenario: str, loop_s: float | None = None) -> None:
    sim = HostSimulator(speed=speed, scenario=scenario, loop_s=loop_s)
    mark_owner(sim.root)  # a console killed outright: the next demo sweeps this sandbox
    await sim.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    try:
        await start_scenario(sim)
        print(json.dumps({"profile": profile_to_json(demo_profile(sim)), "start_s": sim.start_s,
                          "speed": sim.speed}), flush=True)

        def wait_for_eof() -> None:  # returns when the console closes our stdin (or dies)
            sys.stdin.buffer.read()
            loop.call_soon_threadsafe(stop.set)

        threading.Thread(target=wait_for_eof, name="stdin", daemon=True).start()
        await stop.wait()
    finally:
        await sim.stop()


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"not a positive number of seconds: {text!r}")
    return value


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m console.demo.hostsim.process")
    ap.add_argument("--speed", type=float, default=1.0)
    ap.add_argument("--scenario", default="swap")
    ap.add_argument("--loop-s", type=_positive, default=None,
                    help="the story again from its start every this many scenario seconds (swap scenarios)")
    args = ap.parse_args(argv)
    die_with_parent()
    logging.getLogger("asyncio").setLevel(logging.ERROR)
    asyncio.run(run(args.speed, args.scenario, args.loop_s))



class SimulatorClock:
    """The scenario clock of a simulator in another process (`elapsed_s()`, as HostSimulator's)."""

    def __init__(self, start_s: float, speed: float) -> None:
        self.start_s, self.speed = start_s, speed

    def elapsed_s(self) -> float:
        return (time.time() - self.start_s) * self.speed


class SimulatorThread:
    """The demo's host simulator, in its own process (this module's `main`), seen from the console:
    what the operator sees of gpuconsole's CPU is the console's alone, and the simulator never
    competes with the UI loop. `start()` returns the demo's HostProfile; `stop()` ends it. The process
    also ends when the console dies (its stdin closes; PR_SET_PDEATHSIG)."""

    def __init__(self, speed: float = 1.0, scenario: str = "swap", loop_s: float | None = None) -> None:
        self.speed = speed
        self.scenario = scenario
        self.loop_s = loop_s  # the story again every this many scenario seconds (the soak)
        self.process: Any = None
        self.sim: SimulatorClock | None = None  # `sim.elapsed_s()`: the scenario clock
        self._stderr: Any = None
        self.cache_root: Path | None = None

    def start(self, timeout_s: float = 30.0) -> HostProfile:
        sweep_stale()  # what a killed demo left behind
        # The demo has no network: its Hub is the simulated host's own, on loopback (the profile's
        # hub_endpoint, console/demo/hostsim/fake_hub.py). Whatever it caches stays in its own dir.
        cache_root = Path(tempfile.mkdtemp(prefix="gpuconsole-demo-cache-"))
        mark_owner(cache_root)
        self.cache_root = cache_root
        os.environ["GPUCONSOLE_CACHE_DIR"] = str(cache_root)

        package_parent = str(PACKAGE_PARENT)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (package_parent, os.environ.get("PYTHONPATH")) if p)}
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - never the console's terminal; closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "console.demo.hostsim.process", "--speed", repr(self.speed),
             "--scenario", self.scenario, *(["--loop-s", repr(self.loop_s)] if self.loop_s else [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr, env=env, start_new_session=True)
        assert self.process.stdout is not None
        line = b""
        with selectors.DefaultSelector() as sel:
            sel.register(self.process.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + timeout_s
            while not line.endswith(b"\n") and time.monotonic() < deadline:
                if sel.select(max(0.0, deadline - time.monotonic())):
                    chunk = os.read(self.process.stdout.fileno(), 65536)
                    if not chunk:
                        break
                    line += chunk
        if not line.endswith(b"\n"):
            why = self._stderr_tail() or f"no answer within {seconds(timeout_s)}"
            self.stop()
            raise RuntimeError(f"the simulator did not start: {why}")
        hello = json.loads(line)
        self.sim = SimulatorClock(float(hello["start_s"]), float(hello["speed"]))
        profile: HostProfile = profile_from_json(hello["profile"])
        return profile

    @property
    def audit_file(self) -> Path | None:
        """This demo's own audit log, in its own directory (removed with it): the simulated host is
        born with this run, so no earlier demo's commands are its host's (a second demo read the
        first one's back, 127.0.0.1 both times, and listed them as its own last commands)."""
        return self.cache_root / "audit.jsonl" if self.cache_root is not None else None

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        lines = self._stderr.read().decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else ""

    def stop(self) -> None:
        if self.cache_root is not None:
            shutil.rmtree(self.cache_root, ignore_errors=True)
            self.cache_root = None
        process, self.process = self.process, None
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()  # the simulator stops its services and exits
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        finally:
            if process.stdout is not None:
                process.stdout.close()
            if self._stderr is not None:
                self._stderr.close()
                self._stderr = None


if __name__ == "__main__":
    main()
