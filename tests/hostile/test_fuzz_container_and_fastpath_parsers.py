"""Property-based fuzzing of the parsers of host data built since the first fuzz round (issue 34):
`docker inspect`, `docker ps`, compose files, `/proc/PID/cgroup`, the container's state line, the
daemon's error text, the fast paths' replies (curl's answer and code, the listener table of the
beside port check), the beside unit's environment, and the decoding of `docker logs` lines.

Inputs start from recorded real outputs (tests/data/docker/, PROVENANCE.md) and are mutated by
hypothesis: any subtree replaced by any JSON value (a number where a list is expected, a string
where a mapping is), strings carrying escape sequences, C1 controls and bidi overrides, binary
bytes. Each test asserts a property, not only "no crash": nothing but ParseError escapes, and every
string that comes out is clean (no control character, escape sequence or bidi override).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.domain.analysis import unit_environment as ue
from console.domain.analysis.host_replies import clean_reply, reply_json, split_reply
from console.domain.swap.container_actions import parse_container_state
from console.domain.swap.port_free import port_verdict
from console.host.parsers import ParseError
from console.host.parsers.docker import (
    container_id_from_cgroup,
    docker_error_text,
    parse_compose,
    parse_inspect,
    parse_ps,
    restart_loop_of,
)
from console.host.parsers.proc_net import parse_listeners
from console.host.sources.log import LogFollower

DATA = Path(__file__).parent.parent / "data" / "docker"
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.filter_too_much])
INSPECT = json.loads((DATA / "inspect_qwen397b.json").read_text())
COMPOSE = yaml.safe_load((DATA / "compose.yaml").read_text())
PS_LINES = [ln for ln in (DATA / "ps.jsonl").read_text().splitlines() if ln.strip()]

# What a hostile host puts in a string: OSC 52 (the clipboard), OSC 0 (the title), CSI, C1, bidi.
NASTY = ["\x1b]52;c;aGk=\x1b\\", "\x1b]0;owned\x07", "\x1b[2J", "\x9b31m", "\x9d0;t\x9c", "\u202eevil", "\u2066",
         "\x00", "\r", "\x7f", "a\nb", "²", "١٢٣", "[/]", "x" * 300]
DIRTY = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
nasty_text = st.one_of(st.sampled_from(NASTY), st.text(max_size=30),
                       st.lists(st.sampled_from(NASTY), min_size=1, max_size=3).map("".join))
json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), nasty_text),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(nasty_text, inner, max_size=4)),
    max_leaves=12)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = json.loads(json.dumps(doc))
    here = copy
    for key in path[:-1]:
        here = here[key]
    here[path[-1]] = value
    return copy


@st.composite
def mutated(draw: st.DrawFn, base: Any) -> Any:
    """The recorded document with one to three subtrees replaced by anything."""
    doc = base
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        doc = _replace(doc, draw(st.sampled_from(paths)), draw(json_value))
    return doc


def _strings(value: Any, depth: int = 0) -> list[str]:
    """Every string inside a parser's result (dataclasses, tuples, dicts)."""
    if depth > 20:
        return []
    if isinstance(value, str):
        return [value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [s for f in dataclasses.fields(value) for s in _strings(getattr(value, f.name), depth + 1)]
    if isinstance(value, dict):
        return [s for kv in value.items() for x in kv for s in _strings(x, depth + 1)]
    if isinstance(value, (list, tuple)):
        return [s for x in value for s in _strings(x, depth + 1)]
    return []


def _clean(value: Any, *, newlines: bool = False) -> None:
    for s in _strings(value):
        bad = DIRTY.search(s.replace("\n", "").replace("\t", "") if newlines else s)
        assert bad is None, f"{s[:80]!r} holds {bad.group()!r}"


@FUZZ
@given(doc=mutated(INSPECT))
def test_docker_inspect_mutated_anywhere_is_a_spec_or_a_parse_error(doc: Any) -> None:
    try:
        specs = parse_inspect(json.dumps(doc))
    except ParseError:
        return
    _clean(specs)
    for spec in specs:
        assert all(isinstance(m.destination, str) for m in spec.mounts)


def test_mounts_as_a_number_and_args_as_a_mapping_are_parse_errors_or_ignored() -> None:
    for key, value in (("Mounts", 5), ("Mounts", "x"), ("Mounts", {"a": 1}), ("Args", {"a": 1}),
                       ("HostConfig", {"PortBindings": {"1/tcp": 7}}), ("HostConfig", {"DeviceRequests": [{
                           "Capabilities": 1, "DeviceIDs": 3, "Count": 2}]}), ("RestartCount", "x")):
        doc = [{**INSPECT[0], key: value}] if isinstance(INSPECT, list) else {**INSPECT, key: value}
        try:
            specs = parse_inspect(json.dumps(doc))
        except ParseError as exc:
            assert str(exc) and "\n" not in str(exc)
            continue
        _clean(specs)
        assert len(specs) == 1 and (key != "Mounts" or specs[0].mounts == ())  # no mounts, not a crash


@FUZZ
@given(doc=mutated(COMPOSE), service=st.one_of(st.none(), nasty_text))
def test_compose_files_mutated_anywhere_are_a_spec_or_a_parse_error(doc: Any, service: str | None) -> None:
    try:
        spec = parse_compose(yaml.safe_dump(doc), service, path="/srv/app/compose.yaml")
    except ParseError as exc:
        assert str(exc)
        return
    _clean(spec)
    assert spec.source == "compose" and all(isinstance(w, str) for w in spec.argv)


def test_deploy_as_a_string_and_devices_as_a_number_are_not_crashes() -> None:
    name = next(iter(COMPOSE["services"]))
    for patch in ({"deploy": "x"}, {"deploy": {"resources": "y"}}, {"deploy": {"resources": {"reservations": 3}}},
                  {"deploy": {"resources": {"reservations": {"devices": [{"count": "many", "capabilities": 7}]}}}},
                  {"volumes": 5}, {"ports": "8000:8000"}, {"environment": 4}, {"env_file": 3}):
        doc = json.loads(json.dumps(COMPOSE))
        doc["services"][name].update(patch)
        try:
            spec = parse_compose(yaml.safe_dump(doc), name)
        except ParseError as exc:
            assert str(exc) and "\n" not in str(exc)
            continue
        _clean(spec)
        assert spec.name and ("deploy" not in patch or spec.gpus is None)  # no GPUs read from a string


@FUZZ
@given(lines=st.lists(st.one_of(st.sampled_from(PS_LINES), nasty_text,
                                mutated(json.loads(PS_LINES[0])).map(json.dumps)), max_size=6))
def test_docker_ps_lines_are_rows_with_clean_strings(lines: list[str]) -> None:
    rows = parse_ps("\n".join(lines))
    _clean(rows)
    assert len(rows) <= len(lines)


@FUZZ
@given(text=st.one_of(st.text(max_size=300), st.sampled_from(
    [(DATA / n).read_text() for n in ("cgroup_host.txt", "cgroup_v1_docker.txt", "cgroup_v2_docker.txt")])))
def test_a_cgroup_file_gives_a_container_id_or_none(text: str) -> None:
    got = container_id_from_cgroup(text)
    assert got is None or re.fullmatch(r"[0-9a-f]{64}", got)


@FUZZ
@given(words=st.lists(st.one_of(nasty_text, st.sampled_from(["running", "true", "false", "0", "3", "-1",
                                                              "restarting", "٣"])), max_size=7))
def test_the_container_state_line_is_the_five_fields_or_nothing(words: list[str]) -> None:
    state = parse_container_state(" ".join(words))
    assert state == {} or set(state) == {"status", "running", "exit_code", "restarts", "oom_killed"}
    _clean(state)
    said = restart_loop_of(state)
    assert said is None or isinstance(said, str)
    _clean(said)


@FUZZ
@given(text=st.lists(nasty_text, max_size=5).map("\n".join))
def test_the_daemons_error_is_one_clean_line(text: str) -> None:
    said = docker_error_text(text)
    assert "\n" not in said
    _clean(said)


@FUZZ
@given(body=st.one_of(nasty_text, json_value.map(json.dumps)),
       code=st.one_of(st.sampled_from(["200", "503", "²", "٣٠٠", "", "-1", "99999"]), nasty_text))
def test_a_fast_path_reply_is_a_code_or_none_and_clean_json(body: str, code: str) -> None:
    got, rest = split_reply(f"{body}\n{code}")
    assert got is None or 0 <= got <= 999
    _clean(reply_json(rest))
    _clean(clean_reply(rest))


TCP = ("  sl  local_address rem_address   st tx_queue\n"
       "   0: 0100007F:7531 00000000:0000 0A 0 0\n"
       "   1: 00000000000000000000000000000000:7531 00000000000000000000000000000000:0000 0A 0\n")


@FUZZ
@given(rows=st.lists(st.one_of(nasty_text, st.sampled_from(TCP.splitlines()),
                               st.tuples(st.text("0123456789ABCDEFx:", max_size=40), st.sampled_from(["0A", "01"]))
                               .map(lambda t: f"  9: {t[0]} 00000000:0000 {t[1]} 0")), max_size=8),
       bind=st.one_of(st.sampled_from(["0.0.0.0", "::", "127.0.0.1", "[::1]", "localhost"]), nasty_text))
def test_the_port_checks_table_is_listeners_or_a_parse_error_and_its_verdict_is_clean(rows: list[str],
                                                                                       bind: str) -> None:
    text = "\n".join(rows)
    try:
        listeners = parse_listeners(text)
    except ParseError:
        listeners = None
    assert listeners is None or all(0 <= ln.port <= 0xFFFF for ln in listeners)
    said = port_verdict(30001, text, bind)
    _clean(said)


@FUZZ
@given(body=st.lists(st.one_of(nasty_text, st.sampled_from([
    "Environment=CUDA_VISIBLE_DEVICES=0,1", 'Environment="A=1" CUDA_VISIBLE_DEVICES=GPU-x', "Environment=",
    "EnvironmentFile=-/etc/x.env", "[Service]", "[Install]", "ExecStart=/bin/sglang --port 1 \\",
    "UnsetEnvironment=CUDA_VISIBLE_DEVICES", 'Environment="unbalanced'])), max_size=8).map("\n".join),
       dropin=st.lists(nasty_text, max_size=3).map("\n".join))
def test_the_beside_units_environment_is_set_or_refused_never_a_crash(body: str, dropin: str) -> None:
    try:
        text = ue.set_visible_devices(body, "4,5")
    except (ValueError, ParseError):
        return
    try:
        files = ue.environment_file_paths(text, [("/etc/systemd/system/x.service.d/a.conf", dropin)])
        why = ue.visible_devices_problem(text, [("/etc/systemd/system/x.service.d/a.conf", dropin)],
                                         dict.fromkeys(files, "A=1\n"), "4,5")
    except (ValueError, ParseError):
        return
    assert why is None or isinstance(why, str)


@FUZZ
@given(raw=st.one_of(st.binary(max_size=200), nasty_text.map(str.encode),
                     nasty_text.map(lambda t: ("2026-11-28T07:41:13.123456789Z " + t).encode())))
def test_docker_logs_lines_decode_to_clean_events(raw: bytes) -> None:
    follower = LogFollower(object(), container="sglang-new")  # type: ignore[arg-type]
    event = follower._parse(raw)
    assert event is None or isinstance(event.text, str)
    _clean(event.text if event is not None else None)
    if event is not None and event.ts is not None:
        assert DIRTY.search(event.ts) is None
