"""What the log says, accumulated: the boot timeline, the latest batch statistics, capacity, cache
sizes, errors (a traceback kept as one event) and the throughput series. Bounded everywhere."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from collections.abc import Callable
from typing import Any

from console.host.parsers.sglang_log import BOOT_PHASES, LogEvent, batch_fields, line_time

MAX_ERRORS = 50
MAX_TRACEBACK_LINES = 60
# The throughput points kept: one per second of the log's own time, twice the time chart's window
# (analysis/bench_view.py WINDOW_S), so a backlog read at connect fills the chart.
SERIES_KEPT = 600
# A time zone is a whole number of quarter hours: the log's stamps (the host's local time) differ
# from our clock by k * 900 s plus the line's delivery lag and the clocks' skew.
TZ_QUANTUM_S = 900.0
LIVE_LAG_S = 60.0  # a batch's newest line this close to now (modulo a time zone) was written just now
ZONES_S = 14 * 3600.0  # the farthest a time zone is from ours (UTC-12 to UTC+14: 26 h apart at most)


@dataclass(frozen=True, slots=True)
class BootStep:
    phase: str
    at: str | None  # the log's own timestamp
    seconds: float | None  # since the launch line, by the host's time of the lines (`line_time`)
    detail: str
    at_s: float | None = None  # the host's time of its line (`line_time`: journald's, Docker's, else the stamp)


@dataclass(frozen=True, slots=True)
class LogError:
    at: str | None
    kind: str
    message: str
    lines: tuple[str, ...] = ()
    at_s: float | None = None  # the host's time of its line (`line_time`: journald's, Docker's, else the stamp)


def logged_since(error: LogError, step: BootStep | None) -> bool:
    """Whether `error` was logged at or after the boot step `step` (None: no boot known, so yes): by the
    host's times of their lines where both have one (a previous boot's OOM in the new launch's
    whole second is not this boot's), else by their own stamps."""
    if step is None or (step.at is None and step.at_s is None):
        return True
    if error.at_s is not None and step.at_s is not None:
        return error.at_s >= step.at_s
    return (error.at or "") >= (step.at or "")


@dataclass(frozen=True, slots=True)
class ThroughputPoint:
    t_s: float  # the decode line's own time (its stamp, on our clock); its arrival when it has none
    gen_tokens_per_s: float | None
    accept_len: float | None
    running: int | None
    queue: int | None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class DecodeStats:
    """The latest `Decode batch` line, typed (SGLang's labels in the comments)."""

    at: str | None
    gen_tokens_per_s: float | None = None  # "gen throughput (token/s)"
    running_reqs: int | None = None  # "#running-req"
    queue_reqs: int | None = None  # "#queue-req"
    token_usage: float | None = None  # "token usage" (0..1)
    full_token_usage: float | None = None  # "full token usage" (hybrid models: the full-attention pool)
    mamba_usage: float | None = None  # "mamba usage"
    accept_len: float | None = None  # "accept len" (speculative decoding)
    accept_rate: float | None = None  # "accept rate"
    cuda_graph: bool | None = None  # "cuda graph"

    @classmethod
    def from_fields(cls, at: str | None, f: dict[str, Any]) -> DecodeStats:
        graph = f.get("cuda graph")
        return cls(at, _number(f.get("gen throughput (token/s)")), _count(f.get("#running-req")),
                   _count(f.get("#queue-req")), _number(f.get("token usage")), _number(f.get("full token usage")),
                   _number(f.get("mamba usage")), _number(f.get("accept len")), _number(f.get("accept rate")),
                   graph if isinstance(graph, bool) else None)

    @property
    def kv_usage(self) -> float | None:
        """The pool that fills first: the full-attention pool when SGLang reports it."""
        return self.full_token_usage if self.full_token_usage is not None else self.token_usage


@dataclass(frozen=True, slots=True)
class LogSummary:
    source: str
    phase: str | None  # the last boot phase seen, or "serving"
    boot: tuple[BootStep, ...]
    last_prefill: dict[str, Any] | None
    last_decode: DecodeStats | None
    capacity: dict[str, Any] | None
    kv_cache: dict[str, Any] | None
    mamba_cache: dict[str, Any] | None
    weights: dict[str, Any] | None
    errors: tuple[LogError, ...]
    lines_seen: int
    last_line_at_s: float | None
    series: tuple[ThroughputPoint, ...] = ()
    unparsed_lines: int = 0  # lines shown as plain text because a number in them did not parse


