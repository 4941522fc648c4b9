"""How long a restart will keep the service down, predicted from this host's own boots.

Every boot SGLang logs is a measurement: `Load weight end. elapsed=…` (the weights phase), the
cache allocations, `Capture … CUDA graph end. … elapsed=…`, then ready. The recordings under the
recordings dir hold those lines (LogAppended events); `boots_from_events` turns them into
`BootSample`s, `predict_restart` into a per-phase prediction for the new model's bytes and the
page-cache residency of its shards (`fincore`, parsed here; unknown when the host has no fincore,
and then the prediction says so and assumes a cold read).

Pure but for `samples_from_recordings`, which reads recordings from disk (bounded).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from console.core.derive.downtime import PathEvent
from console.core.recording import RecordingError, read_recording
from console.core.state import LogAppended, ReadingChanged, SwapStepChanged
from console.domain.swap.paths import format_duration

GB = 1e9
# When no boot on this host read a warm page cache, the warm rate is this assumption (said so in
# the prediction): memory-bandwidth-bound copying into pinned buffers, far above any disk.
ASSUMED_CACHE_GBPS = 12.0
# When no earlier stop of a server on this host is recorded: the stop and drain as the console's
# restart lives it is at least one GPU reading (the new server starts only once a reading shows the
# memory drained; 1 s is the profile's default gpu_interval_s), plus the old server's exit.
ASSUMED_STOP_S = 1.0
START_WINDOW_S = 300.0  # a unit's "Started" line this long before a launch line is that server's start
MAX_RECORDINGS = 12  # the most recent recordings read for boots (each can be tens of MB)
RANK_RE = re.compile(r"\bTP(\d+)\b")


@dataclass(frozen=True, slots=True)
class BootSample:
    """One boot as the server logged it (seconds by the log's own clock and `elapsed=` fields)."""

    weights_bytes: float  # per-GPU weights × TP ranks seen
    weights_s: float
    kv_s: float  # weights loaded → last cache allocated
    graphs_s: float  # CUDA graph capture
    init_s: float  # launch → weights begin
    ready_s: float  # graphs done → ready (HTTP up, warmup)
    tp: int
    cached_fraction: float | None = None  # page-cache residency when it booted, when known
    at: str | None = None  # the launch line's stamp
    start_s: float | None = None  # the unit's start (systemd's "Started" line) → the launch line, when logged
    stop_s: float | None = None  # the stop and drain before this boot (an earlier swap's), when recorded
    launch_at_s: float | None = None  # the launch line's time (`line_time`: the host's, else its stamp)

    @property
    def weights_gbps(self) -> float | None:
        return self.weights_bytes / GB / self.weights_s if self.weights_s > 0 and self.weights_bytes > 0 else None

    @property
    def total_s(self) -> float:
        return (self.start_s or 0.0) + self.init_s + self.weights_s + self.kv_s + self.graphs_s + self.ready_s


def _clock(ts: str | None) -> datetime | None:
    if not ts:
        return None
    for fmt in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S", "%H:%M:%S"):
        try:
            return datetime.strptime(ts.replace(",", "."), fmt)
        except ValueError:
            continue
    return None


def _when(e: Any) -> datetime | None:
    """A line's time: the host's time of it where its source gave one (journald's, Docker's), else
    its own stamp (console.host.parsers.sglang_log.line_time)."""
    at = getattr(e, "at_s", None)
    return datetime.fromtimestamp(at) if at is not None else _clock(e.ts)


@dataclass
class _Boot:
    stamps: dict[str, datetime] = field(default_factory=dict)
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)
    ranks: set[int] = field(default_factory=set)
    at: str | None = None
    start_s: float | None = None
    launch_at_s: float | None = None


