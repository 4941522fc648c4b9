"""Property-based fuzzing of every parser and decoder of host or server data (issue 15, the suite):
no exception escapes except the documented `ParseError` (and `NotSglang` for a command line that is
not SGLang's), and no input takes over a second.

Inputs are built from the shapes the host really sends (recorded lines, CSV rows, JSON samples),
mutated by hypothesis: numbers replaced with `1e999`, `nan`, 5,000 digits and non-ASCII digits,
nulls where lists are expected, nesting deeper than Python recurses, binary bytes, huge lines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.domain.analysis.download import expected_from_index, summarize
from console.domain.analysis.log_state import LogTracker
from console.domain.analysis.server_status import parse_prometheus
from console.domain.analysis.service_report import side_from_text
from console.domain.bench.store import load_runs
from console.host.hub import _read_cache
from console.host.parsers import ParseError, split_sections
from console.host.parsers.hf_listing import parse_index, parse_listing
from console.host.parsers.host import parse_df, parse_host_summary
from console.host.parsers.nvidia_smi import parse_compute_apps, parse_gpu_csv, parse_gpu_line
from console.host.parsers.nvml import gpus_from_sample, parse_sampler_line
from console.host.parsers.sglang_argv import NotSglang, normalize
from console.host.parsers.sglang_flags import table_from_help
from console.host.parsers.sglang_log import batch_fields, parse_line
from console.host.parsers.systemd import parse_env_file, parse_unit, split_systemd_words
from console.redact import redact_json, redact_text
from console.host.sources.log import LogFollower
from console.host.transport import LocalTransport

DATA = Path(__file__).parent.parent / "data"
# No wall-clock deadline (issue 27): a loaded machine is no parser bug; `_fast` bounds CPU time.
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.filter_too_much])
ALLOWED = (ParseError, NotSglang)

NASTY_NUMBERS = ["1e999", "-1e999", "nan", "inf", "Infinity", "NaN", "9" * 5000, "١٢٣", "²", "1.2.3", "0x10",
                 "", "-", "+", "1_000", " 7 ", "[N/A]", "[GPU requires reset]", "N/A", "\x00", "1e-999", "-0"]
number = st.one_of(st.sampled_from(NASTY_NUMBERS), st.integers().map(str), st.floats(allow_nan=True).map(repr))
text = st.text(max_size=200)
lines = st.lists(st.one_of(text, st.sampled_from(NASTY_NUMBERS)), max_size=20).map("\n".join)

REAL_LOG = [ln for ln in (DATA / "sglang_real_lines.txt").read_text().splitlines() if ln.strip()]


def _fast(fn: Any, *args: Any) -> Any:
    """`fn(*args)`, None for the parsers' own refusals. No clock: a parser that backtracks without
    end is stopped by the suite's per-test timeout (pytest-timeout), which only ever fails."""
    try:
        return fn(*args)
    except ALLOWED:
        return None


def _mutate_numbers(line: str, data: st.DataObject) -> str:
    import re

    return re.sub(r"\d+(?:\.\d+)?", lambda m: data.draw(number) if data.draw(st.booleans()) else m.group(0), line,
                  count=6)


# -- the SGLang log -------------------------------------------------------------------------
@FUZZ
@given(data=st.data(), base=st.sampled_from(REAL_LOG))
def test_log_lines_with_mutated_numbers_never_raise(data: st.DataObject, base: str) -> None:
    line = _mutate_numbers(base, data)
    event = _fast(parse_line, line)
    assert event.text == line
    _fast(batch_fields, event)
    tracker = LogTracker("fuzz")
    _fast(tracker.feed, [event, parse_line(base)])
    tracker.flush()
    tracker.summary()


@FUZZ
@given(line=st.one_of(text, st.binary(max_size=300).map(lambda b: b.decode("utf-8", "replace"))))
def test_arbitrary_log_lines_never_raise(line: str) -> None:
    event = _fast(parse_line, line)
    assert event.text == line and event.severity in ("info", "warning", "error")  # shown whole, with a colour
    tracker = LogTracker("fuzz")
    _fast(tracker.feed, [event])
    tracker.flush()
    summary = tracker.summary()
    assert (len(summary.errors) > 0) == (event.severity == "error" and event.kind != "traceback") \
        or event.kind == "traceback"


def test_a_huge_log_line_is_read_whole() -> None:
    big = _fast(parse_line, "Decode batch. " + ", ".join(f"k{i}: {i}" for i in range(20000)))
    fields = batch_fields(big)
    assert big.kind == "decode" and len(fields) == 20000 and fields["k19999"] == 19999
    long = "[2026-01-01 10:00:00] " + "x" * 1_000_000
    event = _fast(parse_line, long)
    assert (event.kind, event.ts, event.text) == ("line", "2026-01-01 10:00:00", long)


