"""One state per host, outside Textual: every view (the TUI, an attached client, a recording, a
report, `snapshot --json`) reads it; workers change it only by `apply`ing events.

The state is a reducer over events: applying the same events in the same order gives the same
state, which is what makes a recording replayable and a remote view a mirror. The events are
declared once, in `console.core.events` (the codec turns them into JSON and back); the stores
derived from them (GPU history, the bench view, the swap view, the swap's observer) are the
ordered steps of `apply` (`console.core.derive`).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from console.domain.analysis.bench_view import BenchView
from console.core.derive import GPU_HISTORY, BenchStep, GpuTracker, Observe, Step, Store, SwapStore
from console.core.events import (
    EVENTS,
    SWAP_EVENTS,
    ApprovalChanged,
    AuditAppended,
    BenchChanged,
    Client,
    ConnectionChanged,
    DowntimeChanged,
    Event,
    GateChanged,
    HostInfo,
    LogAppended,
    NoteChanged,
    Notice,
    PathEvent,
    Presence,
    ReadingChanged,
    StateSnapshot,
    SwapData,
    SwapSetup,
    SwapStepChanged,
    VerifyChanged,
)
from console.model import Reading
from console.host.parsers.sglang_log import LogEvent
from console.core.derive.swap_view import SwapView
from console.host.transport.base import ConnectionState
from console.units import duration

log = logging.getLogger("gpuconsole.state")

LOG_LINES = 5000
NOTICES = 50


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
        speed = f" ×{self.speed:g}" if self.speed != 1 else ""
        if self.finished:
            return f"REPLAY ended at {duration(self.end_s)}"
        return f"REPLAY {duration(self.position_s(now_s))} / {duration(self.end_s)}{speed}"


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
        self.derive_errors = 0
        self._subscribers: list[Callable[[Event], None]] = []
        self.presence = Presence(host)
        self.note: NoteChanged | None = None
        self.replay: ReplayInfo | None = None  # set by a replayer: the header says REPLAY with it
        # The steps of apply, in order: the GPU tracker hands on the reading with its history; the
        # bench view reads a unit's transition against the reading before; then the state's own
        # stores; then the swap view. The observer (off unless this state is the host's writer)
        # runs after the views were told, and applies what it derives.
        self.steps: tuple[Step, ...] = (self.gpus, BenchStep(self.bench), Store(), SwapStore(self.swap))
        self.observer: Observe | None = None
        self._route: dict[type[Any], tuple[Step, ...]] = {
            spec.type: tuple(step for step in self.steps if spec.type in step.takes) for spec in EVENTS}

    def observe_host(self, *, wake: Callable[[str], None] | None = None) -> Observe:
        """Make this state the host's writer's: the swap is derived from the host's facts as the
        events arrive (console/core/derive/swap_observer.py). A mirror (attach, replay) never calls it: it
        receives what the writer's observer wrote. `wake` asks a source for a fresh reading."""
        if self.observer is None:
            self.observer = Observe(self, wake)
        return self.observer

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
        for step in self.steps:
            step.restore(self, snap)

    def restore_own(self, snap: StateSnapshot) -> None:
        """The state's own stores (the `Store` step's part of `restore`)."""
        self.info = snap.info
        self.label, self.demo = snap.info.label, snap.info.demo
        self.readings = dict(snap.readings)
        self.connection = snap.connection
        self.log_lines = deque(snap.log_lines, maxlen=LOG_LINES)
        self.log_lines_total = snap.log_lines_total
        self.notices = deque(snap.notices, maxlen=NOTICES)
        self.verify = snap.verify
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

    def sizes(self) -> dict[str, int]:
        """How many items each collection of the state holds (the soak: nothing may grow without
        bound): the state's own, its bench's, swap's and GPU tracker's, by attribute name; a
        mapping of collections also gives the sum of their lengths (`name[*]`)."""
        out: dict[str, int] = {}
        for prefix, owner in (("", self), ("bench.", self.bench), ("swap.", self.swap), ("gpus.", self.gpus)):
            for name, value in vars(owner).items():
                if name.startswith("_") or not isinstance(value, (list, tuple, dict, deque, set, frozenset)):
                    continue
                out[prefix + name] = len(value)
                if isinstance(value, dict):
                    inner = [v for v in value.values() if isinstance(v, (list, tuple, dict, deque, set))]
                    if inner:
                        out[f"{prefix}{name}[*]"] = sum(len(v) for v in inner)
        return out

    def missing(self, pane: str) -> str | None:
        return dict(self.info.missing).get(pane)

    def apply(self, event: Event) -> None:
        if isinstance(event, StateSnapshot):
            self.restore(event)
        else:
            steps = self._route.get(type(event))
            if steps is None:
                raise TypeError(f"not a state event: {type(event).__name__}")
            handed = event
            for step in steps:
                handed = step.apply(self, handed)
        self.version += 1
        for callback in list(self._subscribers):
            try:
                callback(event)
            except Exception:  # one broken view must not stop the others; it is counted and logged
                self.subscriber_errors += 1
                log.exception("a view failed on %s", type(event).__name__)
        if self.observer is not None:
            # What the event implies for the swap, applied after it (a recording keeps the order),
            # each checked again at its turn: a step the console took over meanwhile is the console's.
            try:
                derived = self.observer.derive(event)
            except Exception:  # the host's facts keep coming in: a failed derivation is counted and logged
                self.derive_errors += 1
                log.exception("the swap's observer failed on %s", type(event).__name__)
                derived = []
            for follow in derived:
                if self.observer.still_valid(follow):
                    self.apply(follow)



__all__ = [
    "HostState", "Verification", "ReplayInfo", "same_person", "who_can_approve", "LOG_LINES", "NOTICES",
    "GPU_HISTORY", "GpuTracker",
    # the events, declared in console.core.events (named here for the modules that import them from the state)
    "Event", "HostInfo", "ReadingChanged", "LogAppended", "ConnectionChanged", "Notice", "VerifyChanged",
    "BenchChanged", "Client", "Presence", "NoteChanged", "StateSnapshot", "SwapStepChanged", "GateChanged",
    "DowntimeChanged", "ApprovalChanged", "AuditAppended", "SwapSetup", "PathEvent", "SwapData", "SWAP_EVENTS",
]
