"""`gpuconsole snapshot --json`: one poll of every source that exists, as JSON.

The keys are a public interface (scripts and CI read them): keep them stable and documented in the
README.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from console.core.runner import run_one_cycle
from console.core.state import HostState
from console.domain.analysis.service_report import report_json
from console.host.session import HostSession
from console.model import Reading


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


def download_json(reading: Reading[Any]) -> dict[str, Any] | None:
    """`snapshot --json`'s `download` object (a public interface: keep the keys stable)."""
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
    d = summary.last_decode
    kv = summary.kv_cache or {}
    cap = summary.capacity or {}
    return {
        "source": summary.source, "phase": summary.phase,
        "boot": [{"phase": b.phase, "at": b.at, "seconds": b.seconds, "detail": b.detail} for b in summary.boot],
        "last_prefill": summary.last_prefill,
        "last_decode": None if d is None else {
            "gen_throughput": d.gen_tokens_per_s, "running_reqs": d.running_reqs,
            "queue_reqs": d.queue_reqs, "token_usage": d.token_usage,
            "full_token_usage": d.full_token_usage, "mamba_usage": d.mamba_usage,
            "accept_len": d.accept_len, "accept_rate": d.accept_rate,
            "cuda_graph": d.cuda_graph, "at": d.at},
        "capacity": None if not cap else {k: cap.get(k) for k in (
            "max_total_num_tokens", "max_running_requests", "context_len", "max_prefill_tokens",
            "chunked_prefill_size")},
        "kv_cache": None if not kv else {"tokens": kv.get("tokens"), "k_gib": kv.get("k_gib"),
                                         "v_gib": kv.get("v_gib"), "dtype": kv.get("dtype")},
        "mamba_cache": summary.mamba_cache, "weights": summary.weights,
        "errors": [{"at": e.at, "kind": e.kind, "message": e.message} for e in summary.errors],
        "lines_seen": summary.lines_seen,
        "unparsed_lines": summary.unparsed_lines,
    }


def server_json(status: Any) -> dict[str, Any]:
    """`snapshot --json`'s `server` object."""
    return {
        "status": status.status, "reason": status.reason, "unit": status.unit,
        "unit_state": status.unit_state,
        "main_pid": status.main_pid, "phase": status.phase, "health_ok": status.http.health_ok,
        "gen_throughput": status.gen_throughput, "accept_length": status.accept_length,
        "server_info_error": status.http.server_info_error,
        # /server_info is redacted as it is decoded (sources/server.py); log errors as they are read.
        "launch_command": str((status.http.server_info or {}).get("launch_command") or "")
        or None,
        "metrics": status.http.metrics,
    }


def source_fields(source: str, reading: Reading[Any]) -> dict[str, Any]:
    """The keys a polled source contributes."""
    if source == "host":
        return {"host_summary": to_jsonable(reading.data)}
    if source == "download":
        return {"download": download_json(reading)}
    if source == "service":
        return {"service": report_json(reading.data) if reading.data else {"error": reading.error}}
    return {source: to_jsonable(reading.data)}


def snapshot_json(state: HostState, taken_at: float | None = None) -> dict[str, Any]:
    """`snapshot --json` of a host's state: the same state the app renders."""
    out: dict[str, Any] = {
        "host": state.label,
        "taken_at": time.time() if taken_at is None else taken_at,
        "connection": connection_json(state.connection) if state.connection else None,
        "errors": {},
    }
    for name in ("host", "download", "service"):
        reading = state.reading(name)
        if reading is None:
            continue
        if reading.error:
            out["errors"][name] = reading.error
        out.update(source_fields(name, reading))
    gpu = state.reading("gpu")
    if gpu is not None:
        out["gpu_source"] = gpu.data.source if gpu.data else None
        out["gpus"] = to_jsonable(gpu.data.gpus) if gpu.data else []
        out["gpu_problems"] = list(gpu.data.problems) if gpu.data else []
        if gpu.error:
            out["gpu_error"] = gpu.error
    log = state.reading("log")
    if log is not None and log.data is not None:
        out["log"] = log_json(log.data)
    server = state.reading("server")
    if server is not None and server.data is not None:
        out["server"] = server_json(server.data)
    return out


def connection_json(state: Any) -> dict[str, Any]:
    """`status_since`: when the connection entered its status, seconds since the epoch (named
    `since_s` before, which read like a duration)."""
    return {"host": state.host, "status": state.status, "status_since": state.since_s, "detail": state.detail}


async def take_snapshot(session: HostSession) -> dict[str, Any]:
    """One poll cycle of every source through the app's own path (HostRunner into a HostState)."""
    state = HostState(session.profile.host or "local", label=session.transport.label, demo=session.demo)
    await run_one_cycle(session, state)
    return snapshot_json(state)