journal_value = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), text),
                             lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(text, c, max_size=4)),
                             max_leaves=10)


@FUZZ
@given(entry=st.one_of(st.dictionaries(st.sampled_from(["MESSAGE", "__CURSOR", "_SYSTEMD_UNIT", "x"]), journal_value),
                       journal_value),
       raw=st.binary(max_size=200))
def test_journal_json_entries_never_raise(entry: Any, raw: bytes) -> None:
    follower = LogFollower(LocalTransport(), units=("a.service",))
    for blob in (json.dumps(entry).encode(), raw, b"[" * 100_000, b'{"MESSAGE": [1, 2, 300, -1, "x"]}'):
        out = _fast(follower._decode, blob)
        assert out is None or isinstance(out, str)
    # What a parser returning None for everything would fail: a message is the message.
    decoded = follower._decode(json.dumps(entry).encode())
    message = entry.get("MESSAGE") if isinstance(entry, dict) else None
    if isinstance(message, str):
        assert decoded == message
    elif isinstance(message, list):  # journald's byte array: the bytes that are bytes
        assert decoded == bytes(b for b in message if isinstance(b, int) and 0 <= b < 256).decode("utf-8", "replace")
    else:
        assert decoded is None
    assert follower._decode(b'{"MESSAGE": [1, 2, 300, -1, "x"]}') == "\x01\x02"  # the bytes that are bytes


# -- nvidia-smi and NVML --------------------------------------------------------------------
GPU_ROW = "0, NVIDIA H200, GPU-3f1c, 41579, 143771, 87, 54, 512.33, 700.00"


@FUZZ
@given(data=st.data())
def test_nvidia_smi_rows_with_nasty_numbers(data: st.DataObject) -> None:
    fields = GPU_ROW.split(", ")
    for i in range(len(fields)):
        if data.draw(st.booleans()):
            fields[i] = data.draw(number)
    row = ", ".join(fields)
    gpu = _fast(parse_gpu_line, row)
    original = GPU_ROW.split(", ")
    if fields[0] == "0":  # the index survived: the row is a GPU, whatever its other fields hold
        assert gpu is not None and gpu.index == 0 and gpu.name == fields[1].strip()
        if fields[3] == original[3]:
            assert gpu.memory_used_mib == 41579
        if fields[7] == original[7]:
            assert gpu.power_w == 512.33
    extra = data.draw(lines)
    csv = _fast(parse_gpu_csv, row + "\n" + extra)
    assert csv is not None
    if gpu is not None and row == row.strip():  # (the CSV reader strips each line: a trailing empty field goes)
        assert csv.gpus[0] == gpu
    # every non-empty line is either a GPU or a problem: nothing is dropped without a word
    assert len(csv.gpus) + len(csv.problems) == sum(1 for x in (row + "\n" + extra).splitlines() if x.strip())
    _fast(parse_compute_apps, f"GPU-3f1c, {data.draw(number)}, python3, {data.draw(number)}\n" + data.draw(lines))


sample_value = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
                         st.floats(allow_nan=True), text, st.lists(st.integers(), max_size=3))


@FUZZ
@given(gpu=st.dictionaries(st.sampled_from(["index", "name", "uuid", "memory_used_mib", "memory_total_mib",
                                            "utilization_pct", "temperature_c", "power_w", "power_limit_w",
                                            "processes", "error"]), sample_value),
       procs=st.one_of(st.none(), st.lists(st.lists(sample_value, min_size=3, max_size=3), max_size=3), text),
       top=st.sampled_from(["gpus", "x"]))
def test_nvml_samples_with_nulls_and_nonsense(gpu: dict[str, Any], procs: Any, top: str) -> None:
    gpu = {"index": 0, **gpu, "processes": procs}
    record = {top: [gpu, None, 3, {"index": True}]}
    line = json.dumps(record)
    parsed = _fast(parse_sampler_line, line)
    gpus, problems = _fast(gpus_from_sample, parsed)
    assert isinstance(problems, tuple)
    if top == "gpus":  # each of the four records is a GPU or a problem said: none vanishes
        assert len(gpus) + len(problems) >= 3 and all(isinstance(g.index, int) for g in gpus)
    for blob in ("Infinity", "[" * 100_000, '{"gpus": ' + "9" * 5000 + "}", '{"gpus": null}', "\x00"):
        record2 = _fast(parse_sampler_line, blob)
        if isinstance(record2, dict):
            _fast(gpus_from_sample, record2)


def test_nvml_processes_null_keeps_the_gpu() -> None:
    gpus, problems = gpus_from_sample(parse_sampler_line(
        '{"gpus": [{"index": 0, "name": "H200", "memory_used_mib": 5, "processes": null}]}'))
    assert len(gpus) == 1 and gpus[0].memory_used_mib == 5 and gpus[0].processes == ()


