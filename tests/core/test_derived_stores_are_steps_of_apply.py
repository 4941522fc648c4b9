"""The stores a state derives from its events (GPU history, the bench view, the swap view, the swap's
observer) are the ordered steps of `HostState.apply`: a late reader that starts from a snapshot and
then takes the same events ends where a reader that took every event ends; the observer writes only
in the host's writer's state, and a mirror gets what it wrote as events."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from console.domain.analysis.service_report import side_from_text
from console.core import codec
from console.core.derive import BenchStep, GpuTracker, Store, SwapStore
from console.core.events import ReadingChanged, SwapStepChanged
from console.core.state import HostState
from console.model import Reading

OLD = Path(__file__).resolve().parent.parent / "data" / "recordings" / "made-before-events-py.jsonl.gz"


def _rows() -> tuple[dict[str, Any], list[tuple[float, Any]]]:
    with gzip.open(OLD, "rb") as f:
        header, *rest = f.read().splitlines()
    rows = [json.loads(line) for line in rest]
    return json.loads(header), [(r["t"], codec.decode_event(json.dumps(r["e"]))) for r in rows]


def test_the_steps_of_apply_run_in_their_order() -> None:
    state = HostState("h")
    assert [type(s) for s in state.steps] == [GpuTracker, BenchStep, Store, SwapStore]
    assert state.steps[0] is state.gpus and state.steps[1].view is state.bench and state.steps[3].view is state.swap
    # a reading goes through the GPU tracker, the bench view, then the store
    assert [type(s) for s in state._route[ReadingChanged]] == [GpuTracker, BenchStep, Store]


def test_a_late_reader_from_a_snapshot_ends_where_the_first_reader_ends() -> None:
    head, events = _rows()
    clock = {"t": 0.0}
    first = HostState(head["host"], label=head["label"], demo=True, clock=lambda: clock["t"])
    middle = next(i for i, (_, e) in enumerate(events) if isinstance(e, SwapStepChanged) and i > 20)
    late: HostState | None = None
    for i, (t, event) in enumerate(events):
        clock["t"] = t
        if i == middle:  # attach: the whole state, then the same events as they come
            late = HostState.from_snapshot(first.snapshot(), clock=lambda: clock["t"])
        first.apply(event)
        if late is not None:
            late.apply(event)
    assert late is not None
    a, b = codec.to_builtins(first.snapshot()), codec.to_builtins(late.snapshot())
    for part in ("readings", "bench", "swap", "log_lines", "notices", "presence", "note"):
        assert a[part] == b[part], part


UNIT = """[Service]
ExecStart=/opt/sglang/.venv/bin/python -m sglang.launch_server --model-path /m/a --tp 4 --port 30000
"""
T0 = 1_796_000_000.0


def _service(old_state: str, new_state: str, at: float) -> ReadingChanged:
    def side(name: str, active: str) -> Any:
        return replace(side_from_text(name, UNIT), active_state=active)

    report = SimpleNamespace(old=side("old.service", old_state), new=side("new.service", new_state))
    return ReadingChanged("h", "service", Reading("service", report, ok_at_s=at))


def test_the_observer_writes_in_the_writers_state_only() -> None:
    """The old unit seen stopping: the writer's state (the runner's: `observe_host`) writes the
    stop in as observed, right after the reading, and its subscribers see both; a mirror that takes
    the same reading writes nothing (it gets the writer's events)."""
    writer, mirror = HostState("h"), HostState("h")
    writer.observe_host()
    told: list[str] = []
    writer.subscribe(lambda e: told.append(type(e).__name__))
    for state in (writer, mirror):
        state.apply(_service("active", "inactive", T0))
        state.apply(_service("inactive", "inactive", T0 + 5))
    stop = writer.swap.steps["stop_old"]
    assert stop.observed and stop.state != "pending" and stop.started_at_s == T0 + 5
    assert told.index("SwapStepChanged") > told.index("ReadingChanged")
    assert mirror.swap.steps["stop_old"].state == "pending" and mirror.observer is None