def boots_from_events(events: Iterable[Any], cached: dict[str, float] | None = None,
                      stops: dict[str, float] | None = None,
                      container_starts: Iterable[float] = ()) -> list[BootSample]:
    """Complete boots (launch … ready) in a stream of parsed log lines (console.host.parsers.sglang_log
    LogEvents), each with the start before its launch when systemd's "Started" line is in the
    stream, else when a container's start (`docker inspect`'s State.StartedAt, epoch seconds, in
    `container_starts`) came shortly before it. A boot that never got ready (an OOM) is no sample of
    how long a boot takes. `cached` and `stops`: the page-cache residency and the stop before a boot,
    by its launch stamp."""
    out: list[BootSample] = []
    cur: _Boot | None = None
    started: datetime | None = None
    docker_starts = sorted(set(container_starts))
    for e in events:
        if getattr(e, "kind", None) == "unit" and (getattr(e, "fields", None) or {}).get("transition") in (
                "started", "starting"):
            started = _when(e) or started
            continue
        if getattr(e, "kind", None) != "boot":
            continue
        phase = e.phase
        if phase == "launch":
            cur = _Boot(at=e.ts)
            launch = _when(e)
            cur.launch_at_s = launch.timestamp() if launch is not None else None
            if started is not None and launch is not None and 0 <= (launch - started).total_seconds() <= START_WINDOW_S:
                cur.start_s = (launch - started).total_seconds()
            elif launch is not None:  # the container's start: Docker's, the last one before this launch
                at = launch.timestamp()
                before = [at - t for t in docker_starts if 0 <= at - t <= START_WINDOW_S]
                cur.start_s = min(before) if before else None
            started = None
        if cur is None:
            continue
        for m in RANK_RE.finditer(e.ranks or ""):
            cur.ranks.add(int(m.group(1)))
        stamp = _when(e)
        if phase not in cur.stamps and stamp is not None:
            cur.stamps[phase] = stamp
            cur.fields[phase] = dict(e.fields or {})
        if phase == "ready":
            sample = _sample(cur, cached, stops)
            if sample is not None:
                out.append(sample)
            cur = None
    return out


def _sample(b: _Boot, cached: dict[str, float] | None, stops: dict[str, float] | None = None) -> BootSample | None:
    s = b.stamps

    def gap(a: str, z: str) -> float | None:
        return (s[z] - s[a]).total_seconds() if a in s and z in s else None

    loaded = b.fields.get("weights loaded") or {}
    weights_s = loaded.get("seconds") if isinstance(loaded.get("seconds"), (int, float)) else gap(
        "weights loading", "weights loaded")
    per_gpu = loaded.get("weights_gib")
    if weights_s is None or not isinstance(per_gpu, (int, float)):
        return None
    tp = max(1, len(b.ranks))
    caches = [p for p in ("mamba cache", "kv cache") if p in s]
    kv_s = max((gap("weights loaded", p) or 0.0) for p in caches) if caches else 0.0
    done = b.fields.get("cuda graphs done") or {}
    graphs_s = done.get("seconds") if isinstance(done.get("seconds"), (int, float)) else (
        gap("cuda graphs", "cuda graphs done") or 0.0)
    ready_from = "cuda graphs done" if "cuda graphs done" in s else caches[-1] if caches else "weights loaded"
    return BootSample(float(per_gpu) * (1 << 30) * tp, float(weights_s), max(0.0, kv_s), float(graphs_s),
                      max(0.0, gap("launch", "weights loading") or 0.0), max(0.0, gap(ready_from, "ready") or 0.0),
                      tp, (cached or {}).get(b.at or ""), b.at, b.start_s, (stops or {}).get(b.at or ""),
                      b.launch_at_s)