def test_nvidia_smi_infinite_and_unicode_numbers_are_unknown_not_errors() -> None:
    g = parse_gpu_line("0, NVIDIA H200, GPU-1, 1e999, 143771, ², 54, nan, 700.00")
    assert g is not None and g.memory_used_mib is None and g.utilization_pct is None and g.power_w is None
    assert g.memory_total_mib == 143771
    assert parse_gpu_line("٠, NVIDIA H200, GPU-1, 1, 2, 3, 4, 5, 6") is None


# -- model directory listings and indexes -----------------------------------------------------
@FUZZ
@given(body=st.lists(st.tuples(st.sampled_from(["f", "d", "l", "?", ""]), number, number, text), max_size=8),
       df=lines, extra=text)
def test_directory_listings_never_raise(body: list[tuple[str, str, str, str]], df: str, extra: str) -> None:
    records = "\0".join(f"{k} {s} {m} {p}" for k, s, m, p in body)
    listing = _fast(parse_listing, f"@@df\n{df}\n@@files\n{records}\0\n@@blobs\n{extra}")
    if listing is not None:
        written = {p for _, _, _, p in body}
        assert all(any(f.rel_path in w for w in written) for f in listing.files), listing.files  # nothing made up
        summary = _fast(lambda: summarize(listing, None, model_dir="/m", repo_id=None, now_s=0.0))
        assert summary is None or summary.bytes_done >= 0


index_value = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), text),
                           lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(text, c, max_size=3)),
                           max_leaves=8)


@FUZZ
@given(total=index_value, weight_map=st.one_of(st.dictionaries(text, index_value, max_size=5), index_value))
def test_safetensors_indexes_never_raise(total: Any, weight_map: Any) -> None:
    doc = json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map})
    index = _fast(parse_index, doc)
    if index is not None:
        expected_from_index(index)
    for blob in ('{"metadata": {"total_size": Infinity}, "weight_map": {"a": "b"}}',
                 '{"metadata": {"total_size": NaN}, "weight_map": {}}', "[" * 100_000, "9" * 5000,
                 '{"metadata": {"total_size": ' + "9" * 5000 + '}, "weight_map": {}}'):
        got = _fast(parse_index, blob)
        assert got is None or got.total_size_bytes is None


# -- host summary, sections, Prometheus -----------------------------------------------------
@FUZZ
@given(data=st.data())
def test_host_summary_and_df_never_raise(data: st.DataObject) -> None:
    real = (DATA / "host_summary_debian12.txt").read_text()
    mutated = _mutate_numbers(real, data)
    paths = data.draw(st.lists(text, max_size=3))
    _fast(parse_host_summary, mutated, paths)
    disks = _fast(parse_df, data.draw(lines), paths)
    assert disks is None or all(d.path in paths for d in disks)  # a disk only for a path asked about
    sections = _fast(split_sections, data.draw(lines))
    assert sections is None or all(isinstance(k, str) and isinstance(v, str) for k, v in sections.items())


@FUZZ
@given(body=lines, value=number)
def test_prometheus_text_never_raises(body: str, value: str) -> None:
    got = _fast(parse_prometheus, f"sglang:gen_throughput{{model=\"x\"}} {value}\n{body}", ("sglang:gen_throughput",))
    assert got is None or set(got) <= {"sglang:gen_throughput"}  # only the series asked for
    import math

    assert got is None or all(v is None or math.isfinite(v) for v in got.values())  # no inf/nan shown as a rate


# -- units, argv, --help --------------------------------------------------------------------
unit_line = st.one_of(text, st.sampled_from(["[Service]", "[Unit]", "ExecStart=", "Environment=", "\\",
                                              "ExecStart=/usr/bin/python3 -m sglang.launch_server --tp 2",
                                              "Environment=\"A=1", "EnvironmentFile=-/x", "ExecStart=-@/x y"]))


@FUZZ
@given(body=st.lists(unit_line, max_size=12).map("\n".join))
def test_unit_files_never_raise(body: str) -> None:
    unit = _fast(parse_unit, "[Service]\n" + body)
    if unit is not None:  # at most one command per ExecStart= line, each a command with a program
        assert len(unit.exec_start) <= body.count("ExecStart=") and all(c.argv for c in unit.exec_start)
    words = _fast(split_systemd_words, body)
    assert words is None or all(isinstance(w, str) for w in words)
    _fast(parse_env_file, body)
    _fast(side_from_text, "fuzz.service", "[Service]\n" + body)
    _fast(side_from_text, "fuzz.cmd", body)


