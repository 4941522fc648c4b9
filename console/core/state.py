"""One state per host, outside Textual: every view (the TUI, an attached client, a recording, a
report, `snapshot --json`) reads it; workers change it only by `apply`ing events.

The state is a reducer over events: applying the same events in the same order gives the same
state, which is what makes a recording replayable and a remote view a mirror. Events are plain
frozen dataclasses that the codec (`console.core.codec`) turns into JSON and back.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from console.analysis.bench_view import BenchData, BenchView, is_result
from console.model import GpuDevice, GpuStatus, Reading
from console.parsers.sglang_log import LogEvent
from console.transport.base import ConnectionState

log = logging.getLogger("gpuconsole.state")

LOG_LINES = 5000
GPU_HISTORY = 300  # 5 min at 1 Hz: a maximized pane at 200 columns fills its history (issue 22 item 19)
NOTICES = 50


# -- events ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class HostInfo:
    """What the host was opened with: its label, the log's label, and the panes that have no
    source (with what to pass to give them one). The first event of every session."""

    host: str
    label: str
    demo: bool = False
    log_label: str | None = None
    missing: tuple[tuple[str, str], ...] = ()  # (pane key, what is missing from the profile)
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class ReadingChanged:
    """A source's latest Reading (`source`: host, gpu, download, service, server, log)."""

    host: str
    source: str
    reading: Reading[Any]


@dataclass(frozen=True, slots=True)
class LogAppended:
    """Parsed (and already redacted) log lines, in order; never dropped."""

    host: str
    events: tuple[LogEvent, ...]


@dataclass(frozen=True, slots=True)
class ConnectionChanged:
    host: str
    state: ConnectionState


@dataclass(frozen=True, slots=True)
class Notice:
    """Something worth a toast: "log stream ended; reconnecting", "benchmark failed: …"."""

    host: str
    title: str
    message: str
    severity: str = "information"  # information, warning, error
    at_s: float = 0.0


@dataclass(frozen=True, slots=True)
class VerifyChanged:
    host: str
    progress: Any  # console.sources.download.VerifyProgress


@dataclass(frozen=True, slots=True)
class BenchChanged:
    """The benchmark: `start` (label, total), `progress` (a Progress), `result` (metrics and the
    saved record), `done` (error or None), `history` (saved runs, for the comparison)."""

    host: str
    kind: str
    label: str | None = None
    total: int | None = None
    progress: Any = None
    record: dict[str, Any] | None = None
    error: str | None = None
    runs: tuple[dict[str, Any], ...] = ()


# -- pairing (issue 12): who is attached to a shared core, who drives, the shared note ----------
@dataclass(frozen=True, slots=True)
class Client:
    """One person attached to a shared core (`gpuconsole serve`, or `--share`). `role`: driver or
    observer; `view`: the pane they have maximized (what follow mode mirrors), None for the grid."""

    id: int
    name: str
    role: str = "observer"
    via: str = "unix"  # unix, tcp, local (the console that serves)
    view: str | None = None
    # Who this is, as the core tells people apart (`uid 1000`, `invite bob`): two clients with
    # the same `person` are one person (the two-person rule; issue 35, item 2).
    person: str = ""


@dataclass(frozen=True, slots=True)
class Presence:
    """Everyone attached, in arrival order, and who asked to drive (client ids). Applied by the
    core's share server whenever someone arrives, leaves, hands over, asks or changes view.
    `state.presence` / `state.driver` read it (issue 13's approvals gate on the driver)."""

    host: str
    clients: tuple[Client, ...] = ()
    asking: tuple[int, ...] = ()


def same_person(presence: Presence | None, name: str, client_id: int | None) -> bool:
    """Whether the person who goes by `name` is the client `client_id` (by identity, as the core
    tells people apart: two connections of one uid are one person; issue 35, item 2)."""
    clients = presence.clients if presence is not None else ()
    me = next((c for c in clients if c.id == client_id), None)
    if me is None or not me.person:
        return me is not None and me.name == name
    return me.name == name or any(c.name == name and c.person == me.person for c in clients)