def _detail(phase: str, f: dict[str, Any]) -> str:
    if phase == "weights loaded" and f.get("weights_gib") is not None:
        return f"{f['weights_gib']:.2f} GiB weights/GPU, {f.get('avail_gib') or 0:.2f} GiB left"
    if phase == "weights loading" and f.get("avail_gib") is not None:
        return f"{f['avail_gib']:.2f} GiB free"
    if phase == "kv cache" and f.get("tokens") is not None:
        size = (f.get("k_gib") or 0) + (f.get("v_gib") or 0) or (f.get("kv_gib") or 0)
        return f"{f['tokens']:,} tokens, {size:.2f} GiB"
    if phase == "mamba cache" and f.get("max_mamba_cache_size") is not None:
        return f"{f['max_mamba_cache_size']} slots, {(f.get('conv_gib') or 0) + (f.get('ssm_gib') or 0):.2f} GiB"
    if phase == "cuda graphs done" and f.get("seconds") is not None:
        return f"{f['seconds']:.1f} s" + (f", {f['graph_gib']:.2f} GiB" if f.get("graph_gib") else "")
    if phase == "capacity" and f.get("max_total_num_tokens") is not None:
        ctx = f.get("context_len") or 0
        return f"{f['max_total_num_tokens']:,} tokens, {f.get('max_running_requests')} running, ctx {ctx:,}"
    return ""


def _stamp_s(ts: str | None, today: str, now: float) -> float | None:
    """A stamp as epoch seconds, read as this machine's local time (the offset to the host's clock
    is learnt separately: `LogTracker._offset_s`)."""
    if not ts:
        return None
    dateless = len(ts) <= 12
    if dateless:  # "15:04:05": the date of the batch's arrival
        ts = f"{today} {ts}"
    try:
        at = datetime.fromisoformat(ts).timestamp()
    except ValueError:
        return None
    return at - 86400.0 if dateless and at - now > 12 * 3600 else at  # yesterday's, read after midnight


