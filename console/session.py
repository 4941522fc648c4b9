"""One host session: the transport and the sources for one GPU host. Nothing global, so a fleet
view later is more sessions, not a rewrite."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.config import HostProfile
from console.sources.base import PolledSource
from console.sources.download import DownloadWatcher, download_source
from console.sources.gpu import GpuSource
from console.sources.host import host_summary_source
from console.sources.log import LogFollower
from console.sources.server import ServerWatcher, server_source
from console.sources.service import ServiceWatcher, service_source
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
    bench_path: Path | None = None  # where benchmark runs are saved (None: the user's bench.jsonl)
    _service: ServiceWatcher | None = None
    _log: LogFollower | None = None
    _download: DownloadWatcher | None = None

    def polled_sources(self, *, one_shot: bool = False) -> Sequence[PolledSource[Any]]:
        sources: list[PolledSource[Any]] = [host_summary_source(self.transport, self.profile.watched_paths())]
        watcher = self.download_watcher(one_shot=one_shot)
        if watcher is not None:
            sources.append(download_source(watcher))
        service = self.service_watcher()
        if service is not None:
            sources.append(service_source(service))
        server = self.server_watcher()
        if server is not None and not one_shot:
            sources.append(server_source(server))
        return sources

    def service_watcher(self) -> ServiceWatcher | None:
        if not self.profile.unit:
            return None
        if self._service is None:
            self._service = ServiceWatcher(self.transport, self.profile.unit, self.profile.compare_unit,
                                           forbidden_prefixes=self.profile.forbidden_prefixes)
        return self._service

    def log_follower(self) -> LogFollower | None:
        """The unit's journal (the compare unit's too, in the same stream), or --log-file."""
        if self._log is None:
            units = tuple(u for u in (self.profile.unit, self.profile.compare_unit) if u)
            if self.profile.log_file:
                self._log = LogFollower(self.transport, log_file=self.profile.log_file)
            elif units:
                self._log = LogFollower(self.transport, units=units)
        return self._log

    def server_watcher(self) -> ServerWatcher | None:
        if not self.profile.unit and not self.profile.host:
            return None
        follower = self.log_follower()
        return ServerWatcher(self.transport, self.profile.unit, self.profile.server_port,
                             follower.tracker if follower else None)

    def download_watcher(self, *, one_shot: bool = False) -> DownloadWatcher | None:
        if not self.profile.model_dir:
            return None
        watcher = DownloadWatcher(self.transport, self.profile.model_dir, self.profile.repo_id,
                                  stall_after_s=self.profile.stall_after_s, wait_for_hub_s=20.0 if one_shot else 0.0)
        if not one_shot:
            self._download = watcher  # the app's: the verify action asks it what is finished
        return watcher

    @contextlib.asynccontextmanager
    async def bench_url(self) -> AsyncIterator[str]:
        """A base URL for the bench thread's own loop: over SSH, a second connection of its own
        (its forward's bytes must not cross the UI loop), closed when the bench ends."""
        port = self.profile.server_port
        if not self.profile.host:
            yield f"http://127.0.0.1:{int(port)}"
            return
        transport = make_transport(self.profile)
        await transport.connect()
        try:
            yield await transport.http_base_url(port)
        finally:
            await transport.close()

    def gpu_source(self) -> GpuSource:
        return GpuSource(self.transport, local=not self.profile.host, interval_s=self.profile.gpu_interval_s)

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
        self.cache_root: Path | None = None

    def start(self) -> HostProfile:
        from console.hostsim import HostSimulator
        from console.hostsim.sandbox import mark_owner, sweep_stale
        from console.hostsim.scenario import demo_profile, start_scenario

        sweep_stale()  # what a killed demo left behind
        self._thread.start()
        self.sim = HostSimulator(speed=self.speed, scenario=self.scenario)
        mark_owner(self.sim.root)

        async def _start() -> None:
            await self.sim.start()
            await start_scenario(self.sim)

        # The demo has no network: its Hub answers come from a cache the simulator writes.
        import os

        from console.hostsim.downloader import DownloadPlan
        from console.hostsim.scenario import write_hub_cache

        cache_root = Path(tempfile.mkdtemp(prefix="gpuconsole-demo-cache-"))
        mark_owner(cache_root)
        self.cache_root = cache_root
        os.environ["GPUCONSOLE_CACHE_DIR"] = str(cache_root)
        write_hub_cache(cache_root, DownloadPlan())

        asyncio.run_coroutine_threadsafe(_start(), self._loop).result(30)
        profile: HostProfile = demo_profile(self.sim)
        return profile

    def stop(self) -> None:
        if self.sim is not None:
            asyncio.run_coroutine_threadsafe(self.sim.stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if self.cache_root is not None:
            import shutil

            shutil.rmtree(self.cache_root, ignore_errors=True)
            self.cache_root = None
