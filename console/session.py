"""One host session: the transport and the sources for one GPU host. Nothing global, so a fleet
view later is more sessions, not a rewrite."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from console.config import HostProfile
from console.model import Reading
from console.sources.base import PolledSource
from console.sources.gpu import GpuSource
from console.sources.host import host_summary_source
from console.transport.base import Transport
from console.transport.local import LocalTransport


def make_transport(profile: HostProfile, *, accept_new_host_key: bool = False) -> Transport:
    if not profile.host:
        return LocalTransport()
    from console.transport.ssh import SshOptions, SshTransport

    return SshTransport(SshOptions(
        host=profile.host, port=profile.port, user=profile.user, identity=profile.identity,
        known_hosts=profile.known_hosts, accept_new_host_key=accept_new_host_key,
        connect_timeout_s=profile.connect_timeout_s,
    ))


@dataclass
class HostSession:
    """The transport for one host and the sources that read it."""

    profile: HostProfile
    transport: Transport
    demo: bool = False

    def polled_sources(self) -> Sequence[PolledSource[Any]]:
        return [host_summary_source(self.transport, self.profile.watched_paths())]

    def gpu_source(self) -> GpuSource:
        return GpuSource(self.transport, local=not self.profile.host, interval_s=self.profile.gpu_interval_s)

    def snapshot_fields(self, source: str, reading: Reading[Any]) -> dict[str, Any]:
        """The keys a source contributes to `snapshot --json` (public interface: keep them stable)."""
        from console.snapshot import to_jsonable

        if source == "host":
            return {"host_summary": to_jsonable(reading.data)}
        return {source: to_jsonable(reading.data)}

    async def stream_snapshot_fields(self) -> dict[str, Any]:
        from console.snapshot import to_jsonable

        gpu = await self.gpu_source().first_reading()
        out: dict[str, Any] = {
            "gpu_source": gpu.data.source if gpu.data else None,
            "gpus": to_jsonable(gpu.data.gpus) if gpu.data else [],
            "gpu_problems": list(gpu.data.problems) if gpu.data else [],
        }
        if gpu.error:
            out["gpu_error"] = gpu.error
        return out

    async def close(self) -> None:
        await self.transport.close()


class SimulatorThread:
    """The host simulator on its own thread and event loop, so it never competes with the UI loop."""

    def __init__(self, speed: float = 1.0, scenario: str = "swap") -> None:
        self.speed = speed
        self.scenario = scenario
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="hostsim", daemon=True)
        self.sim: Any = None

    def start(self) -> HostProfile:
        from console.hostsim import HostSimulator
        from console.hostsim.scenario import demo_profile, start_scenario

        self._thread.start()
        self.sim = HostSimulator(speed=self.speed, scenario=self.scenario)

        async def _start() -> None:
            await self.sim.start()
            await start_scenario(self.sim)

        asyncio.run_coroutine_threadsafe(_start(), self._loop).result(30)
        profile: HostProfile = demo_profile(self.sim)
        return profile

    def stop(self) -> None:
        if self.sim is not None:
            asyncio.run_coroutine_threadsafe(self.sim.stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
