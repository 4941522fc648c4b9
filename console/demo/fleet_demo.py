"""`--demo-hosts N`: N simulated GPU hosts on loopback, on one thread of their own (so they never
compete with the UI loop), each at a different point of the swap story, by more than one path
(console/demo/hostsim/fleet_paths.py), each with a dcgm-exporter-format `/metrics` beside its simulated
SGLang's own `/metrics`."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from console.config import HostProfile
from console.demo.hostsim import HostSimulator
from console.demo.hostsim.dcgm_exporter import DcgmExporter
from console.demo.hostsim.fleet_paths import fleet_path, start_path_host
from console.demo.hostsim.server import HostIdentity

# Where in the story each host starts (seconds): some still downloading, some swapping, most
# serving. The story: download until 40 s, old service stops at 45 s, new one ready at 75 s.
OFFSETS_S = (0.0, 20.0, 48.0, 60.0, 120.0, 300.0, 35.0, 90.0, 600.0, 5.0)


def demo_hostname(index: int) -> str:
    return f"gpu-sim-{index + 1:02d}"


class FleetSimulator:
    """Start with `start()` (returns the profiles to reach the hosts); `stop()` ends them all."""

    def __init__(self, count: int, *, speed: float = 1.0, oom_every: int = 0, exporters: bool = True,
                 first_index: int = 0) -> None:
        self.count = count
        self.first_index = first_index  # hosts are named gpu-sim-(first_index + 1), …
        self.speed = speed
        self.oom_every = oom_every  # every Nth host's new service runs out of memory (0: none)
        self.exporters = exporters
        self.sims: list[Any] = []
        self.dcgm: list[Any] = []
        self.cache_root: Path | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fleetsim", daemon=True)

    def run(self, coro: Any, timeout: float = 120.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def start(self) -> list[HostProfile]:
        self._thread.start()
        # The demo has no network: each simulated host serves its own Hub on loopback (the profile's
        # hub_endpoint, console/demo/hostsim/fake_hub.py). Whatever it caches stays in its own dir.
        cache_root = Path(tempfile.mkdtemp(prefix="gpuconsole-demo-cache-"))
        self.cache_root = cache_root  # removed by stop(): a fleet demo once left one per run in /tmp
        os.environ["GPUCONSOLE_CACHE_DIR"] = str(cache_root)
        return list(self.run(self._start_all(), timeout=60 + 5 * self.count))

    async def _start_all(self) -> list[HostProfile]:
        sem = asyncio.Semaphore(8)

        async def one(i: int) -> HostProfile:
            async with sem:
                return await self._start_one(i)

        return list(await asyncio.gather(*(one(self.first_index + i) for i in range(self.count))))

    async def _start_one(self, index: int) -> HostProfile:
        name = demo_hostname(index)
        sim = HostSimulator(identity=HostIdentity(hostname=name), speed=self.speed)
        self.sims.append(sim)
        await sim.start()
        offset = OFFSETS_S[index % len(OFFSETS_S)]
        if offset:
            sim.start_s -= offset / self.speed
            sim._write_state()  # the simulated tools read the story clock from there
        # issue 24: the hosts swap by more than one path (in place, beside, restart), host-side
        profile = await start_path_host(sim, fleet_path(index),
                                        oom=bool(self.oom_every) and (index + 1) % self.oom_every == 0)
        if self.exporters:
            exporter = DcgmExporter.for_simulator(sim)
            await exporter.start()
            self.dcgm.append(exporter)
            sim.dcgm_exporter = exporter
        return replace(profile, name=name)

    def stop(self) -> None:
        async def stop_all() -> None:
            await asyncio.gather(*(e.stop() for e in self.dcgm), return_exceptions=True)
            await asyncio.gather(*(s.stop() for s in self.sims), return_exceptions=True)

        try:
            if self._thread.is_alive():
                try:
                    self.run(stop_all(), timeout=30)
                finally:
                    self._loop.call_soon_threadsafe(self._loop.stop)
                    self._thread.join(5)
        finally:
            if self.cache_root is not None:
                shutil.rmtree(self.cache_root, ignore_errors=True)
                self.cache_root = None
