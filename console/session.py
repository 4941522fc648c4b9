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
from console.model import Reading
from console.redact import redact_text
from console.sources.base import PolledSource
from console.sources.download import DownloadWatcher, download_source
from console.sources.gpu import GpuSource
from console.sources.host import host_summary_source
from console.sources.log import LogFollower
from console.sources.server import ServerWatcher, server_source
from console.sources.service import ServiceWatcher, service_source
from console.transport.base import Transport
from console.transport.local import LocalTransport


def download_json(reading: Reading[Any]) -> dict[str, Any] | None:
    """`snapshot --json`'s `download` object (a public interface: keep the keys stable)."""
    from console.snapshot import to_jsonable

    p = reading.data
    if p is None:
        return {"model_dir": None, "error": reading.error}
    return {
        "model_dir": p.model_dir, "repo_id": p.repo_id, "expected_from": p.expected_source,
        "bytes_done": p.bytes_done, "bytes_total": p.bytes_total,
        "shards_done": p.shards_done, "shards_total": p.shards_total,
        "partial_files": [{"path": f.path, "bytes": f.bytes, "expected_bytes": f.expected_bytes}
                          for f in p.partial_files],
        "rate_bytes_per_s": p.rate_bytes_per_s, "eta_s": p.eta_s, "stalled_since": p.stalled_since,
        "disk_free_bytes": p.disk_free_bytes, "fits_on_disk": p.fits_on_disk, "complete": p.complete,
        "problems": to_jsonable(p.problems),
    }


def log_json(summary: Any) -> dict[str, Any]:
    """`snapshot --json`'s `log` object (a public interface: keep the keys stable)."""
    d = summary.last_decode or {}
    kv = summary.kv_cache or {}
    cap = summary.capacity or {}
    return {
        "source": summary.source, "phase": summary.phase,
        "boot": [{"phase": b.phase, "at": b.at, "seconds": b.seconds, "detail": b.detail} for b in summary.boot],
        "last_prefill": summary.last_prefill,
        "last_decode": None if not d else {
            "gen_throughput": d.get("gen throughput (token/s)"), "running_reqs": d.get("#running-req"),
            "queue_reqs": d.get("#queue-req"), "token_usage": d.get("token usage"),
            "full_token_usage": d.get("full token usage"), "mamba_usage": d.get("mamba usage"),
            "accept_len": d.get("accept len"), "accept_rate": d.get("accept rate"),
            "cuda_graph": d.get("cuda graph"), "at": d.get("at")},
        "capacity": None if not cap else {k: cap.get(k) for k in (
            "max_total_num_tokens", "max_running_requests", "context_len", "max_prefill_tokens",
            "chunked_prefill_size")},
        "kv_cache": None if not kv else {"tokens": kv.get("tokens"), "k_gib": kv.get("k_gib"),
                                         "v_gib": kv.get("v_gib"), "dtype": kv.get("dtype")},
        "mamba_cache": summary.mamba_cache, "weights": summary.weights,
        "errors": [{"at": e.at, "kind": e.kind, "message": redact_text(e.message)} for e in summary.errors],
        "lines_seen": summary.lines_seen,
    }


def server_json(status: Any) -> dict[str, Any]:
    """`snapshot --json`'s `server` object."""
    return {
        "status": status.status, "reason": redact_text(status.reason), "unit": status.unit,
        "unit_state": status.unit_state,
        "main_pid": status.main_pid, "phase": status.phase, "health_ok": status.http.health_ok,
        "gen_throughput": status.gen_throughput, "accept_length": status.accept_length,
        "server_info_error": status.http.server_info_error,
        "launch_command": redact_text(str((status.http.server_info or {}).get("launch_command") or ""))
        or None,
        "metrics": status.http.metrics,
    }


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

    def snapshot_fields(self, source: str, reading: Reading[Any]) -> dict[str, Any]:
        """The keys a source contributes to `snapshot --json` (public interface: keep them stable)."""
        from console.snapshot import to_jsonable

        if source == "host":
            return {"host_summary": to_jsonable(reading.data)}
        if source == "download":
            return {"download": download_json(reading)}
        if source == "service":
            from console.analysis.service_report import report_json

            return {"service": report_json(reading.data) if reading.data else {"error": reading.error}}
        return {source: to_jsonable(reading.data)}

    async def stream_snapshot_fields(self) -> dict[str, Any]:
        from console.snapshot import to_jsonable

        out_log: dict[str, Any] = {}
        follower = self.log_follower()
        if follower is not None:
            summary = await follower.snapshot_once()
            out_log["log"] = log_json(summary)
        server = self.server_watcher()
        if server is not None:
            out_log["server"] = server_json(await server.snapshot_once())

        gpu = await self.gpu_source().first_reading()
        out: dict[str, Any] = {
            "gpu_source": gpu.data.source if gpu.data else None,
            "gpus": to_jsonable(gpu.data.gpus) if gpu.data else [],
            "gpu_problems": list(gpu.data.problems) if gpu.data else [],
        }
        if gpu.error:
            out["gpu_error"] = gpu.error
        return {**out, **out_log}

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

        # The demo has no network: its Hub answers come from a cache the simulator writes.
        import os

        from console.hostsim.downloader import DownloadPlan
        from console.hostsim.scenario import write_hub_cache

        cache_root = Path(tempfile.mkdtemp(prefix="gpuconsole-demo-cache-"))
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
