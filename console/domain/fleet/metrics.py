"""Prometheus out: every host's readings as Prometheus metrics (`--metrics 127.0.0.1:PORT`), so an
existing Prometheus and Grafana keep the history and the alerts.

A custom collector reads the HostStates at scrape time (no copies kept, nothing to go stale
here: a value the state does not have is left out, never written as 0). Every metric has the
label `host` (the console's key for the host: its profile name).

| metric | labels | meaning |
|---|---|---|
| `gpuconsole_host_connected` | host | 1 while the SSH connection is up, else 0 |
| `gpuconsole_reading_age_seconds` | host, source | seconds since the source's last good reading |
| `gpuconsole_reading_failing` | host, source | 1 when the source's last poll failed (values: the last good) |
| `gpuconsole_gpu_memory_used_bytes` | host, gpu, uuid | GPU memory in use |
| `gpuconsole_gpu_memory_total_bytes` | host, gpu, uuid | GPU memory size |
| `gpuconsole_gpu_utilization_ratio` | host, gpu, uuid | GPU utilization, 0–1 |
| `gpuconsole_gpu_power_watts` | host, gpu, uuid | power draw |
| `gpuconsole_gpu_lost` | host, gpu, uuid | 1 for a GPU missing from the samples (its other values are omitted) |
| `gpuconsole_download_done_bytes` | host, repo | model bytes on disk |
| `gpuconsole_download_total_bytes` | host, repo | model bytes expected |
| `gpuconsole_download_rate_bytes_per_second` | host, repo | download rate |
| `gpuconsole_server_status` | host, status | 1 for the server's status (ready, starting, degraded, dead, unknown) |
| `gpuconsole_server_gen_throughput_tokens_per_second` | host, model | generation throughput |
| `gpuconsole_server_running_requests` | host, model | requests running |
| `gpuconsole_server_queued_requests` | host, model | requests queued |
| `gpuconsole_swap_downtime_seconds` | host | last swap's downtime; only when the state knows it (not yet: omitted) |
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from console.core.state import HostState

SERVER_STATUSES = ("ready", "starting", "degraded", "dead", "unknown")
MIB = 1024 * 1024


def _ok(value: Any) -> bool:
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


class FleetCollector(Collector):
    """Reads the states at every scrape. `states` is a list or a callable returning one."""

    def __init__(self, states: Iterable[HostState] | Callable[[], Iterable[HostState]]) -> None:
        self._states = states

    def states(self) -> list[HostState]:
        return list(self._states() if callable(self._states) else self._states)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = time.time()
        g = GaugeMetricFamily
        connected = g("gpuconsole_host_connected", "1 while the SSH connection to the host is up", labels=["host"])
        age = g("gpuconsole_reading_age_seconds", "Seconds since the source's last good reading",
                labels=["host", "source"])
        failing = g("gpuconsole_reading_failing", "1 when the source's last poll failed", labels=["host", "source"])
        gpu_labels = ["host", "gpu", "uuid"]
        mem_used = g("gpuconsole_gpu_memory_used_bytes", "GPU memory in use", labels=gpu_labels)
        mem_total = g("gpuconsole_gpu_memory_total_bytes", "GPU memory size", labels=gpu_labels)
        util = g("gpuconsole_gpu_utilization_ratio", "GPU utilization (0-1)", labels=gpu_labels)
        power = g("gpuconsole_gpu_power_watts", "GPU power draw", labels=gpu_labels)
        lost = g("gpuconsole_gpu_lost", "1 for a GPU missing from the samples", labels=gpu_labels)
        dl_done = g("gpuconsole_download_done_bytes", "Model bytes on disk", labels=["host", "repo"])
        dl_total = g("gpuconsole_download_total_bytes", "Model bytes expected", labels=["host", "repo"])
        dl_rate = g("gpuconsole_download_rate_bytes_per_second", "Download rate", labels=["host", "repo"])
        status = g("gpuconsole_server_status", "1 for the SGLang server's current status", labels=["host", "status"])
        gen = g("gpuconsole_server_gen_throughput_tokens_per_second", "Generation throughput",
                labels=["host", "model"])
        running = g("gpuconsole_server_running_requests", "Requests running", labels=["host", "model"])
        queued = g("gpuconsole_server_queued_requests", "Requests queued", labels=["host", "model"])
        downtime = g("gpuconsole_swap_downtime_seconds", "Downtime of the last swap", labels=["host"])
        any_downtime = False

        for state in self.states():
            host = state.host
            conn = state.connection
            if conn is not None:
                connected.add_metric([host], 1.0 if conn.status == "connected" else 0.0)
            for source, reading in list(state.readings.items()):
                if reading.ok_at_s is not None:
                    age.add_metric([host, source], max(0.0, now - reading.ok_at_s))
                is_failing = reading.error is not None and (
                    reading.ok_at_s is None or (reading.error_at_s or 0) >= reading.ok_at_s)
                failing.add_metric([host, source], 1.0 if is_failing else 0.0)
            gpus = state.data("gpu")
            for gpu in (gpus.gpus if gpus is not None else ()):
                labels = [host, str(gpu.index), gpu.uuid or ""]
                lost.add_metric(labels, 1.0 if gpu.lost_at_s is not None else 0.0)
                if gpu.lost_at_s is not None:
                    continue
                if _ok(gpu.memory_used_mib):
                    mem_used.add_metric(labels, gpu.memory_used_mib * MIB)
                if _ok(gpu.memory_total_mib):
                    mem_total.add_metric(labels, gpu.memory_total_mib * MIB)
                if _ok(gpu.utilization_pct):
                    util.add_metric(labels, gpu.utilization_pct / 100.0)
                if _ok(gpu.power_w):
                    power.add_metric(labels, gpu.power_w)
            download = state.data("download")
            if download is not None:
                repo = download.repo_id or download.model_dir
                dl_done.add_metric([host, repo], float(download.bytes_done))
                if _ok(download.bytes_total):
                    dl_total.add_metric([host, repo], float(download.bytes_total))
                if _ok(download.rate_bytes_per_s):
                    dl_rate.add_metric([host, repo], download.rate_bytes_per_s)
            server = state.data("server")
            if server is not None:
                for name in SERVER_STATUSES:
                    status.add_metric([host, name], 1.0 if server.status == name else 0.0)
                info = (server.http.server_info or {}) if server.http else {}
                model = str(info.get("served_model_name") or info.get("model_path") or "")
                if _ok(server.gen_throughput):
                    gen.add_metric([host, model], server.gen_throughput)
                if _ok(server.running_reqs):
                    running.add_metric([host, model], server.running_reqs)
                queue = server.http.metrics.get("sglang:num_queue_reqs") if server.http else None
                if _ok(queue):
                    queued.add_metric([host, model], queue)
            swap = getattr(state, "swap_downtime_s", None)  # when the core learns it (issue 12/13)
            if _ok(swap):
                downtime.add_metric([host], swap)
                any_downtime = True
        yield from (connected, age, failing, mem_used, mem_total, util, power, lost, dl_done, dl_total, dl_rate,
                    status, gen, running, queued)
        if any_downtime:
            yield downtime


class MetricsAddressError(ValueError):
    """--metrics must be LOOPBACK:PORT; the message is one line."""


def parse_metrics_address(text: str) -> tuple[str, int]:
    """`127.0.0.1:9108`, `[::1]:9108` or `localhost:9108`. Only loopback: the exporter has no
    authentication, so reaching it from elsewhere is a proxy's job, decided on purpose."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise MetricsAddressError(f"--metrics {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9108")
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        raise MetricsAddressError(f"--metrics {text!r}: the port must be a number") from None
    if not 0 <= port <= 65535:
        raise MetricsAddressError(f"--metrics {text!r}: the port must be 0-65535")
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            raise MetricsAddressError(f"--metrics {text!r}: {host!r} is not an IP address") from None
        if not loopback:
            raise MetricsAddressError(f"--metrics {text!r}: only a loopback address (127.0.0.1, ::1) is served")
    return ("127.0.0.1" if host == "localhost" else host), port


@dataclass
class MetricsServer:
    host: str
    port: int
    registry: CollectorRegistry
    _httpd: Any
    _thread: Any

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)


def start_metrics_server(states: Iterable[HostState] | Callable[[], Iterable[HostState]],
                         host: str, port: int) -> MetricsServer:
    """Serve the states' metrics on host:port (a thread of prometheus_client's); port 0 picks one.
    Raises OSError when the port is taken."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector(states))
    httpd, thread = start_http_server(port, addr=host, registry=registry)
    return MetricsServer(host, int(httpd.server_port), registry, httpd, thread)