def who_can_approve(presence: Presence | None, requester: str) -> str:
    """One line for the two-person rule: who attached can approve `requester`'s request and who
    cannot (the same person on another connection), or that nobody can and what to do."""
    clients = presence.clients if presence is not None else ()
    theirs = {c.person for c in clients if c.name == requester and c.person}
    can = sorted({c.name for c in clients if c.name != requester and not (c.person and c.person in theirs)})
    cannot = sorted({c.name for c in clients if c.name != requester and c.person and c.person in theirs})
    said = f"{', '.join(can)} can approve" if can else "nobody attached can approve"
    if cannot:
        said += f"; {', '.join(cannot)} cannot ({requester} on another connection: the same person)"
    if not can:
        said += ("; a second person must attach: share with --share --invite NAME (or serve --invite NAME) "
                 "and hand NAME the invite's file")
    return said


@dataclass(frozen=True, slots=True)
class NoteChanged:
    """The shared note line ("waiting for the 122B to finish CUDA graphs"); anyone may set it."""

    host: str
    text: str
    by: str = ""
    at_s: float = 0.0



# -- the swap's events (issue 13): defined with the swap's data in console/swap/model.py -----------
from console.swap.downtime_model import PathEvent  # noqa: E402
from console.swap.model import (  # noqa: E402
    SWAP_EVENTS,
    ApprovalChanged,
    AuditAppended,
    DowntimeChanged,
    GateChanged,
    SwapData,
    SwapSetup,
    SwapStepChanged,
    SwapView,
)


@dataclass(frozen=True, slots=True)
class StateSnapshot:
    """The whole state at `at_s` (issue 20): applying it to any HostState makes that state equal
    to the one it was taken from. Attach sends it first; a recording writes it first, at every
    rotation and every few minutes, and replay seeks to the one before the asked time."""

    host: str
    at_s: float
    info: HostInfo
    readings: tuple[tuple[str, Reading[Any]], ...] = ()  # (source, its reading as the state holds it)
    connection: ConnectionState | None = None
    log_lines: tuple[LogEvent, ...] = ()
    log_lines_total: int = 0
    notices: tuple[Notice, ...] = ()
    verify: Any = None  # console.sources.download.VerifyProgress
    bench: BenchData = field(default_factory=BenchData)
    swap: SwapData = field(default_factory=SwapData)
    presence: Presence | None = None
    note: NoteChanged | None = None


@dataclass(frozen=True, slots=True)
class Verification:
    """THE verification state (issue 20): what the Download pane, the swap plan's Verify step, the
    gate's sha256 check and the report all read (`state.verification`), whoever started it (`v` in
    the Download pane, the plan's step, an attached driver). `state`: "not run", "running",
    "passed", "failed" (a file's sha256 differs) or "error" (the check could not finish)."""

    state: str
    matched: int = 0
    total: int = 0
    mismatched: tuple[str, ...] = ()
    error: str | None = None

    @property
    def summary(self) -> str:
        if self.state == "not run":
            return "not run"
        text = f"{self.matched}/{self.total} match"
        if self.mismatched:
            text += f", {len(self.mismatched)} differ"
        if self.state == "running":
            text += " (running)"
        if self.error:
            text += f": {self.error}"
        return text


@dataclass(frozen=True, slots=True)
class ReplayInfo:
    """Where a replay stands, for the header (not an event: the replayer sets it on its state).
    `start_s`: the recording's first time (its clock); `end_s`: its length in seconds."""

    start_s: float
    end_s: float
    speed: float
    finished: bool = False
    path: str = ""

    def position_s(self, now_s: float) -> float:
        """Seconds into the recording at the state's `now()`."""
        return min(self.end_s, max(0.0, now_s - self.start_s))

    def describe(self, now_s: float) -> str:
        """The header's words: "REPLAY 1m20s / 3m40s ×2", "REPLAY end 3m40s"."""
        from console.units import duration

        speed = f" ×{self.speed:g}" if self.speed != 1 else ""
        if self.finished:
            return f"REPLAY ended at {duration(self.end_s)}"
        return f"REPLAY {duration(self.position_s(now_s))} / {duration(self.end_s)}{speed}"


