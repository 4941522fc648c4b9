"""Every event of the state, declared once: its fields, its tag on the wire, and what it changes.

The state (`console.core.state.HostState.apply`) is a reducer over these events; the codec
(`console.core.codec`) moves them as JSON for `snapshot --json`, the recordings and the share
protocol; the host screen marks what each one changed. All three read the table this module
builds (`EVENTS`), so adding an event is one declaration here (and its meaning in the store that
takes it). The tags are the wire format of every recording ever written: never change one.

Events and the data they carry are plain frozen dataclasses (msgspec encodes them as they are).
No Textual, no I/O, nothing from `console.domain.swap`: the swap's engine imports these, never the reverse.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from console.domain.analysis.bench_view import BenchData
from console.host.parsers.sglang_log import LogEvent
from console.host.transport.base import ConnectionState
from console.model import Reading

# What an event changes, as the host screen's dirty keys and the pane registry's `sources` name it.
HEADER = "header"  # the header: connection, host summary, presence, note
SWAP = "swap"
BY_SOURCE = "<source>"  # a reading: the source it is of (gpu, download, service, server, log, host)
EVERYTHING = "<everything>"  # the whole state replaced (a snapshot: attach, a replay's seek)
TOAST = "<notice>"  # said at once, not drawn into a pane


@dataclass(frozen=True, slots=True)
class EventSpec:
    """One event type: `tag` on the wire (recordings, share protocol), `changes` what it changes."""

    tag: str
    type: type[Any]
    changes: str


_SPECS: dict[str, EventSpec] = {}
_E = TypeVar("_E")


def event(tag: str, *, changes: str) -> Callable[[type[_E]], type[_E]]:
    """Declare an event type: its wire tag and what it changes (see EventSpec)."""

    def declare(cls: type[_E]) -> type[_E]:
        if tag in _SPECS:
            raise ValueError(f"event tag {tag!r} declared twice ({_SPECS[tag].type.__name__}, {cls.__name__})")
        _SPECS[tag] = EventSpec(tag, cls, changes)
        return cls

    return declare


# -- the host ------------------------------------------------------------------------------------
@event("host", changes=HEADER)
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
    # The demo's simulated host keeps its files under this directory of this machine (HostProfile.
    # host_root): words name a path as the host names it (console/domain/paths.py's host_named). None: a real host.
    host_root: str | None = None


@event("reading", changes=BY_SOURCE)
@dataclass(frozen=True, slots=True)
class ReadingChanged:
    """A source's latest Reading (`source`: host, gpu, download, service, server, log)."""

    host: str
    source: str
    reading: Reading[Any]


@event("log", changes="log_lines")
@dataclass(frozen=True, slots=True)
class LogAppended:
    """Parsed (and already redacted) log lines, in order; never dropped."""

    host: str
    events: tuple[LogEvent, ...]


@event("connection", changes=HEADER)
@dataclass(frozen=True, slots=True)
class ConnectionChanged:
    host: str
    state: ConnectionState


@event("notice", changes=TOAST)
@dataclass(frozen=True, slots=True)
class Notice:
    """Something worth a toast: "log stream ended; reconnecting", "benchmark failed: …"."""

    host: str
    title: str
    message: str
    severity: str = "information"  # information, warning, error
    at_s: float = 0.0


@event("verify", changes="verify")
@dataclass(frozen=True, slots=True)
class VerifyChanged:
    host: str
    progress: Any  # console.host.sources.download.VerifyProgress (the codec decodes it as one)


@event("bench", changes="bench")
@dataclass(frozen=True, slots=True)
class BenchChanged:
    """The benchmark: `start` (label, total), `progress` (a Progress), `result` (metrics and the
    saved record), `done` (error or None), `history` (saved runs, for the comparison)."""

    host: str
    kind: str
    label: str | None = None
    total: int | None = None
    progress: Any = None  # console.domain.bench.runner.Progress (the codec decodes it as one)
    record: dict[str, Any] | None = None
    error: str | None = None
    runs: tuple[dict[str, Any], ...] = ()


