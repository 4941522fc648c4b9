"""The stores the state derives from its events, as the ordered steps of `HostState.apply`.

Every reader of a state (the live console, an attached client, a replay, the report, the fleet)
gets these the same way: by applying events. A step takes the event types it names (`takes`), in
the order `HostState.STEPS` lists them, and may hand the steps after it a changed event (the GPU
tracker hands on the reading with each GPU's history). The observer of the host's swap is the one
step that writes events (`Observe`): only the state's writer (the runner that polls the host)
turns it on; a mirror (attach, replay) receives what it wrote, as events.

No Textual; `console.core.derive.swap_view` and `console.core.derive.swap_observer` are the swap's state (its view and its
observer, which import only the core): the target tree puts them here, in `core/derive/swap.py`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from console.domain.analysis.bench_view import BenchView, is_result
from console.domain.bench.store import HELD_RUNS
from console.core.events import (
    SWAP_EVENTS,
    BenchChanged,
    ConnectionChanged,
    HostInfo,
    LogAppended,
    NoteChanged,
    Notice,
    Presence,
    ReadingChanged,
    StateSnapshot,
    VerifyChanged,
)
from console.model import GpuDevice, GpuStatus, Reading
from console.core.derive.swap_view import SwapView
from console.core.derive.swap_observer import SwapObserver

GPU_HISTORY = 300  # 5 min at 1 Hz: a maximized pane at 200 columns fills its history (issue 22 item 19)


class State(Protocol):
    """What a step reads and writes of the state that runs it (console/core/state.py's HostState): the
    state imports these steps, so they name it only through this (no circle between the two)."""

    host: str
    label: str
    demo: bool
    info: Any
    readings: dict[str, Any]
    log_lines: Any
    log_lines_total: int
    connection: Any
    notices: Any
    verify: Any
    presence: Any
    note: Any
    bench: Any
    swap: Any

    def now(self) -> float: ...

    def data(self, source: str) -> Any: ...

    def restore_own(self, snap: StateSnapshot) -> None: ...


class Step(Protocol):
    """One step of `apply`: the events it takes, what it does with one (returning the event the
    steps after it see), and how it becomes the store a snapshot describes."""

    takes: tuple[type[Any], ...]

    def apply(self, state: State, event: Any) -> Any: ...

    def restore(self, state: State, snap: StateSnapshot) -> None: ...


# -- GPUs keyed by GPU ------------------------------------------------------------------------------
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

    takes: tuple[type[Any], ...] = (ReadingChanged,)

    def __init__(self) -> None:
        self._tracks: dict[str, _GpuTrack] = {}

    # -- as a step of apply: the GPU reading the state keeps carries each GPU's history ---------------
    def apply(self, state: State, event: ReadingChanged) -> Any:
        if event.source != "gpu":
            return event
        return replace(event, reading=self.track(event.reading))

    def restore(self, state: State, snap: StateSnapshot) -> None:
        gpu = dict(snap.readings).get("gpu")
        self.restore_status(gpu.data if gpu is not None else None)

    # -- the tracker ------------------------------------------------------------------------------
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

    def restore_status(self, status: GpuStatus | None) -> None:
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


# -- the bench view: runs, the live sweep, and the time chart's series, marks and gaps --------------
class BenchStep:
    """Feeds `state.bench` (console/domain/analysis/bench_view.py): the benchmark's events, the GPUs'
    mean utilization, the server's throughput from its log, and the swap's marks on the time chart.
    Runs before the readings are stored: a unit's transition is read against the reading before."""

    takes: tuple[type[Any], ...] = (HostInfo, ReadingChanged, BenchChanged)

    def __init__(self, view: BenchView) -> None:
        self.view = view

    def apply(self, state: State, event: Any) -> Any:
        if isinstance(event, HostInfo):
            self.view.host = event.label  # the before/after pair is of this host's runs only
        elif isinstance(event, BenchChanged):
            self._bench(event)
        elif isinstance(event, ReadingChanged):
            self._reading(state, event)
        return event

    def restore(self, state: State, snap: StateSnapshot) -> None:
        self.view.restore(snap.bench)

    def _reading(self, state: State, event: ReadingChanged) -> None:
        reading = event.reading
        if event.source == "gpu":
            data = reading.data
            if data is not None and reading.error is None:
                utils = [g.utilization_pct for g in data.gpus if g.utilization_pct is not None and g.lost_at_s is None]
                if utils:
                    self.view.add_gpu(data.sampled_at_s or reading.ok_at_s or state.now(), sum(utils) / len(utils))
        elif event.source == "log" and reading.data is not None:
            if reading.data.series:
                # every point the reading brings (a backlog's too); the ones drawn already are skipped
                self.view.add_server_points([(p.t_s, p.gen_tokens_per_s, p.accept_len)
                                             for p in reading.data.series])
            # The swap on the time chart: a new boot launching, and its ready line.
            self.view.note_log(reading.data, reading.ok_at_s or state.now())
        elif event.source == "service" and reading.data is not None and reading.error is None:
            self._unit_marks(state, reading)

    def _unit_marks(self, state: State, reading: Reading[Any]) -> None:
        """Swap marks from a NAMED unit's transitions (issue 20): which side a view shows as "old"
        (the diff pane's `s`) changes the reading's sides, never a unit's state, so it marks nothing.
        The old unit stopping opens a gap in the server's series; the new one's ready closes it."""
        before = state.data("service")
        was = {side.name: side.active_state for side in (before.old, before.new) if side is not None} \
            if before is not None else {}
        setup = state.swap.setup
        old_unit = setup.old_unit if setup is not None else None
        t = reading.ok_at_s or state.now()
        for side in (reading.data.old, reading.data.new):
            if side is None or was.get(side.name) != "active" or side.active_state in ("active", None):
                continue
            named_old = side.name == old_unit or (old_unit is None and before is not None and before.old is not None
                                                  and before.old.name == side.name)
            self.view.mark(t, "old server stopped" if named_old else f"{side.name} stopped")
            self.view.open_gap(t)

    def _bench(self, event: BenchChanged) -> None:
        view = self.view
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
                del view.history[:-HELD_RUNS]  # the oldest leave, as the file's load keeps the last
            view.finish(event.record)
        elif event.kind == "done":
            view.end(event.error)


# -- the state's own stores: what the host said, as it said it --------------------------------------
class Store:
    """The readings (as the steps before handed them on), the log lines, the connection, notices,
    the verification, who is attached and the shared note."""

    takes: tuple[type[Any], ...] = (HostInfo, ReadingChanged, LogAppended, ConnectionChanged, Notice,
                                    VerifyChanged, Presence, NoteChanged)

    def apply(self, state: State, event: Any) -> Any:
        if isinstance(event, ReadingChanged):
            state.readings[event.source] = event.reading
        elif isinstance(event, LogAppended):
            state.log_lines.extend(event.events)
            state.log_lines_total += len(event.events)
        elif isinstance(event, HostInfo):
            state.info = event
            state.label, state.demo = event.label, event.demo
        elif isinstance(event, ConnectionChanged):
            state.connection = event.state
        elif isinstance(event, Notice):
            state.notices.append(event)
        elif isinstance(event, VerifyChanged):
            state.verify = event.progress
        elif isinstance(event, Presence):
            state.presence = event
        elif isinstance(event, NoteChanged):
            state.note = event if event.text else None
        return event

    def restore(self, state: State, snap: StateSnapshot) -> None:
        state.restore_own(snap)


# -- the swap: its view, and its observer -----------------------------------------------------------
class SwapStore:
    """Feeds `state.swap` (console/core/derive/swap_view.py's SwapView): the plan, gate, approvals, audit,
    downtime and paths."""

    takes: tuple[type[Any], ...] = SWAP_EVENTS

    def __init__(self, view: SwapView) -> None:
        self.view = view

    def apply(self, state: State, event: Any) -> Any:
        self.view.apply(event)
        return event

    def restore(self, state: State, snap: StateSnapshot) -> None:
        self.view.restore(snap.swap)


class Observe:
    """The swap as the host lived it (console/core/derive/swap_observer.py): after an event is applied and its
    views told, the swap events it implies are applied, each checked again at that moment (a
    step the console has taken over since is the console's). The one step that writes events:
    only the state's writer turns it on (`HostState.observe_host`)."""

    def __init__(self, state: State, wake: Callable[[str], None] | None = None) -> None:
        self.observer = SwapObserver(state, wake=wake)

    def derive(self, event: Any) -> list[Any]:
        """The swap events `event` implies (none for most)."""
        return list(self.observer.see(event))

    def still_valid(self, event: Any) -> bool:
        return self.observer.still_valid(event)


__all__ = ["Step", "GpuTracker", "BenchStep", "Store", "SwapStore", "Observe", "GPU_HISTORY"]