Event = (HostInfo | ReadingChanged | LogAppended | ConnectionChanged | Notice | VerifyChanged | BenchChanged
         | Presence | NoteChanged
         | SwapStepChanged | GateChanged | DowntimeChanged | ApprovalChanged | AuditAppended | SwapSetup
         | StateSnapshot | PathEvent)  # PathEvent: issue 24


# -- GPUs keyed by GPU -----------------------------------------------------------------------
@dataclass
class _GpuTrack:
    last: GpuDevice
    memory: deque[float] = field(default_factory=lambda: deque(maxlen=GPU_HISTORY))
    util: deque[float] = field(default_factory=lambda: deque(maxlen=GPU_HISTORY))
    lost_at_s: float | None = None


class GpuTracker:
    """History per GPU (its UUID, else its index), and GPUs that dropped out of a sample kept as
    lost with their last values: a GPU fallen off the bus must not vanish, nor lend its history
    to its neighbour."""

    def __init__(self) -> None:
        self._tracks: dict[str, _GpuTrack] = {}

    def track(self, reading: Reading[GpuStatus]) -> Reading[GpuStatus]:
        status = reading.data
        if status is None:
            return reading
        if reading.error is not None and reading.error_at_s is not None and (
                reading.ok_at_s is None or reading.error_at_s >= reading.ok_at_s) and self._tracks:
            # A failed sample says nothing about which GPUs are there: keep what we had.
            return replace(reading, data=self._status(status))
        seen_at = status.sampled_at_s or reading.ok_at_s or time.time()
        present = set()
        for gpu in status.gpus:
            track = self._tracks.get(gpu.key)
            if track is None:
                track = self._tracks[gpu.key] = _GpuTrack(gpu)
            track.last, track.lost_at_s = gpu, None
            track.memory.append(gpu.memory_fraction if gpu.memory_fraction is not None else 0.0)
            track.util.append(float(gpu.utilization_pct or 0))
            present.add(gpu.key)
        for key, track in self._tracks.items():
            if key not in present and track.lost_at_s is None:
                track.lost_at_s = seen_at
        return replace(reading, data=self._status(status))

    def seed(self, status: GpuStatus) -> None:
        """Take over another tracker's history (an attached console's mirror, from the core's
        snapshot), all but the newest point, which `track` then adds as usual. Issue 12."""
        if self._tracks:
            return
        # strict=False: a raw sample (no history yet) seeds nothing
        for gpu, memory, util in zip(status.gpus, status.memory_history, status.util_history, strict=False):
            track = self._tracks[gpu.key] = _GpuTrack(gpu, lost_at_s=gpu.lost_at_s)
            track.memory.extend(memory[:-1])
            track.util.extend(util[:-1])

    def restore(self, status: GpuStatus | None) -> None:
        """Become the tracker whose output `status` is (a snapshot's GPU reading): every point of
        history, lost GPUs kept as lost."""
        self._tracks = {}
        if status is None:
            return
        for i, gpu in enumerate(status.gpus):
            track = self._tracks[gpu.key] = _GpuTrack(gpu, lost_at_s=gpu.lost_at_s)
            if i < len(status.memory_history):
                track.memory.extend(status.memory_history[i])
            if i < len(status.util_history):
                track.util.extend(status.util_history[i])

    def _status(self, status: GpuStatus) -> GpuStatus:
        tracks = sorted(self._tracks.values(), key=lambda t: (t.last.index, t.last.key))
        gpus = tuple(t.last if t.lost_at_s is None else replace(t.last, lost_at_s=t.lost_at_s, processes=())
                     for t in tracks)
        lost = [g for g in gpus if g.lost_at_s is not None]
        problems = status.problems + tuple(
            f"GPU {g.index} ({g.uuid or 'no uuid'}) is missing from the samples: lost" for g in lost)
        return replace(status, gpus=gpus, problems=problems,
                       memory_history=tuple(tuple(t.memory) for t in tracks),
                       util_history=tuple(tuple(t.util) for t in tracks))