@FUZZ
@given(argv=st.lists(st.one_of(text, st.sampled_from(["--tp", "--tp-size", "--api-key", "--log-requests-level",
                                                      "-m", "sglang.launch_server", "python3", "--", "=", "--x="])),
                     max_size=12))
def test_command_lines_never_raise(argv: list[str]) -> None:
    cmd = _fast(normalize, ["python3", "-m", "sglang.launch_server", *argv])
    assert cmd is not None and cmd.launcher == ("python3", "-m", "sglang.launch_server")
    assert all(name.startswith("--") and value.flag == name for name, value in cmd.flags.items())
    _fast(normalize, argv)


@FUZZ
@given(body=lines)
def test_help_text_never_raises(body: str) -> None:
    table = _fast(table_from_help, "  --model-path MODEL_PATH\n" + body, "0.0.1")
    assert table is None or table.lookup("--model-path").spec is not None  # the known first flag is kept


# -- /server_info, the Hub cache, bench.jsonl -----------------------------------------------
@FUZZ
@given(doc=index_value)
def test_server_info_decoding_never_raises(doc: Any) -> None:
    out = _fast(redact_json, doc)
    assert type(out) is type(doc) or out == "‹redacted›"  # the document's shape is kept
    _fast(redact_text, json.dumps(doc))
    nested: Any = {"api_key": "sekrit-value"}
    for _ in range(5000):
        nested = {"a": nested}
    assert "sekrit-value" not in json.dumps(_fast(redact_json, nested))  # cut at depth 64, never shown


@FUZZ
@given(doc=index_value, raw=st.binary(max_size=100))
def test_a_corrupt_hub_cache_is_ignored(tmp_path_factory: pytest.TempPathFactory, doc: Any, raw: bytes) -> None:
    path = tmp_path_factory.mktemp("hub") / "c.json"
    for blob in (json.dumps(doc).encode(), raw, b"[" * 100_000, b'{"fetched_at": 1e999, "siblings": []}'):
        path.write_bytes(blob)
        got = _fast(_read_cache, path)
        assert got is None or isinstance(got.get("siblings"), list)


@FUZZ
@given(doc=index_value, raw=st.binary(max_size=100))
def test_bench_history_never_raises(tmp_path_factory: pytest.TempPathFactory, doc: Any, raw: bytes) -> None:
    path = tmp_path_factory.mktemp("bench") / "bench.jsonl"
    path.write_bytes(json.dumps(doc).encode() + b"\n" + raw + b"\n" + b"9" * 5000 + b"\n" + b"[" * 100_000 + b"\n")
    runs = _fast(load_runs, path)
    assert all(isinstance(r, dict) for r in runs)


@FUZZ
@given(text=st.text(alphabet=st.sampled_from(list("ab \t\n\\'\"$x=-é")), max_size=40))
def test_linear_word_splitting_is_shlex_split(text: str) -> None:
    import shlex

    from console.host.parsers.shell_words import split_words

    try:
        expected: object = shlex.split(text)
    except ValueError:
        expected = ValueError
    try:
        got: object = split_words(text)
    except ValueError:
        got = ValueError
    assert got == expected


def test_word_splitting_and_flag_lookup_are_linear() -> None:
    from console.domain.analysis.service_report import side_from_text

    assert _fast(side_from_text, "x", "x" * 1_000_000).command is None
    side = _fast(side_from_text, "x", "python -m sglang.launch_server --model-path /m " + "--tp 2 " * 5000)
    assert (side.command.value("--model-path"), side.command.value("--tp-size")) == ("/m", "2")


_HOSTILE_BITS = ["\u202e", "\u2066", "\x1b]52;c;eA==\x07", "\x1b[31m", "\x9b", "\x00", "²", "\n200", "\n", "{", "}",
                 '"message": "', "\\u202e", "\\u001b"]


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.one_of(st.sampled_from(_HOSTILE_BITS), st.text(max_size=10)), max_size=14))
def test_a_fast_path_reply_parses_to_a_code_and_clean_text(parts: list[str]) -> None:
    """Property (issue 34): any curl answer splits into an int code or None, and every string the
    fast paths show or record from it (the one-line detail, each string of the JSON) holds no
    control character, escape sequence or bidi override."""
    from console.domain.analysis.host_replies import clean_reply, reply_json, split_reply
    from console.sanitize import clean_json, has_control

    text = "".join(parts)
    code, body = split_reply(text)
    assert code is None or (isinstance(code, int) and 0 <= code <= 999)
    shown = clean_reply(body, 200)
    assert not has_control(shown) and len(shown) <= 200
    reply = reply_json(body)
    assert isinstance(reply, dict)
    assert not has_control(json.dumps(reply, ensure_ascii=False)) and clean_json(reply) == reply