class LogTracker:
    # The summary carries only the recent throughput points (the state's benchmark view keeps the
    # history): every log reading is recorded, and 600 points in each made 93 % of a recording.
    # A batch that brought more (the backlog read at connect) carries all of its own once.
    def __init__(self, source: str, series_len: int = 32) -> None:
        self.source = source
        self.boot: list[BootStep] = []
        self._ranks_seen: set[tuple[str, str]] = set()  # (phase, ranks) lines of this boot
        self._launch: float | None = None  # the launch line's time (`line_time`)
        self.phase: str | None = None
        self.last_prefill: dict[str, Any] | None = None
        self.last_decode: DecodeStats | None = None
        self.capacity: dict[str, Any] | None = None
        self.kv_cache: dict[str, Any] | None = None
        self.mamba_cache: dict[str, Any] | None = None
        self.weights: dict[str, Any] | None = None
        self.errors: deque[LogError] = deque(maxlen=MAX_ERRORS)
        self._traceback: list[str] | None = None
        self._traceback_head: LogEvent | None = None
        self.series_len = series_len
        self.series: deque[ThroughputPoint] = deque(maxlen=max(series_len, SERIES_KEPT))
        self._series_added = 0  # points the last batch added
        # Our clock minus the log stamps' (a whole time zone), once a live line told it; until then
        # stamped points wait here (a backlog whose server went quiet: its lines' age is unknown)
        self._offset_s: float | None = None
        self._candidate: tuple[float, float, float] | None = None  # another zone, once: (offset, now, newest)
        self._pending: deque[tuple[float, DecodeStats]] = deque(maxlen=SERIES_KEPT)
        self._boots = 0  # new boots seen (each resets what describes the server)
        self.lines_seen = 0
        self.unparsed_lines = 0
        self.last_line_at_s: float | None = None
        # Called (on the loop) after each live batch: the server source polls a quiet host less and
        # is woken by the log moving again (console/host/sources/server.py).
        self.on_lines: list[Callable[[], None]] = []

    def _close_traceback(self) -> None:
        if self._traceback_head is not None and self._traceback is not None:
            last = next((ln for ln in reversed(self._traceback) if ln.strip()), self._traceback_head.text)
            self.errors.append(LogError(self._traceback_head.ts, "exception", last.strip()[:300],
                                        tuple(self._traceback[:MAX_TRACEBACK_LINES]), line_time(self._traceback_head)))
        self._traceback = None
        self._traceback_head = None

    def feed(self, events: list[LogEvent], now_s: float | None = None, *, live: bool = True) -> None:
        """`live`: lines the log is writing now (False: a stream's backlog, old lines read at its start)."""
        now = time.time() if now_s is None else now_s
        if not events:
            return
        self.lines_seen += len(events)
        self.unparsed_lines += sum(1 for e in events if e.kind == "line" and "unparsed" in e.fields)
        self.last_line_at_s = now
        if live:  # the log moving now (not a stream's backlog of old lines)
            for listener in self.on_lines:
                listener()
        last_decode: LogEvent | None = None
        last_prefill: LogEvent | None = None  # only the batch's last one is kept: only it is parsed
        # the first decode line of each second of the log's time: one point each (a flood's batch
        # spans a second or two: a line or two parsed, as before)
        per_second: dict[str | None, LogEvent] = {}
        for e in events:
            if self._traceback is not None:
                if e.ts is None and e.kind in ("line", "error", "warning"):
                    if len(self._traceback) < MAX_TRACEBACK_LINES:
                        self._traceback.append(e.text)
                    continue
                self._close_traceback()
            kind = e.kind
            if kind == "decode":
                last_decode = e
                per_second.setdefault(e.ts[:19] if e.ts else None, e)
            elif kind == "prefill":
                last_prefill = e
            elif kind == "boot":
                boots = self._boots
                self._boot(e)
                if self._boots != boots:  # a new server: the old one's lines of this batch are not its points
                    per_second.clear()
                    last_decode = last_prefill = None
            elif kind == "traceback":
                self._traceback_head = e
                self._traceback = [e.text]
            elif e.severity in ("error", "warning"):
                self.errors.append(LogError(e.ts, str(e.fields.get("kind", e.severity)), e.text[:300], (),
                                            line_time(e)))
        if last_prefill is not None:  # (a flood's every prefill line was parsed here, on the UI loop)
            self.last_prefill = {"at": last_prefill.ts, **batch_fields(last_prefill)}
        self._series_added = 0
        if last_decode is not None:
            self.last_decode = DecodeStats.from_fields(last_decode.ts, batch_fields(last_decode))
            self._add_points(list(per_second.values()), self.last_decode, now)

    def _add_points(self, decodes: list[LogEvent], last: DecodeStats, now: float) -> None:
        """One point per second of the log's time, at that second (the first decode line of it): the
        same series whichever batches the lines came in (live, or a backlog read late)."""
        today = datetime.fromtimestamp(now).date().isoformat()
        stamped = [(_stamp_s(e.ts[:19] if e.ts else None, today, now),
                    DecodeStats.from_fields(e.ts, batch_fields(e))) for e in decodes]
        newest = next((t for t, _ in reversed(stamped) if t is not None), None)
        if newest is not None and now - newest < -(ZONES_S + LIVE_LAG_S):
            # Stamps ahead of our clock by more than any time zone: the log's clock is not the
            # host's real time (a clock reset, a replayed file): its arrival is all we know
            self._append(now, last)
            return
        if newest is not None:
            self._calibrate(now, newest)
        if self._offset_s is not None and self._pending:
            waiting, self._pending = list(self._pending), deque(maxlen=SERIES_KEPT)
            for t, d in waiting:
                self._append(t + self._offset_s, d)
        for t, d in stamped:
            if t is None:
                self._append(now, d)  # no stamp: its arrival is all we know
            elif self._offset_s is None:
                self._pending.append((t, d))
            else:
                self._append(t + self._offset_s, d)

    def _calibrate(self, now: float, newest: float) -> None:
        """Learn the zone from a batch whose newest line was written just now. Our own zone needs one
        such batch (its newest line is under a minute old); another zone two, at least 5 s apart, whose
        newest stamps advanced with our clock: a quiet server's backlog, as old as a zone is wide by
        chance, never passes for live lines."""
        c = now - newest
        k = round(c / TZ_QUANTUM_S)
        if abs(c - k * TZ_QUANTUM_S) > LIVE_LAG_S or abs(k * TZ_QUANTUM_S) > 2 * ZONES_S:
            return
        offset = k * TZ_QUANTUM_S
        if k == 0 or offset == self._offset_s:
            self._offset_s, self._candidate = offset, None
            return
        seen = self._candidate
        if seen is not None and seen[0] == offset and now - seen[1] >= 5.0 \
                and newest - seen[2] >= 0.5 * (now - seen[1]):
            self._offset_s, self._candidate = offset, None
        elif seen is None or seen[0] != offset:
            self._candidate = (offset, now, newest)

    def _append(self, t_s: float, d: DecodeStats) -> None:
        if self.series and t_s <= self.series[-1].t_s:
            return  # that second is drawn already (by its first line), or older: kept as it is
        self.series.append(ThroughputPoint(t_s, d.gen_tokens_per_s, d.accept_len, d.running_reqs, d.queue_reqs))
        self._series_added += 1

    @property
    def traceback_pending(self) -> bool:
        """A traceback's header was read and its lines may still come."""
        return self._traceback is not None

    def flush(self) -> None:
        """End a pending traceback (its stream went quiet)."""
        if self._traceback is not None:
            self._close_traceback()

    def _boot(self, e: LogEvent) -> None:
        phase = e.phase or "?"
        # A launch line, or a phase earlier than where we are, is a new boot (a restart), except
        # another rank's line of a phase this boot already has (TP1's "weights loaded" after TP0
        # is past it; ranks interleave): that is the same boot, never a step back (issue 20).
        repeat_of_another_rank = any(s.phase == phase for s in self.boot) and (phase, e.ranks) not in self._ranks_seen
        going_back = (not repeat_of_another_rank and phase in BOOT_PHASES and self.phase in BOOT_PHASES
                      and BOOT_PHASES.index(phase) < BOOT_PHASES.index(self.phase))
        if phase == "launch" or going_back:
            # A new server: the last one's batch statistics, throughput and pool sizes no longer
            # describe it. Its series starts empty (the state's benchmark view keeps the history,
            # with the gap where no server existed); every reader of the summary (the status line,
            # the fleet row) then says what this boot did, and no view needs to know (issue 20).
            self.boot, self._launch = [], None
            self._boots += 1
            self._ranks_seen = set()
            self.last_decode = self.last_prefill = None
            self.series.clear()
            self._pending.clear()
            self._series_added = 0
            self.capacity = self.kv_cache = self.mamba_cache = self.weights = None
        self._ranks_seen.add((phase, e.ranks))
        # Rank lines repeat each step (TP0..TPn): keep the first of each phase per boot.
        if any(s.phase == phase for s in self.boot):
            return
        at = line_time(e)
        if self._launch is None and at is not None:
            self._launch = at
        seconds = at - self._launch if at is not None and self._launch is not None else None
        self.boot.append(BootStep(phase, e.ts, seconds, _detail(phase, e.fields), at))
        self.phase = phase
        if phase == "capacity":
            self.capacity = dict(e.fields)
        elif phase == "kv cache":
            self.kv_cache = dict(e.fields)
        elif phase == "mamba cache":
            self.mamba_cache = dict(e.fields)
        elif phase == "weights loaded":
            self.weights = dict(e.fields)

    def summary(self) -> LogSummary:
        return LogSummary(
            self.source, self.phase, tuple(self.boot), self.last_prefill, self.last_decode, self.capacity,
            self.kv_cache, self.mamba_cache, self.weights, tuple(self.errors), self.lines_seen,
            self.last_line_at_s, tuple(self.series)[-max(self.series_len, self._series_added):],
            self.unparsed_lines,
        )
