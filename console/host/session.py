"""One host session: the transport and the sources for one GPU host. Nothing global, so a fleet
view later is more sessions, not a rewrite."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.config import HostProfile
from console.host.hub import HubAccess
from console.host.sources.base import PolledSource
from console.host.sources.container import ComposeLogFollower, ContainerWatcher
from console.host.sources.download import DownloadWatcher, download_source
from console.host.sources.gpu import GpuSource
from console.host.sources.host import host_summary_source
from console.host.sources.log import LogFollower
from console.host.sources.router import RouterWatcher, router_source
from console.host.sources.server import ServerWatcher, server_source
from console.host.sources.service import ServiceWatcher, service_source
from console.host.transport.base import Transport
from console.host.transport.local import LocalTransport
from console.host.transport.ssh import SshOptions, SshTransport


def make_transport(profile: HostProfile, *, accept_new_host_key: bool = False) -> Transport:
    if not profile.host:
        return LocalTransport()
    return SshTransport(SshOptions(
        host=profile.host, port=profile.port, user=profile.user, identity=profile.identity,
        known_hosts=profile.known_hosts, accept_new_host_key=accept_new_host_key,
        connect_timeout_s=profile.connect_timeout_s, jump=profile.jump,
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
    _server: ServerWatcher | None = None  # the polled server source's watcher (move_server moves it)
    bench_port: int | None = None  # issue 24: benchmark a server on another port (beside, before traffic moves)
    # where the swap's commands are audited (None: the user's audit log, or the demos' beside it); the
    # CLI's demo gives its own run's file (SimulatorThread.audit_file): an earlier demo's are not its host's
    audit_file: Path | None = None

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
            self._server = server
            sources.append(server_source(server))
        if self.profile.router_url and not one_shot:  # the beside path's router: its workers and moves
            sources.append(router_source(RouterWatcher(self.transport, self.profile.router_url,
                                                       self.profile.router_log)))
        return sources

    def service_watcher(self) -> ServiceWatcher | None:
        profile = self.profile
        if self._service is None and (profile.container or profile.compose):
            self._service = ContainerWatcher(self.transport, profile.container or profile.compose_service or "sglang",
                                             profile.compare_container, compose_file=profile.compose,
                                             compose_service=profile.compose_service,
                                             forbidden_prefixes=profile.forbidden_prefixes,
                                             host_root=profile.host_root)
            return self._service
        if not self.profile.unit:
            return self._service
        if self._service is None:
            self._service = ServiceWatcher(self.transport, self.profile.unit, self.profile.compare_unit,
                                           forbidden_prefixes=self.profile.forbidden_prefixes,
                                           host_root=self.profile.host_root)
        return self._service

    def log_follower(self) -> LogFollower | None:
        """The unit's journal (the compare unit's too, in the same stream), or --log-file."""
        if self._log is None:
            units = tuple(u for u in (self.profile.unit, self.profile.compare_unit) if u)
            if self.profile.log_file:
                self._log = LogFollower(self.transport, log_file=self.profile.log_file)
            elif self.profile.container:
                self._log = LogFollower(self.transport, container=self.profile.container,
                                        compare_container=self.profile.compare_container)
            elif self.profile.compose:  # issue 26: the container Compose names, found by the service reading

                watcher = self.service_watcher()
                assert isinstance(watcher, ContainerWatcher)
                self._log = ComposeLogFollower(self.transport, watcher,
                                               compare_container=self.profile.compare_container)
            elif units:
                self._log = LogFollower(self.transport, units=units)
        return self._log

    def server_watcher(self) -> ServerWatcher | None:
        if not self.profile.unit and not self.profile.host and not self.profile.container \
                and not self.profile.compose:
            return None
        follower = self.log_follower()
        return ServerWatcher(self.transport, self.profile.unit, self.profile.server_port,
                             follower.tracker if follower else None, container=self.profile.container)

    def download_watcher(self, *, one_shot: bool = False) -> DownloadWatcher | None:
        if not self.profile.model_dir:
            return None

        endpoint = self.profile.hub_endpoint
        # A demo asks only its simulated host's Hub (loopback), never huggingface.co: the real Hub
        # knows nothing of the simulated files. Without one it asks no Hub at all.
        hub = HubAccess(endpoint) if not self.demo else (
            HubAccess(endpoint, "the simulated host's Hub", send_token=False, use_cache=False) if endpoint else None)
        watcher = DownloadWatcher(self.transport, self.profile.model_dir, self.profile.repo_id,
                                  stall_after_s=self.profile.stall_after_s, wait_for_hub_s=20.0 if one_shot else 0.0,
                                  hub=hub)
        if not one_shot:
            self._download = watcher  # the app's: the verify action asks it what is finished
        return watcher

    @contextlib.asynccontextmanager
    async def bench_url(self) -> AsyncIterator[str]:
        """A base URL for the bench thread's own loop: over SSH, a second connection of its own
        (its forward's bytes must not cross the UI loop), closed when the bench ends."""
        port = self.bench_port or self.profile.server_port
        if not self.profile.host:
            yield f"http://127.0.0.1:{int(port)}"
            return
        transport = make_transport(self.profile)
        await transport.connect()
        try:
            yield await transport.http_base_url(port)
        finally:
            await transport.close()

    def move_server(self, port: int) -> None:
        """Issue 24: the server now answers on `port` (the beside path moved the traffic there): the
        profile's port, the polled server source and later benchmarks follow it."""
        self.profile = self.profile.with_overrides({"server_port": int(port)})
        if self._server is not None:
            self._server.move_to(int(port))

    def gpu_source(self) -> GpuSource:
        return GpuSource(self.transport, local=not self.profile.host, interval_s=self.profile.gpu_interval_s)

    async def close(self) -> None:
        await self.transport.close()