def samples_from_recordings(directory: Path, limit: int = MAX_RECORDINGS) -> tuple[list[BootSample], list[str]]:
    """Boots in the most recent recordings of this host's directory; (samples, problems)."""
    problems: list[str] = []
    try:
        files = sorted(directory.glob("*.jsonl.gz"), key=lambda p: p.stat().st_mtime)[-limit:]
    except OSError as exc:
        return [], [f"{directory}: {exc}"]
    samples: list[BootSample] = []
    for path in files:
        try:
            rec = read_recording(path)
        except (RecordingError, OSError) as exc:
            problems.append(str(exc))
            continue
        # A boot launched after a path plan read fincore had that page-cache residency (the plan
        # after a pre-warm is the one that counts): that makes warm boots samples of the warm rate.
        # A swap's stop and drain (the old server's stop step, done: the console's own or one the
        # observer saw) is the stop before the next boot.
        # A container's start (Docker's StartedAt, in the service readings) is the start before the
        # boot it launched, as a unit's "Started" line is.
        events: list[Any] = []
        cached: dict[str, float] = {}
        stops: dict[str, float] = {}
        starts: set[float] = set()
        fraction: float | None = None
        stop: float | None = None
        for _, entry in rec.entries:
            if isinstance(entry, ReadingChanged) and entry.source == "service" and entry.reading.data is not None:
                for side in (getattr(entry.reading.data, "old", None), getattr(entry.reading.data, "new", None)):
                    at = getattr(side, "started_at_s", None)
                    if isinstance(at, (int, float)) and not isinstance(at, bool):
                        starts.add(float(at))
            elif isinstance(entry, PathEvent) and entry.kind == "plan":
                fraction = ((entry.data().get("residency") or {}).get("fraction"))
            elif isinstance(entry, SwapStepChanged) and entry.step.key == "stop_old" and entry.step.state == "done" \
                    and entry.step.duration_s is not None:
                stop = entry.step.duration_s
            elif isinstance(entry, LogAppended):
                for ev in entry.events:
                    if getattr(ev, "kind", None) == "boot" and ev.phase == "launch" and ev.ts:
                        if fraction is not None:
                            cached[ev.ts] = float(fraction)
                            fraction = None  # the next boot only (a later one may be another model's)
                        if stop is not None:
                            stops[ev.ts] = stop
                            stop = None
                    events.append(ev)
        samples += boots_from_events(events, cached, stops, starts)
    return samples, problems


# -- page-cache residency ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Residency:
    resident_bytes: int | None  # None: unknown (no fincore, or it failed)
    total_bytes: int
    files: int
    why_unknown: str = ""
    cached_files: tuple[str, ...] = ()  # shards wholly in the page cache (for the read-rate probe)

    @property
    def fraction(self) -> float | None:
        if self.resident_bytes is None or self.total_bytes <= 0:
            return None
        return max(0.0, min(1.0, self.resident_bytes / self.total_bytes))

    def text(self) -> str:
        f = self.fraction
        if f is None:
            return f"page cache unknown ({self.why_unknown or 'not measured'})"
        return f"{f * 100:.0f} % in page cache"


FINCORE_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(.+?)\s*$")


def parse_fincore(text: str, total_bytes: int, status: int = 0) -> Residency:
    """`fincore --bytes --noheadings --output RES,SIZE,FILE -- FILES…` (util-linux). Exit 127 or a
    'not found' line: the host has no fincore — unknown, said so."""
    if status == 127 or "fincore: command not found" in text or "NO_FINCORE" in text:
        return Residency(None, total_bytes, 0, "the host has no fincore (util-linux)")
    resident, files = 0, 0
    whole: list[str] = []
    for line in text.splitlines():
        m = FINCORE_ROW.match(line)
        if m:
            resident += int(m.group(1))
            files += 1
            if int(m.group(1)) >= int(m.group(2)) > 0:
                whole.append(m.group(3))
    if files == 0:
        return Residency(None, total_bytes, 0, f"fincore answered nothing (exit {status})")
    return Residency(resident, total_bytes, files, cached_files=tuple(whole))


DD_RATE = re.compile(r"copied, ([\d.]+) s, ([\d.]+) ([kMGT]?B)/s")
UNIT_BYTES = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}


def parse_dd_rate(text: str) -> float | None:
    """GB/s from dd's summary line ("… bytes (1.1 GB, 1.0 GiB) copied, 0.09 s, 11.9 GB/s")."""
    m = DD_RATE.search(text)
    if not m:
        return None
    return float(m.group(2)) * UNIT_BYTES.get(m.group(3), 1) / GB


