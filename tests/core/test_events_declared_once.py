"""Every event is declared once, in console/core/events.py: the codec's tags, the state's dispatch
and the host screen's dirty keys are built from that one table, and recordings written before the
table existed still decode to the same events and replay to the same state."""

from __future__ import annotations

import ast
import dataclasses
import gzip
import json
import typing
from pathlib import Path

import pytest

from console.core import codec, events
from console.core.state import HostState

ROOT = Path(__file__).resolve().parent.parent.parent / "console"
DATA = Path(__file__).resolve().parent.parent / "data" / "recordings"
OLD = DATA / "made-before-events-py.jsonl.gz"
assert (ROOT / "core" / "events.py").is_file(), ROOT


def test_every_event_type_is_declared_in_the_events_module() -> None:
    assert events.EVENTS, "no event declared"
    outside = [spec.type.__qualname__ + " in " + spec.type.__module__ for spec in events.EVENTS
               if spec.type.__module__ != "console.core.events"]
    assert not outside, outside


def test_the_codec_knows_every_declared_event_and_nothing_else() -> None:
    assert codec.EVENT_KINDS == events.EVENT_TYPES
    assert {v: k for k, v in codec.EVENT_KINDS.items()} == codec.KIND_OF
    for spec in events.EVENTS:
        assert codec.KIND_OF[spec.type] == spec.tag


def test_the_event_union_is_the_declared_events() -> None:
    assert set(typing.get_args(events.Event)) == set(events.EVENT_TYPES.values())


def test_the_state_takes_every_declared_event_and_refuses_any_other() -> None:
    state = HostState("h")
    untaken = [spec.tag for spec in events.EVENTS
               if spec.type is not events.StateSnapshot and not state._route.get(spec.type)]
    assert not untaken, f"declared but no step of apply takes them: {untaken}"

    @dataclasses.dataclass(frozen=True, slots=True)
    class Stray:
        host: str

    with pytest.raises(TypeError, match="not a state event: Stray"):
        state.apply(Stray("h"))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        codec.encode_event(Stray("h"))  # type: ignore[arg-type]


def test_the_host_screen_knows_what_every_event_changes() -> None:
    from console.ui.panes.registry import PANES

    drawn = {source for spec in PANES for source in spec.sources}
    known = drawn | {events.HEADER, events.SWAP, events.TOAST, events.EVERYTHING, "bench", "verify", "log_lines"}
    for spec in events.EVENTS:
        assert spec.changes == events.BY_SOURCE or spec.changes in known, (spec.tag, spec.changes)


def _events_applied_in(path: Path) -> set[str]:
    """Names of the classes built inside a `.apply(...)` or `.emit(...)` call in one module."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "apply":
            for arg in node.args:
                if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id[:1].isupper():
                    names.add(arg.func.id)
    return names


def test_no_module_applies_an_event_declared_elsewhere() -> None:
    """A class built straight into `state.apply(...)` anywhere in console/ is a declared event (a
    new event type declared in its own module, with its own codec entry, fails here)."""
    declared = {t.__name__ for t in events.EVENT_TYPES.values()}
    stray = {f"{name} ({path.relative_to(ROOT.parent)})" for path in sorted(ROOT.rglob("*.py"))
             for name in _events_applied_in(path) - declared}
    seen = {name for path in ROOT.rglob("*.py") for name in _events_applied_in(path)}
    assert len(seen & declared) >= 8, seen  # the scan finds the applies it is meant to find
    assert not stray, sorted(stray)


def test_no_class_shares_a_name_with_an_event_outside_the_events_module() -> None:
    names = {t.__name__ for t in events.EVENT_TYPES.values()}
    twins = []
    for path in sorted(ROOT.rglob("*.py")):
        if path == ROOT / "core" / "events.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name in names:
                twins.append(f"{node.name} in {path.relative_to(ROOT.parent)}")
    assert not twins, twins


# -- a recording made by the code before events.py (tests/data/PROVENANCE.md) -------------------------
def _lines() -> list[bytes]:
    with gzip.open(OLD, "rb") as f:
        return f.read().splitlines()


def _as_recorded(now: object, then: object) -> object:
    """`now` (an encoding by this code) without the fields added since `then` was recorded, each of
    which must hold its default (None): a format that grows loses and renames nothing."""
    if isinstance(now, dict) and isinstance(then, dict):
        added = {k: v for k, v in now.items() if k not in then}
        assert all(v is None for v in added.values()), added
        return {k: _as_recorded(v, then[k]) for k, v in now.items() if k in then}
    if isinstance(now, list) and isinstance(then, list) and len(now) == len(then):
        return [_as_recorded(a, b) for a, b in zip(now, then, strict=True)]
    return now


def test_a_recording_made_before_decodes_to_the_same_events() -> None:
    header, *rest = _lines()
    assert json.loads(header)["format"] == "gpuconsole-recording"
    expected = json.loads(gzip.decompress((DATA / "made-before-events-py.expected.json.gz").read_bytes()))
    bodies = [json.dumps(json.loads(line)["e"], ensure_ascii=False, separators=(",", ":")).encode() for line in rest]
    decoded = [codec.decode_event(body) for body in bodies]
    assert [type(e).__name__ for e in decoded] == expected["types"]
    assert {events.SPEC_OF[type(e)].tag for e in decoded} == set(events.EVENT_TYPES), "the file holds every tag"
    for body, event in zip(bodies, decoded, strict=True):  # the same bytes again: nothing lost or renamed
        then = json.loads(body)
        assert _as_recorded(json.loads(codec.encode_event(event)), then) == then


def test_a_recording_made_before_replays_to_the_same_state() -> None:
    header, *rest = _lines()
    expected = json.loads(gzip.decompress((DATA / "made-before-events-py.expected.json.gz").read_bytes()))
    head = json.loads(header)
    t = 0.0
    state = HostState(head["host"], label=head["label"], demo=True, clock=lambda: t)
    for line in rest:
        row = json.loads(line)
        t = row["t"]
        state.apply(codec.decode_event(json.dumps(row["e"])))
    then = expected["final_snapshot"]
    assert _as_recorded(json.loads(codec.encode_event(state.snapshot())), then) == then