# -- the state -------------------------------------------------------------------------------
class HostState:
    """Everything known about one host. `apply(event)` is the only way in; `subscribe` tells
    any number of views what changed. Never imports Textual."""

    def __init__(self, host: str, *, label: str | None = None, demo: bool = False,
                 clock: Callable[[], float] = time.time) -> None:
        self.host = host
        self.label = label or host
        self.demo = demo
        self.clock = clock
        self.info = HostInfo(host, label or host, demo)
        self.readings: dict[str, Reading[Any]] = {}
        self.log_lines: deque[LogEvent] = deque(maxlen=LOG_LINES)
        self.log_lines_total = 0
        self.connection: ConnectionState | None = None
        self.notices: deque[Notice] = deque(maxlen=NOTICES)
        self.verify: Any = None
        self.bench = BenchView()
        self.bench.clock = self.now  # the chart's "now" is the state's (a replay's clock)
        self.swap = SwapView()  # the swap plan, gate, approvals, audit log and downtime (issue 13)
        self.gpus = GpuTracker()
        self.version = 0
        self.subscriber_errors = 0
        self._subscribers: list[Callable[[Event], None]] = []
        self.presence = Presence(host)
        self.note: NoteChanged | None = None
        self.replay: ReplayInfo | None = None  # set by a replayer: the header says REPLAY with it

    def now(self) -> float:
        """The state's "now": the wall clock live, the recording's clock in a replay. Every age,
        staleness and "since" is measured against it."""
        return self.clock()

    # -- the whole state as data (issue 20) --------------------------------------------------
    def snapshot(self) -> StateSnapshot:
        return StateSnapshot(
            self.host, self.now(), self.info, tuple(self.readings.items()), self.connection,
            tuple(self.log_lines), self.log_lines_total, tuple(self.notices), self.verify,
            self.bench.to_data(), self.swap.to_data(), self.presence, self.note)

    @classmethod
    def from_snapshot(cls, snap: StateSnapshot, *, clock: Callable[[], float] = time.time) -> HostState:
        state = cls(snap.host, label=snap.info.label, demo=snap.info.demo, clock=clock)
        state.restore(snap)
        return state

    def restore(self, snap: StateSnapshot) -> None:
        """Become the state `snap` was taken from (without telling subscribers: `apply` does)."""
        self.info = snap.info
        self.label, self.demo = snap.info.label, snap.info.demo
        self.readings = dict(snap.readings)
        gpu = self.readings.get("gpu")
        self.gpus.restore(gpu.data if gpu is not None else None)
        self.connection = snap.connection
        self.log_lines = deque(snap.log_lines, maxlen=LOG_LINES)
        self.log_lines_total = snap.log_lines_total
        self.notices = deque(snap.notices, maxlen=NOTICES)
        self.verify = snap.verify
        self.bench.restore(snap.bench)
        self.swap.restore(snap.swap)
        self.presence = snap.presence if snap.presence is not None else Presence(self.host)
        self.note = snap.note

    def reading(self, source: str) -> Reading[Any] | None:
        return self.readings.get(source)

    def data(self, source: str) -> Any:
        reading = self.readings.get(source)
        return reading.data if reading is not None else None

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    @property
    def driver(self) -> Client | None:
        """Who drives the shared session (None: not shared, or nobody attached)."""
        return next((c for c in self.presence.clients if c.role == "driver"), None)

    @property
    def verification(self) -> Verification:
        """The one verification state, from the last VerifyChanged (see `Verification`)."""
        v = self.verify
        if v is None:
            return Verification("not run")
        mismatched = tuple(getattr(v, "mismatched", ()) or ())
        error = getattr(v, "error", None)
        total, matched = int(getattr(v, "total_files", 0) or 0), int(getattr(v, "matched", 0) or 0)
        if not getattr(v, "finished", False):
            state = "running" if error is None else "error"
        elif mismatched:
            state = "failed"
        elif error is not None or matched < total:
            state = "error"
        else:
            state = "passed"
        return Verification(state, matched, total, mismatched, error)

    def missing(self, pane: str) -> str | None:
        return dict(self.info.missing).get(pane)

    def apply(self, event: Event) -> None:
        if isinstance(event, HostInfo):
            self.info = event
            self.label, self.demo = event.label, event.demo
            self.bench.host = event.label  # the before/after pair is of this host's runs only
        elif isinstance(event, ReadingChanged):
            self._reading(event)
        elif isinstance(event, LogAppended):
            self.log_lines.extend(event.events)
            self.log_lines_total += len(event.events)
        elif isinstance(event, ConnectionChanged):
            self.connection = event.state
        elif isinstance(event, Notice):
            self.notices.append(event)
        elif isinstance(event, VerifyChanged):
            self.verify = event.progress
        elif isinstance(event, BenchChanged):
            self._bench(event)
        elif isinstance(event, Presence):
            self.presence = event
        elif isinstance(event, NoteChanged):
            self.note = event if event.text else None
        elif isinstance(event, SWAP_EVENTS):
            self.swap.apply(event)
        elif isinstance(event, StateSnapshot):
            self.restore(event)
        else:
            raise TypeError(f"not a state event: {type(event).__name__}")
        self.version += 1
        for callback in list(self._subscribers):
            try:
                callback(event)
            except Exception:  # one broken view must not stop the others; it is counted and logged
                self.subscriber_errors += 1
                log.exception("a view failed on %s", type(event).__name__)

    def _reading(self, event: ReadingChanged) -> None:
        reading = event.reading
        if event.source == "gpu":
            reading = self.gpus.track(reading)
            data = reading.data
            if data is not None and reading.error is None:
                utils = [g.utilization_pct for g in data.gpus if g.utilization_pct is not None and g.lost_at_s is None]
                if utils:
                    self.bench.add_gpu(data.sampled_at_s or reading.ok_at_s or self.now(), sum(utils) / len(utils))
        elif event.source == "log" and reading.data is not None:
            if reading.data.series:
                # every point the reading brings (a backlog's too); the ones drawn already are skipped
                self.bench.add_server_points([(p.t_s, p.gen_tokens_per_s, p.accept_len)
                                              for p in reading.data.series])
            # The swap on the time chart: a new boot launching, and its ready line.
            self.bench.note_log(reading.data, reading.ok_at_s or self.now())
        elif event.source == "service" and reading.data is not None and reading.error is None:
            self._unit_marks(reading)
        self.readings[event.source] = reading

    def _unit_marks(self, reading: Reading[Any]) -> None:
        """Swap marks from a NAMED unit's transitions (issue 20): which side a view shows as "old"
        (the diff pane's `s`) changes the reading's sides, never a unit's state, so it marks nothing.
        The old unit stopping opens a gap in the server's series; the new one's ready closes it."""
        before = self.data("service")
        was = {side.name: side.active_state for side in (before.old, before.new) if side is not None} \
            if before is not None else {}
        setup = self.swap.setup
        old_unit = setup.old_unit if setup is not None else None
        t = reading.ok_at_s or self.now()
        for side in (reading.data.old, reading.data.new):
            if side is None or was.get(side.name) != "active" or side.active_state in ("active", None):
                continue
            named_old = side.name == old_unit or (old_unit is None and before is not None and before.old is not None
                                                  and before.old.name == side.name)
            self.bench.mark(t, "old server stopped" if named_old else f"{side.name} stopped")
            self.bench.open_gap(t)

    def _bench(self, event: BenchChanged) -> None:
        view = self.bench
        if event.kind == "history":
            view.history = list(event.runs)
            view._touch()
        elif event.kind == "start":
            if event.total is not None and event.label is not None:
                if view.live is None:
                    view.results = []
                view.start(event.label, event.total)
        elif event.kind == "progress" and event.progress is not None:
            view.progress(event.progress)
        elif event.kind == "result" and event.record is not None:
            if is_result(event.record):  # a run with no finished request is no result (issue 20)
                view.history.append(event.record)
            view.finish(event.record)
        elif event.kind == "done":
            view.end(event.error)
