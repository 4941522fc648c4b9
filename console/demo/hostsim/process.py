"""The demo's host simulator in its own process, so the console's CPU (what `top` shows for
gpuconsole) is the console's alone, and the simulator never competes with the UI's event loop.

`python -m console.demo.hostsim.process --speed S --scenario NAME` starts the simulator and its story,
prints one JSON line (the demo's HostProfile and the scenario clock), then runs until its stdin
closes: the console closes it to stop the demo, and a console that dies closes it too (the
kernel also sends SIGTERM then: PR_SET_PDEATHSIG). `SimulatorThread` in console/host/session.py
drives it.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import signal
import sys
import threading
from typing import Any


def die_with_parent() -> None:
    """If the console dies without stopping us (killed, crashed), so do we."""
    parent = os.getppid()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the closed stdin still stops us
    if os.getppid() != parent:  # the parent died before the prctl took effect
        os._exit(0)


def profile_to_json(profile: Any) -> dict[str, Any]:
    return {f.name: getattr(profile, f.name) for f in dataclasses.fields(profile)}


def profile_from_json(data: dict[str, Any]) -> Any:
    from console.config import HostProfile

    known = {f.name for f in dataclasses.fields(HostProfile)}
    values = {k: (tuple(v) if isinstance(v, list) else v) for k, v in data.items() if k in known}
    return HostProfile(**values)


async def run(speed: float, scenario: str, loop_s: float | None = None) -> None:
    from console.demo.hostsim import HostSimulator
    from console.demo.hostsim.sandbox import mark_owner
    from console.demo.hostsim.scenario import demo_profile, start_scenario

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


if __name__ == "__main__":
    main()