# -- pairing (issue 12): who is attached to a shared core, who drives, the shared note ------------
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


@event("presence", changes=HEADER)
@dataclass(frozen=True, slots=True)
class Presence:
    """Everyone attached, in arrival order, and who asked to drive (client ids). Applied by the
    core's share server whenever someone arrives, leaves, hands over, asks or changes view.
    `state.presence` / `state.driver` read it (issue 13's approvals gate on the driver)."""

    host: str
    clients: tuple[Client, ...] = ()
    asking: tuple[int, ...] = ()


@event("note", changes=HEADER)
@dataclass(frozen=True, slots=True)
class NoteChanged:
    """The shared note line ("waiting for the 122B to finish CUDA graphs"); anyone may set it."""

    host: str
    text: str
    by: str = ""
    at_s: float = 0.0


# -- the swap (issue 13): its plan, gate, approvals, audit and downtime, as plain data -------------
@dataclass(frozen=True, slots=True)
class SwapStep:
    key: str
    title: str
    state: str = "pending"  # one of console.core.derive.swap_view.STEP_STATES
    started_at_s: float | None = None
    ended_at_s: float | None = None
    detail: str = ""  # why it failed, what it is waiting for, what it found
    commands: tuple[str, ...] = ()  # the exact commands it ran (or will run)
    who: str | None = None
    # Not run by the console's plan: seen on the host (another terminal, a shell, the demo's story),
    # with the times the host's facts gave (console/core/derive/swap_observer.py).
    observed: bool = False

    @property
    def duration_s(self) -> float | None:
        if self.started_at_s is None or self.ended_at_s is None:
            return None
        return max(0.0, self.ended_at_s - self.started_at_s)


@dataclass(frozen=True, slots=True)
class GateCheck:
    """One preflight check. `ok` None: could not be decided (that fails the gate too), unless the
    check is not `required` (the profile does not ask for it): then it is "not checked", which
    neither passes as a ✓ nor blocks. A check that found a fault (`ok` False) always blocks."""

    name: str
    ok: bool | None
    reason: str
    overridden_by: str | None = None
    required: bool = True

    @property
    def passes(self) -> bool:
        return self.ok is True or self.overridden_by is not None or (not self.required and self.ok is None)

    @property
    def verdict(self) -> str:
        """What the check says, in one word: passed, failed, unknown, not checked, overridden."""
        if self.ok is True:
            return "passed"
        if self.overridden_by is not None:
            return "overridden"
        if self.ok is None:
            return "not checked" if not self.required else "unknown"
        return "failed"


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One command run on the host on someone's behalf (already redacted)."""

    who: str
    at_s: float
    action: str
    command: str
    exit_status: int | None  # None: no exit status came back (timeout, connection lost)
    output_tail: str
    duration_s: float | None = None
    note: str = ""


@event("swap_step", changes=SWAP)
@dataclass(frozen=True, slots=True)
class SwapStepChanged:
    """A step of the swap plan started, finished, failed or was skipped."""

    host: str
    step: SwapStep


@event("swap_gate", changes=SWAP)
@dataclass(frozen=True, slots=True)
class GateChanged:
    """The preflight gate's checks as last evaluated (with any overrides)."""

    host: str
    checks: tuple[GateCheck, ...]
    at_s: float = 0.0


@event("swap_downtime", changes=SWAP)
@dataclass(frozen=True, slots=True)
class DowntimeChanged:
    """The downtime clock: from the old server's last served request to the new one's ready."""

    host: str
    started_at_s: float | None
    start_source: str  # what the start was read from ("log: last decode batch", ...)
    ended_at_s: float | None = None
    end_source: str = ""


@event("swap_approval", changes=SWAP)
@dataclass(frozen=True, slots=True)
class ApprovalChanged:
    """A two-person-rule request: asked (pending), granted, denied or withdrawn."""

    host: str
    request_id: str
    action: str
    commands: tuple[str, ...]
    requested_by: str
    requested_at_s: float
    status: str = "pending"  # pending, granted, denied, withdrawn
    decided_by: str | None = None
    decided_at_s: float | None = None


