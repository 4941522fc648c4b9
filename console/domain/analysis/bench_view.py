"""What the benchmark pane shows, accumulated: time series on one wall-clock axis (the client's
output tokens per 1-s bin, the server's own gen throughput, GPU utilization), the live run's
latencies, finished runs, and the pair to compare. Bounded; no Textual, no I/O."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from console.domain.bench.metrics import percentile_sorted
from console.domain.bench.runner import Progress

WINDOW_S = 300
# A GPU sample this close to the two before it, at their value, only lengthens a flat line; a
# longer silence first (the sampler stalled, the host came back) is news of its own.
FLAT_SAMPLE_GAP_S = 10.0


@dataclass
class LiveRun:
    label: str
    started_at_s: float
    total: int
    done: int = 0
    failed: int = 0
    bins: dict[int, int] = field(default_factory=dict)  # wall second -> tokens
    ttft_ms: deque[float] = field(default_factory=lambda: deque(maxlen=5000))
    itl_ms: deque[float] = field(default_factory=lambda: deque(maxlen=20000))  # the latest gaps


WORKLOAD_KEYS = ("max_concurrency", "random_input_len", "random_output_len", "dataset_name")


def is_result(record: dict[str, Any]) -> bool:
    """A run that finished at least one request; one stopped (x) before any did is not a result:
    it is never saved, shown as a run, or taken as "the old model's last run" (issue 20)."""
    completed = record.get("completed")
    if completed is None:  # a record without the count (imported, older): taken as it is
        return True
    return isinstance(completed, int) and not isinstance(completed, bool) and completed > 0


def stopped_text(metrics: dict[str, Any]) -> str:
    """What `x` did to a run, in words: how many of its requests went out and finished, and for a
    sweep, which run it stopped and which never ran ("sweep stopped (x) in run 1 of 4: 3 of 8
    requests sent, 2 finished; not run: c=4 …")."""
    total = metrics.get("num_prompts")
    sent = metrics.get("sent")
    completed = metrics.get("completed") or 0
    if isinstance(sent, int) and isinstance(total, int):
        what = f"{sent} of {total} requests sent, {completed} finished"
    else:  # a record from before the count: what it said then
        what = (f"{metrics.get('not_sent_or_cancelled', 0)} requests not sent or cancelled in flight, "
                f"{completed} finished")
    run, runs = metrics.get("sweep_run"), metrics.get("sweep_runs")
    head = f"sweep stopped (x) in run {run} of {runs}" if run and runs else "stopped (x)"
    if not is_result(metrics):
        text = f"{head} before any request finished: no result" + (
            f" ({sent} of {total} requests sent)" if isinstance(sent, int) and isinstance(total, int) else "")
    else:
        text = f"{head}: {what}; the figures cover the {completed} finished"
    not_run = metrics.get("sweep_not_run") or []
    if not_run:
        text += "; not run: " + ", ".join(str(label).split(" ·")[0] for label in not_run)
    return text


def workload(record: dict[str, Any]) -> tuple[object, ...]:
    """What makes two runs comparable: concurrency, input/output lengths, dataset."""
    return tuple(record.get(k) for k in WORKLOAD_KEYS)


def describe_workload(record: dict[str, Any]) -> str:
    c, i, o, d = workload(record)
    return f"c={c or '∞'} at {i}/{o} ({d or 'random'})"


def before_after(runs: list[dict[str, Any]], host: str | None = None
                 ) -> tuple[tuple[dict[str, Any], dict[str, Any]] | None, str | None]:
    """Before and after a swap on one host: its latest result and the latest earlier result of
    another model there. The pair only when both ran the same workload; otherwise (None, why):
    "not comparable: c=64 at 1024/1024 (random) vs c=4 at 256/256 (random)"."""
    # A run stopped part way (x) is no measure of the model: never before, never after (issue 35).
    results = [r for r in runs if is_result(r) and not r.get("stopped")]
    if host is None:
        host = results[-1].get("host") if results else None
    mine = [r for r in results if r.get("host") == host]
    if not mine:
        return None, None
    latest = mine[-1]
    others = [r for r in mine[:-1] if r.get("model") != latest.get("model")]
    if not others:
        return None, None
    like = [r for r in others if workload(r) == workload(latest)]
    if like:
        return (like[-1], latest), None
    return None, f"not comparable: {describe_workload(others[-1])} vs {describe_workload(latest)}"


@dataclass(frozen=True, slots=True)
class LiveRunData:
    """A live run as plain data (the state's snapshot)."""

    label: str
    started_at_s: float
    total: int
    done: int
    failed: int
    bins: tuple[tuple[int, int], ...]
    ttft_ms: tuple[float, ...]
    itl_ms: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class BenchData:
    """Everything the benchmark view holds, as plain data the codec carries (issue 20): a late
    attacher or a replay seek restores it whole, series and marks included."""

    gpu_util: tuple[tuple[float, float], ...] = ()
    server_gen: tuple[tuple[float, float], ...] = ()
    accept_len: tuple[tuple[float, float], ...] = ()
    client_bins: tuple[tuple[int, int], ...] = ()
    live: LiveRunData | None = None
    results: tuple[dict[str, Any], ...] = ()
    history: tuple[dict[str, Any], ...] = ()
    error: str | None = None
    host: str | None = None
    marks: tuple[tuple[float, str], ...] = ()
    boot_seen: tuple[str | None, bool] | None = None
    stopped_note: str | None = None
    gaps: tuple[tuple[float, float | None], ...] = ()


class BenchView:
    def __init__(self) -> None:
        self.gpu_util: deque[tuple[float, float]] = deque(maxlen=WINDOW_S * 2)
        self.server_gen: deque[tuple[float, float]] = deque(maxlen=WINDOW_S * 2)
        self.accept_len: deque[tuple[float, float]] = deque(maxlen=WINDOW_S * 2)
        self.live: LiveRun | None = None
        self.client_bins: dict[int, int] = {}
        self.results: list[dict[str, Any]] = []  # this session's finished runs (a sweep: several)
        self.history: list[dict[str, Any]] = []  # saved runs, for the comparison
        self.error: str | None = None
        self.host: str | None = None  # the host on screen: the before/after pair is of its runs only
        self.marks: deque[tuple[float, str]] = deque(maxlen=16)  # (wall time, what happened) on the time chart
        self._boot_seen: tuple[str | None, bool] | None = None
        self.stopped_note: str | None = None  # what `x` did to the last run, in words
        # Spans of wall time with no server (stopped at, ready at or None while none serves): the
        # server's series has a gap there, never a line joining the points either side.
        self.gaps: deque[tuple[float, float | None]] = deque(maxlen=16)
        # The state's clock (HostState sets it): in a replay "now" is the recording's time, so the
        # time chart's last 120 s are the recording's, not the wall clock's (issue 20).
        self.clock: Callable[[], float] = time.time
        self.version = 0  # bumped on every change: the pane redraws only when it moved

    def now(self) -> float:
        return self.clock()

    def to_data(self) -> BenchData:
        live = self.live
        live_data = None if live is None else LiveRunData(
            live.label, live.started_at_s, live.total, live.done, live.failed, tuple(sorted(live.bins.items())),
            tuple(live.ttft_ms), tuple(live.itl_ms))
        return BenchData(tuple(self.gpu_util), tuple(self.server_gen), tuple(self.accept_len),
                         tuple(sorted(self.client_bins.items())), live_data, tuple(self.results),
                         tuple(self.history), self.error, self.host, tuple(self.marks), self._boot_seen,
                         self.stopped_note, tuple(self.gaps))

    def restore(self, data: BenchData) -> None:
        """Become what `data` describes (the same bounds as a view that lived it)."""
        self.gpu_util = deque(data.gpu_util, maxlen=WINDOW_S * 2)
        self.server_gen = deque(data.server_gen, maxlen=WINDOW_S * 2)
        self.accept_len = deque(data.accept_len, maxlen=WINDOW_S * 2)
        self.client_bins = dict(data.client_bins)
        live = data.live
        if live is None:
            self.live = None
        else:
            self.live = LiveRun(live.label, live.started_at_s, live.total, live.done, live.failed, dict(live.bins))
            self.live.ttft_ms.extend(live.ttft_ms)
            self.live.itl_ms.extend(live.itl_ms)
        self.results = [dict(r) for r in data.results]
        self.history = [dict(r) for r in data.history]
        self.error, self.host, self.stopped_note = data.error, data.host, data.stopped_note
        self.marks = deque(data.marks, maxlen=16)
        self._boot_seen = data.boot_seen
        self.gaps = deque(data.gaps, maxlen=16)
        self._touch()

    def _touch(self) -> None:
        self.version += 1

    def add_gpu(self, t: float, util_pct: float) -> None:
        """A GPU sample on the time chart. One at the value of the two before it, within seconds
        of them, only makes a flat line longer: held without a new version (the chart's own
        clock draws a line growing, `BenchPane._chart_due`), so a still GPU's 1 Hz samples do
        not tell the screen's flush that the bench view moved (issue 36: 15-16 of them in 30 s)."""
        series = self.gpu_util
        only_longer = (len(series) >= 2 and series[-1][1] == util_pct == series[-2][1]
                       and 0.0 <= t - series[-2][0] <= FLAT_SAMPLE_GAP_S)
        series.append((t, util_pct))
        if not only_longer:
            self._touch()

    def add_server_points(self, points: list[tuple[float, float | None, float | None]]) -> None:
        last = self.server_gen[-1][0] if self.server_gen else 0.0
        for t, gen, accept in points:
            if t <= last or self.in_gap(t):  # no server then: a point there is a late line of the old one
                continue
            if gen is not None:
                self.server_gen.append((t, gen))
            if accept is not None:
                self.accept_len.append((t, accept))
            self._touch()

    def mark(self, t_s: float, label: str) -> None:
        """A vertical mark on the time chart (the swap: old server stopped, new one launching, ready)."""
        self.marks.append((t_s, label))
        self._touch()

    def open_gap(self, t_s: float) -> None:
        """No server from `t_s` (its unit stopped) until the next one is ready."""
        if not self.gaps or self.gaps[-1][1] is not None:
            self.gaps.append((t_s, None))
            self._touch()

    def close_gap(self, t_s: float) -> None:
        if self.gaps and self.gaps[-1][1] is None:
            self.gaps[-1] = (self.gaps[-1][0], t_s)
            self._touch()

    def in_gap(self, t_s: float) -> bool:
        return any(lo <= t_s and (hi is None or t_s < hi) for lo, hi in self.gaps)

    def note_log(self, summary: Any, now_s: float) -> None:
        """Marks from the log summary's boot timeline, at the time they reached the console: a new
        boot ("new server launching": the old one is gone or going) and its "ready" line."""
        boot = getattr(summary, "boot", None) or ()
        if not boot:
            return
        first = boot[0]
        key = (f"{first.phase}@{first.at}", any(step.phase == "ready" for step in boot))
        seen = self._boot_seen
        self._boot_seen = key
        if seen is None:
            return  # the boot that was there when the console started: not something we saw happen
        if key[0] != seen[0] and first.phase == "launch":
            self.mark(now_s, "new server launching")
        if key[1] and (key[0] != seen[0] or not seen[1]):
            self.mark(now_s, "new server ready")
            self.close_gap(now_s)

    def start(self, label: str, total: int, now_s: float | None = None) -> None:
        self.live = LiveRun(label, self.now() if now_s is None else now_s, total)
        self.error = None
        self.stopped_note = None
        self._touch()

    def progress(self, p: Progress) -> None:
        if self.live is None:
            return
        run = self.live
        run.done, run.failed = p.done, p.failed
        base = p.run_started_wall_s or run.started_at_s
        newest = None
        for t in p.token_times_s:
            second = int(base + t)
            run.bins[second] = run.bins.get(second, 0) + 1
            self.client_bins[second] = self.client_bins.get(second, 0) + 1
            newest = second if newest is None else max(newest, second)
        # Bounded as written: a headless core draws no chart, so `series` never trims its bins. The
        # bins come mostly in order: the first one says whether any is out of the window.
        if newest is not None and next(iter(self.client_bins)) < newest - WINDOW_S:
            for second in [s for s in self.client_bins if s < newest - WINDOW_S]:
                del self.client_bins[second]
        if p.ttft_ms is not None:
            run.ttft_ms.append(p.ttft_ms)
        run.itl_ms.extend(p.itl_ms)
        self._touch()

    def finish(self, metrics: dict[str, Any]) -> None:
        self.note_stop(metrics)
        if not is_result(metrics):  # stopped before any request finished: said, never a result
            self._touch()
            return
        self.results.append(metrics)
        self.results = self.results[-16:]
        self._touch()

    def end(self, error: str | None = None) -> None:
        self.error = error
        self.live = None
        self._touch()

    def note_stop(self, metrics: dict[str, Any]) -> None:
        """After `x`: no request was sent from then on and the ones in flight were cancelled."""
        if not metrics.get("stopped"):
            return
        self.stopped_note = stopped_text(metrics)
        self._touch()

    def series(self, now_s: float, span_s: int) -> dict[str, list[tuple[float, float]]]:
        """Each series as (seconds before now, value) over the last span_s seconds."""
        lo = now_s - span_s
        # Old bins are trimmed here, so the dict stays bounded.
        for second in [s for s in self.client_bins if s < now_s - WINDOW_S]:
            del self.client_bins[second]
        client = [(s - now_s, float(n)) for s, n in sorted(self.client_bins.items()) if lo <= s <= now_s - 1]
        return {
            "client tok/s": client,
            "server gen tok/s": [(t - now_s, v) for t, v in self.server_gen if t >= lo],
            "GPU util %": [(t - now_s, v) for t, v in self.gpu_util if t >= lo],
        }

    def server_segments(self, now_s: float, span_s: int) -> list[list[tuple[float, float]]]:
        """The server's series cut where no server existed (a gap): each piece is drawn alone, so
        no line joins the last point before the old server stopped to the first after the new
        one was ready (issue 20)."""
        pieces: list[list[tuple[float, float]]] = [[]]
        lo = now_s - span_s
        prev: float | None = None
        for t, v in self.server_gen:
            if t < lo:
                continue
            if prev is not None and any(prev < g_lo and (g_hi is None or g_lo < t) for g_lo, g_hi in self.gaps):
                pieces.append([])
            pieces[-1].append((t - now_s, v))
            prev = t
        return [piece for piece in pieces if piece]

    def table_signature(self) -> tuple[object, ...]:
        """What the results table depends on (not the 1 Hz GPU and log samples)."""
        live = self.live
        live_sig = None if live is None else (live.label, live.done, live.failed, len(live.ttft_ms))
        return (live_sig, len(self.results), self.error, len(self.history), self.host, self.stopped_note)

    def comparison(self) -> tuple[tuple[dict[str, Any], dict[str, Any]] | None, str | None]:
        """The before/after pair of this host's saved runs, or why there is none (like workloads only)."""
        return before_after(self.history, self.host)

    def sweep_points(self) -> list[tuple[int, float, float]]:
        """(concurrency, output tok/s, p99 TTFT ms) of this session's finished runs, by concurrency."""
        pts = [(int(r["max_concurrency"]), float(r["output_throughput"]), float(r["p99_ttft_ms"]))
               for r in self.results if r.get("max_concurrency")]
        return sorted(pts)

    def live_percentiles(self) -> dict[str, tuple[float, float, float]] | None:
        run = self.live
        if run is None or not run.ttft_ms:
            return None
        # Sorted once each (not once per percentile): this runs on the UI's loop during a run.
        ttft, itl = sorted(run.ttft_ms), sorted(run.itl_ms)
        return {"TTFT": (percentile_sorted(ttft, 50), percentile_sorted(ttft, 90), percentile_sorted(ttft, 99)),
                "ITL": (percentile_sorted(itl, 50), percentile_sorted(itl, 90), percentile_sorted(itl, 99))}