# -- the prediction ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RestartPrediction:
    total_s: float | None
    phases: dict[str, float]  # stop, init, weights, kv, graphs, ready (seconds)
    weights_bytes: float
    disk_gbps: float | None
    cache_gbps: float
    cached_fraction: float | None
    boots: int
    text: str
    assumptions: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"predicted_downtime_s": None if self.total_s is None else round(self.total_s, 1),
                "phases_s": {k: round(v, 1) for k, v in self.phases.items()},
                "weights_bytes": int(self.weights_bytes), "disk_gbps": self.disk_gbps, "cache_gbps": self.cache_gbps,
                "cached_fraction": self.cached_fraction, "boots": self.boots, "text": self.text,
                "assumptions": list(self.assumptions)}


def weights_seconds(weights_bytes: float, cached_fraction: float, disk_gbps: float, cache_gbps: float) -> float:
    """The weights phase: the cold bytes at the disk's rate, the warm ones at the page cache's."""
    cold = weights_bytes * (1 - cached_fraction)
    return cold / (disk_gbps * GB) + (weights_bytes - cold) / (cache_gbps * GB)


def predict_restart(samples: list[BootSample], weights_bytes: float, residency: Residency | None, *,
                    stop_s: float | None = None, cache_gbps: float | None = None,
                    container: bool = False) -> RestartPrediction:
    """Per phase, from the median of this host's boots: weights at the disk rate those boots read at
    (those known to be cold first; all of them otherwise, said so), the cached share at the warm rate.
    `container`: the server runs in a container, so its start is Docker's, not a unit's (the words)."""
    assumptions: list[str] = []
    if not samples:
        return RestartPrediction(None, {}, weights_bytes, None, ASSUMED_CACHE_GBPS,
                                 residency.fraction if residency else None, 0,
                                 "restart: predicted downtime unknown: no earlier boot of a server on this host is "
                                 "recorded", ("no boot recorded on this host",))
    cold = [s for s in samples if s.cached_fraction is not None and s.cached_fraction < 0.1 and s.weights_gbps]
    warm = [s for s in samples if s.cached_fraction is not None and s.cached_fraction > 0.9 and s.weights_gbps]
    rated = cold or [s for s in samples if s.weights_gbps and (s.cached_fraction is None or s.cached_fraction < 0.9)]
    if not cold:
        assumptions.append("the earlier boots are taken as reads from disk (their page cache was not measured)")
    disk = statistics.median(s.weights_gbps for s in rated) if rated else None  # type: ignore[misc]
    cache = _cache_rate(warm, cache_gbps, disk, assumptions)
    frac = residency.fraction if residency is not None else None
    if frac is None:
        assumptions.append("page-cache residency unknown: predicted as a cold read"
                           + (f" ({residency.why_unknown})" if residency and residency.why_unknown else ""))
    if disk is None:
        return RestartPrediction(None, {}, weights_bytes, None, cache, frac, len(samples),
                                 "restart: predicted downtime unknown: no boot with a weights rate",
                                 tuple(assumptions))
    stops = [s.stop_s for s in samples if s.stop_s is not None]
    if stop_s is None and stops:
        stop_s = statistics.median(stops)  # earlier swaps' stop and drain on this host
    elif stop_s is None:
        stop_s = ASSUMED_STOP_S
        assumptions.append(f"stop and drain {ASSUMED_STOP_S:g} s assumed: no earlier stop recorded on this host "
                           "(the new server starts once a GPU reading shows the memory drained)")
    starts = [s.start_s for s in samples if s.start_s is not None]
    if not starts:
        started = ("the container's start (Docker's start event)" if container
                   else "the unit's start (systemd's Started line)")
        assumptions.append(f"{started} → the server's first log line is not in the earlier boots' logs: counted as 0")
    phases = {
        "stop": stop_s,
        "start": statistics.median(starts) if starts else 0.0,
        "init": statistics.median(s.init_s for s in samples),
        "weights": weights_seconds(weights_bytes, frac or 0.0, disk, cache),
        "kv": statistics.median(s.kv_s for s in samples),
        "graphs": statistics.median(s.graphs_s for s in samples),
        "ready": statistics.median(s.ready_s for s in samples),
    }
    total = sum(phases.values())
    cached = residency.text() if residency is not None else "page cache not measured"
    n = len(samples)
    text = (f"restart: predicted downtime {format_duration(total)}: stop and drain {phases['stop']:.0f} s, "
            f"{weights_bytes / GB:.0f} GB weights {_read_rates(frac, disk, cache, cached)}, graphs "
            f"{phases['graphs']:.0f} s — from {n} earlier boot{'s' if n != 1 else ''} on this host")
    return RestartPrediction(total, phases, weights_bytes, round(disk, 3), cache, frac, n, text, tuple(assumptions))


