"""What a fleet's close waits on, looked at every half second: N quiet simulated hosts over SSH
(console.demo.hostsim.multihost), the fleet's runners started without the app, every host's GPU
read, then `Fleet.close()` (the quit's own call) and, until it returns, the pending tasks counted
by the last four frames of what each awaits (through the async generators an `async for` is in).

    .venv/bin/python benchmarks/fleet_close_probe.py --hosts 100

Prints a line per look and the close's wall time; the load beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.fleet import _awaited_frames  # noqa: E402
from console.config import HostProfile  # noqa: E402
from console.domain.fleet.hosts import Fleet  # noqa: E402


def waiting() -> collections.Counter[str]:
    where: collections.Counter[str] = collections.Counter()
    for task in asyncio.all_tasks():
        if task is asyncio.current_task() or task.done():
            continue
        frames = task.get_stack(limit=50) + _awaited_frames(task.get_coro())
        names = [f"{Path(f.f_code.co_filename).name}:{f.f_lineno} {f.f_code.co_name}" for f in frames]
        where[" > ".join(names[-4:])] += 1
        where[f"  (cancel asked {min(task.cancelling(), 3)}+ times)"] += 1
    return where


async def probe(hosts: int, settle_s: float) -> None:
    sim = subprocess.Popen([sys.executable, "-m", "console.demo.hostsim.multihost", str(hosts)], cwd=ROOT,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert sim.stdout is not None
        profiles = [HostProfile(**{k: tuple(v) if isinstance(v, list) else v for k, v in p.items()})
                    for p in json.loads(sim.stdout.readline())]
        fleet = Fleet(profiles)
        starting = asyncio.ensure_future(fleet.start())
        began = time.monotonic()
        while time.monotonic() - began < 60 and sum(s.data("gpu") is not None for s in fleet.states) < hosts:
            await asyncio.sleep(0.2)
        await asyncio.sleep(settle_s)
        print(f"read {sum(s.data('gpu') is not None for s in fleet.states)} of {hosts} hosts' GPUs; "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
        t0 = time.monotonic()
        closing = asyncio.ensure_future(fleet.close())
        while not closing.done():
            await asyncio.sleep(0.5)
            if not closing.done():
                print(f"t+{time.monotonic() - t0:.1f} s", dict(waiting().most_common(6)), flush=True)
        await closing
        starting.cancel()
        print(f"close took {time.monotonic() - t0:.2f} s; load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        if sim.stdin is not None:
            sim.stdin.close()
        sim.wait(60)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=100)
    ap.add_argument("--settle", type=float, default=3.0, help="seconds after every GPU is read, before the close")
    a = ap.parse_args()
    # As the CLI does (console/cli/main.py): a quit's writes to dropped sockets are not logged.
    logging.getLogger("asyncio").setLevel(logging.ERROR)
    logging.getLogger("asyncssh").setLevel(logging.ERROR)
    asyncio.run(probe(a.hosts, a.settle))
    return 0


if __name__ == "__main__":
    sys.exit(main())
