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
from console.host.parsers.sglang_log import line_time, stamp_s

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


def _same_with_none_added(new: object, old: object) -> bool:
    """`new` is `old` with, at most, keys added whose value is None: a field declared since the
    recording was made, optional, that the old recording did not have (nothing lost or renamed)."""
    if isinstance(new, dict) and isinstance(old, dict):
        return all(k in new and _same_with_none_added(new[k], v) for k, v in old.items()) \
            and all(new[k] is None for k in new.keys() - old.keys())
    if isinstance(new, list) and isinstance(old, list):
        return len(new) == len(old) and all(_same_with_none_added(a, b) for a, b in zip(new, old, strict=True))
    return new == old


def test_a_recording_made_before_decodes_to_the_same_events() -> None:
    header, *rest = _lines()
    assert json.loads(header)["format"] == "gpuconsole-recording"
    expected = json.loads(gzip.decompress((DATA / "made-before-events-py.expected.json.gz").read_bytes()))
    bodies = [json.dumps(json.loads(line)["e"], ensure_ascii=False, separators=(",", ":")).encode() for line in rest]
    decoded = [codec.decode_event(body) for body in bodies]
    assert [type(e).__name__ for e in decoded] == expected["types"]
    assert {events.SPEC_OF[type(e)].tag for e in decoded} == set(events.EVENT_TYPES), "the file holds every tag"
    for body, event in zip(bodies, decoded, strict=True):  # the same bytes again: nothing lost or renamed
        assert _same_with_none_added(json.loads(codec.encode_event(event)), json.loads(body)), body


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
    assert _same_with_none_added(json.loads(codec.encode_event(state.snapshot())), expected["final_snapshot"])


def test_a_recording_made_before_the_hosts_time_of_log_lines_reads_each_line_at_its_own_stamp() -> None:
    """Log lines recorded before events carried the host's time of the line (journald's, Docker's)
    decode with none, and every fact dated by such a line reads the server's own stamp, as then."""
    lines = [e for row in _lines()[1:] if (body := json.loads(row)["e"])["event"] == "log"
             for e in codec.decode_event(json.dumps(body)).events]
    assert lines and all(e.at_s is None for e in lines)
    stamped = [e for e in lines if e.ts]
    assert stamped and all(line_time(e) == stamp_s(e.ts) is not None for e in stamped)