def _read_rates(frac: float | None, disk: float, cache: float, cached: str) -> str:
    """The read rate the weights phase was predicted with, named where it applies: the disk's for
    the cold bytes, the page cache's for the warm ones (a 100 % cached read said "16.8 GB/s from
    disk" while the 96 GB/s of the page cache made the figure)."""
    if not frac:
        return f"at {disk:.1f} GB/s from disk, {cached}"
    if frac >= 0.995:
        return f"at {cache:.1f} GB/s from the page cache ({cached})"
    return (f"{1 - frac:.0%} at {disk:.1f} GB/s from disk, {frac:.0%} at {cache:.1f} GB/s from the page cache "
            f"({cached})")


def _cache_rate(warm: list[BootSample], measured: float | None, disk: float | None, notes: list[str]) -> float:
    """The warm read rate: warm boots recorded on this host; else dd's rate on a cached shard (an
    upper bound: the loader also parses and copies to the GPUs); else an assumption. Never below
    the disk's rate (a cached read is not slower than a cold one)."""
    if warm:
        return statistics.median(s.weights_gbps for s in warm)  # type: ignore[misc]
    if measured and measured >= (disk or 0.0):
        notes.append(f"page-cache read rate {measured:.1f} GB/s measured by dd on a cached shard (no warm boot "
                     "recorded; the loader may be slower)")
        return measured
    if measured:
        notes.append(f"page-cache read rate taken as the disk's {disk:.1f} GB/s: dd measured {measured:.1f} GB/s "
                     "on a cached shard, and a cached read is not slower than a cold one")
        return disk or measured
    if disk is not None and disk > ASSUMED_CACHE_GBPS:
        notes.append(f"page-cache read rate taken as the disk's {disk:.1f} GB/s (no warm boot recorded, none "
                     f"measured; the usual {ASSUMED_CACHE_GBPS:g} GB/s assumption is below it, and a cached read "
                     "is not slower than a cold one)")
        return disk
    notes.append(f"page-cache read rate {ASSUMED_CACHE_GBPS:g} GB/s assumed (no warm boot recorded)")
    return ASSUMED_CACHE_GBPS


def predict_in_place(samples: list[BootSample], weights_bytes: float, residency: Residency | None, *,
                     cache_gbps: float | None = None) -> tuple[float | None, str]:
    """The in-place pause: the same loader reads the same bytes, so the weights phase of a boot
    (no KV allocation, no graph capture: SGLang keeps both)."""
    rated = [s for s in samples if s.weights_gbps and (s.cached_fraction is None or s.cached_fraction < 0.9)]
    if not rated:
        return None, "in-place pause unknown: no boot with a weights rate recorded on this host"
    warm = [s for s in samples if s.cached_fraction is not None and s.cached_fraction > 0.9 and s.weights_gbps]
    disk = statistics.median(s.weights_gbps for s in rated)  # type: ignore[misc]
    cache = _cache_rate(warm, cache_gbps, disk, [])
    frac = residency.fraction if residency is not None else None
    pause = weights_seconds(weights_bytes, frac or 0.0, disk, cache)
    cached = residency.text() if residency is not None else "page cache not measured"
    return pause, (f"pause {format_duration(pause)}: {weights_bytes / GB:.0f} GB at {disk:.1f} GB/s from disk, "
                   f"{cached} — from {len(rated)} earlier boot{'s' if len(rated) != 1 else ''} on this host")


__all__ = ["BootSample", "Residency", "RestartPrediction", "boots_from_events", "parse_fincore", "predict_in_place",
           "predict_restart", "samples_from_recordings", "weights_seconds"]