@event("swap_audit", changes=SWAP)
@dataclass(frozen=True, slots=True)
class AuditAppended:
    host: str
    entry: AuditEntry


@event("swap_setup", changes=SWAP)
@dataclass(frozen=True, slots=True)
class SwapSetup:
    """What this swap is: the units and model, and the rules the profile set (read-only, approval)."""

    host: str
    old_unit: str | None
    new_unit: str | None
    repo_id: str | None
    model_dir: str | None
    read_only: bool = False
    require_approval: bool = False
    verify_sha: bool = False
    busy: str | None = None  # the action running now, if any
    # Compose: the file the new service is in, and the services of the old and new containers
    # (from their labels; None where not known or not a compose service)
    compose_file: str | None = None
    old_service: str | None = None
    new_service: str | None = None


@event("swap_path", changes=SWAP)
@dataclass(frozen=True, slots=True)
class PathEvent:
    """The faster paths (issue 24). kind "plan": the PathPlan and the restart prediction;
    "prewarm": its progress; "outcome": what the chosen path measured (downtime per phase, paused
    requests); "endpoint": the server moved to another port. `data_json` is JSON text so the codec
    moves it as a plain string."""

    host: str
    kind: str
    data_json: str
    at_s: float = 0.0

    def data(self) -> dict[str, Any]:
        try:
            value = json.loads(self.data_json)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class SwapData:
    """The whole swap view as plain data (the state's snapshot, issue 20)."""

    setup: SwapSetup | None = None
    steps: tuple[SwapStep, ...] = ()
    gate: tuple[GateCheck, ...] = ()
    gate_at_s: float | None = None
    downtime: DowntimeChanged | None = None
    approvals: tuple[ApprovalChanged, ...] = ()
    audit: tuple[AuditEntry, ...] = ()
    paths: tuple[PathEvent, ...] = ()  # issue 24: the path plan, pre-warm, outcome


# -- the whole state (issue 20) ---------------------------------------------------------------------
@event("snapshot", changes=EVERYTHING)
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
    verify: Any = None  # console.host.sources.download.VerifyProgress
    bench: BenchData = field(default_factory=BenchData)
    swap: SwapData = field(default_factory=SwapData)
    presence: Presence | None = None
    note: NoteChanged | None = None


# -- the tables every reader of events builds from ------------------------------------------------
EVENTS: tuple[EventSpec, ...] = tuple(_SPECS.values())
"""Every event type, in declaration order."""
EVENT_TYPES: dict[str, type[Any]] = {spec.tag: spec.type for spec in EVENTS}
"""The wire tag → the event type (the codec's decoding table)."""
SPEC_OF: dict[type[Any], EventSpec] = {spec.type: spec for spec in EVENTS}
SWAP_EVENTS: tuple[type[Any], ...] = tuple(spec.type for spec in EVENTS if spec.changes == SWAP)
"""The events the swap view takes."""

Event = (HostInfo | ReadingChanged | LogAppended | ConnectionChanged | Notice | VerifyChanged | BenchChanged
         | Presence | NoteChanged
         | SwapStepChanged | GateChanged | DowntimeChanged | ApprovalChanged | AuditAppended | SwapSetup | PathEvent
         | StateSnapshot)
"""For type hints: the union of EVENTS' types (a test checks that the two agree)."""


def changes(event: Any) -> str:
    """What `event` changed, as the host screen's dirty keys name it (a reading: its source)."""
    spec = SPEC_OF.get(type(event))
    if spec is None:
        raise TypeError(f"not an event: {type(event).__name__}")
    return event.source if spec.changes == BY_SOURCE else spec.changes


__all__ = [
    "EVENTS", "EVENT_TYPES", "SPEC_OF", "SWAP_EVENTS", "Event", "EventSpec", "event", "changes",
    "HEADER", "SWAP", "BY_SOURCE", "EVERYTHING", "TOAST",
    *(spec.type.__name__ for spec in EVENTS),
    "Client", "SwapStep", "GateCheck", "AuditEntry", "SwapData",
]
