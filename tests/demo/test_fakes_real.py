"""Each fake tool of the simulator against real output of the tool it stands for (issue 27).

The real outputs are recorded in tests/data with their provenance (PROVENANCE.md): journald's JSON
entries and byte-array messages, `systemctl show`'s empty properties and local time, `systemctl
is-active`'s quiet mode, SGLang's log prefixes and its /metrics text. Each test states what the
real output shows, checks that on the recording, then checks the fake against the same rule."""

from __future__ import annotations

import io
import json
import os
import re
import time
from contextlib import redirect_stdout
from pathlib import Path
from types import SimpleNamespace

import pytest

from console.domain.analysis.server_status import parse_prometheus
from console.demo.hostsim import fake_journalctl, tools
from console.host.parsers.sglang_log import parse_line
from console.host.sources.log import LogFollower
from console.host.sources.server import METRICS
from console.host.transport import LocalTransport
from tests.kit.hosts import DATA

JOURNAL = json.loads((DATA / "journalctl_real.json").read_text())
SYSTEMCTL = json.loads((DATA / "systemctl_real.json").read_text())
REAL_LOG = (DATA / "sglang_real_lines.txt").read_text().splitlines()
ALWAYS = ("__CURSOR", "__REALTIME_TIMESTAMP", "__MONOTONIC_TIMESTAMP", "_BOOT_ID")  # journalctl(1), --output-fields
SHORT = re.compile(r"^[A-Z][a-z]{2} \d{2} \d{2}:\d{2}:\d{2} \S+ [^\s\[]+\[\d+\]: ")


# -- journalctl ---------------------------------------------------------------------------------
def _host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, messages: list[str], unit: str = "sglang.service") -> int:
    """A simulated host's journal with `messages`, stored as the simulator stores them; returns the
    first entry's time (µs)."""
    journal = tmp_path / ".sim" / "journal"
    journal.mkdir(parents=True)
    start_us = int(time.time() * 1e6) - 60_000_000
    with open(journal / f"{unit}.jsonl", "w", encoding="utf-8") as fh:
        for i, message in enumerate(messages):
            fh.write(json.dumps({"__CURSOR": f"s=gpusim;u={unit};t={start_us + i};p={i}",
                                 "__REALTIME_TIMESTAMP": str(start_us + i * 1_000_000), "_SYSTEMD_UNIT": unit,
                                 "_PID": "4242", "_HOSTNAME": "gpu-sim-01", "SYSLOG_IDENTIFIER": "python",
                                 "MESSAGE": message}) + "\n")
    monkeypatch.setenv("GPUSIM_ROOT", str(tmp_path))
    return start_us


def _journalctl(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = fake_journalctl.main(list(args))
    return code, out.getvalue()


def _cursor_fields(cursor: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in cursor.split(";"))


def test_real_journal_cursors_name_the_boot_and_both_clocks() -> None:
    """The recorded entries (systemd PR #33021, issue #987): b= is _BOOT_ID, t= and m= are the
    realtime and monotonic timestamps in hex."""
    for key in ("export_entry_systemd_pr_33021", "json_pretty_entry_systemd_issue_987"):
        entry = JOURNAL[key]
        c = _cursor_fields(entry["__CURSOR"])
        assert fake_journalctl.REAL_CURSOR.match(entry["__CURSOR"]), entry["__CURSOR"]
        assert c["b"] == entry["_BOOT_ID"]
        assert int(c["t"], 16) == int(entry["__REALTIME_TIMESTAMP"])
        assert int(c["m"], 16) == int(entry["__MONOTONIC_TIMESTAMP"])


def test_the_fake_journal_json_carries_the_fields_and_cursor_shape_of_a_real_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _host(tmp_path, monkeypatch, ["Load weight begin. avail mem=94.21 GB", "second"])
    code, out = _journalctl("--unit=sglang.service", "-o", "json", "--output-fields=MESSAGE,_SYSTEMD_UNIT",
                            "--no-pager", "-n", "5")
    assert code == 0
    entries = [json.loads(line) for line in out.splitlines()]
    assert [e["MESSAGE"] for e in entries] == ["Load weight begin. avail mem=94.21 GB", "second"]
    real = JOURNAL["export_entry_systemd_pr_33021"]
    for e in entries:
        assert set(e) == {*ALWAYS, "MESSAGE", "_SYSTEMD_UNIT"}  # the always-printed four, and those asked for
        assert all(k in real for k in ALWAYS)
        c = _cursor_fields(e["__CURSOR"])
        assert fake_journalctl.REAL_CURSOR.match(e["__CURSOR"]), e["__CURSOR"]
        assert c["b"] == e["_BOOT_ID"] and int(c["t"], 16) == int(e["__REALTIME_TIMESTAMP"])
        assert int(c["m"], 16) == int(e["__MONOTONIC_TIMESTAMP"]) > 0
        assert all(isinstance(e[k], str) and e[k] for k in ALWAYS)  # journald prints numbers as strings too
    assert entries[0]["_BOOT_ID"] == entries[1]["_BOOT_ID"] and entries[0]["__CURSOR"] != entries[1]["__CURSOR"]
    # The same host answers with the same boot and cursors on the next run (the console resumes by them).
    assert _journalctl("--unit=sglang.service", "-o", "json", "-n", "5")[1].splitlines()[0].startswith(
        out.splitlines()[0][:60])


@pytest.mark.parametrize("sample", JOURNAL["byte_array_messages"], ids=lambda s: s["source"])
def test_the_fake_journal_prints_a_message_with_control_characters_as_bytes_as_journald_does(
        sample: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tstack/lnav #1087 (escape sequences) and vectordotdev/vector #1714 (a carriage return): real
    journalctl printed these messages as arrays of bytes. The same text, logged on the simulated
    host, comes out of the fake as the same array; the console decodes it back."""
    text = bytes(sample["MESSAGE"]).decode()  # type: ignore[arg-type]
    _host(tmp_path, monkeypatch, [text, "plain"])
    _, out = _journalctl("-u", "sglang", "-o", "json", "--output-fields=MESSAGE,_SYSTEMD_UNIT", "-n", "2")
    first, second = (json.loads(line) for line in out.splitlines())
    assert first["MESSAGE"] == sample["MESSAGE"] and second["MESSAGE"] == "plain"
    follower = LogFollower(LocalTransport(), units=("sglang.service",))
    assert follower._decode(out.splitlines()[0].encode()) == text


def test_the_fake_journals_short_output_is_syslog_style_local_time(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    real = JOURNAL["short_output_systemd_issue_30288"]
    assert SHORT.match(real), real
    start_us = _host(tmp_path, monkeypatch, ["hello"])
    _, out = _journalctl("-u", "sglang.service", "-n", "1")
    assert SHORT.match(out), out
    local = time.strftime("%b %d %H:%M:%S", time.localtime(start_us / 1e6))
    assert out == f"{local} gpu-sim-01 python[4242]: hello\n"
    _, iso = _journalctl("-u", "sglang.service", "-n", "1", "-o", "short-iso")
    assert iso.startswith(time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(start_us / 1e6)))


def test_nothing_to_show_says_no_entries_with_a_unit_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """systemd issue #38121: `journalctl --until today --lines 5` prints `-- No entries --`; `-q`
    hides it (systemd PR #1927)."""
    assert JOURNAL["no_entries_systemd_issue_38121"]["stdout"] == "-- No entries --"
    _host(tmp_path, monkeypatch, ["x"])
    assert _journalctl("-u", "other.service", "-n", "5") == (0, "-- No entries --\n")
    # Only in the text modes: with -o json real journalctl prints nothing (tests/data/real/journal_no_entries.json)
    assert _journalctl("-u", "other.service", "-n", "5", "-o", "json") == (0, "")
    assert _journalctl("-u", "other.service", "-n", "5", "-q") == (0, "")
    follower = LogFollower(LocalTransport(), units=("other.service",))
    assert follower._decode(b"-- No entries --") is None  # the console does not show it as a log line


def test_an_unknown_cursor_seeks_to_its_time_and_a_malformed_one_fails(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    start_us = _host(tmp_path, monkeypatch, ["one", "two", "three"])
    _, out = _journalctl("-u", "sglang.service", "-o", "json", "-n", "3")
    cursors = [json.loads(line)["__CURSOR"] for line in out.splitlines()]
    assert [json.loads(x)["MESSAGE"] for x in _journalctl("-u", "sglang.service", "-o", "json",
                                                          f"--after-cursor={cursors[0]}")[1].splitlines()] == ["two", "three"]
    # An entry no longer in the journal (rotated away) between "one" and "two": journald seeks to
    # its time, it does not replay everything.
    gone = re.sub(r";t=[0-9a-f]+;", f";t={start_us + 500_000:x};", cursors[0]).replace(";x=", ";x=f")[:-1]
    assert fake_journalctl.REAL_CURSOR.match(gone)
    code, later = _journalctl("-u", "sglang.service", "-o", "json", f"--cursor={gone}")
    assert code == 0 and [json.loads(x)["MESSAGE"] for x in later.splitlines()] == ["two", "three"]
    # --after-cursor steps past the first entry that survived, as journalctl 252 does
    # (tests/data/real/journal_vacuumed_cursor.json): the console resumes with --cursor instead.
    code, skipped = _journalctl("-u", "sglang.service", "-o", "json", f"--after-cursor={gone}")
    assert code == 0 and [json.loads(x)["MESSAGE"] for x in skipped.splitlines()] == ["three"]
    capsys.readouterr()
    code, nothing = _journalctl("-u", "sglang.service", "-o", "json", "--after-cursor=garbage")
    assert (code, nothing) == (1, "") and "Failed to seek to cursor" in capsys.readouterr().err
    assert "Failed to seek to cursor" in JOURNAL["seek_failure_source"]


# -- systemctl ---------------------------------------------------------------------------------
def _systemctl_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, units: dict[str, dict[str, object]]) -> None:
    (tmp_path / ".sim").mkdir(parents=True, exist_ok=True)
    (tmp_path / ".sim" / "units.json").write_text(json.dumps(units))
    (tmp_path / "etc" / "systemd" / "system").mkdir(parents=True, exist_ok=True)
    for name in units:
        (tmp_path / "etc" / "systemd" / "system" / name).write_text("[Service]\nExecStart=/bin/true\n")
    monkeypatch.setenv("GPUSIM_ROOT", str(tmp_path))
    monkeypatch.delenv("GPUSIM_DRIVEN", raising=False)


def _systemctl(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = tools._systemctl(list(args))
    return code, out.getvalue()


def test_systemctl_show_prints_an_asked_for_property_even_when_empty(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    real = SYSTEMCTL["show_empty_property"]["stdout"]
    assert real == "ExecMainStartTimestamp="
    _systemctl_host(tmp_path, monkeypatch, {"old.service": {"active": "inactive", "sub": "dead"}})
    assert _systemctl("show", "-p", "ExecMainStartTimestamp", "old.service") == (0, real + "\n")
    # A property the simulation does not model is such an empty one, not dropped.
    code, out = _systemctl("show", "-p", "ActiveState,CPUWeight", "old.service")
    assert out.splitlines() == ["ActiveState=inactive", "CPUWeight="]
    # NRestarts and Result are always valued, and systemd answers in its own order, not the asked
    # one (tests/data/real/systemd_systemctl.json).
    code, out = _systemctl("show", "-p", "ActiveState,NRestarts,Result", "old.service")
    assert out.splitlines() == ["Result=success", "NRestarts=0", "ActiveState=inactive"]


def test_systemctl_show_labels_local_time_with_the_local_zone(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    stamp = re.compile(r"^ExecMainStartTimestamp=[A-Z][a-z]{2} \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} ([A-Z]{2,5})$")
    zones = [stamp.match(s["stdout"]).group(1) for s in SYSTEMCTL["show_timestamps"]]  # type: ignore[union-attr]
    assert zones == ["BST", "UTC"]  # real hosts label their own zone
    since = 1_782_000_000.0  # a summer date: London is on BST
    _systemctl_host(tmp_path, monkeypatch, {"new.service": {"active": "active", "sub": "running", "pid": 77,
                                                            "since": since}})
    monkeypatch.setenv("TZ", "Europe/London")
    time.tzset()
    try:
        _, out = _systemctl("show", "-p", "ExecMainStartTimestamp", "new.service")
    finally:
        monkeypatch.undo()
        time.tzset()
    m = stamp.match(out.strip())
    assert m is not None and m.group(1) == "BST", out
    assert time.strftime("%H:%M:%S", time.gmtime(since + 3600)) in out  # local time, one hour ahead of UTC


def test_systemctl_is_active_quiet_prints_nothing_and_answers_every_unit(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    assert "if (!arg_quiet) puts(state)" in SYSTEMCTL["is_active_source"]["code"]
    _systemctl_host(tmp_path, monkeypatch, {"a.service": {"active": "inactive"}, "b.service": {"active": "active"}})
    assert _systemctl("is-active", "--quiet", "--", "a.service") == (3, "")
    assert _systemctl("is-active", "-q", "b.service") == (0, "")
    # one line per unit; 0 when at least one is active (3 when none is)
    assert _systemctl("is-active", "a.service", "b.service") == (0, "inactive\nactive\n")
    assert _systemctl("is-active", "a.service", "c.service") == (3, "inactive\ninactive\n")


# -- SGLang's log --------------------------------------------------------------------------------
def _fake_sglang(tp: int) -> object:
    from console.demo.hostsim.fake_sglang.launch_server import Server

    args = SimpleNamespace(tp_size=tp, served_model_name="m", model_path="/m", speculative_algorithm=None)
    return Server(args, ["python3", "-m", "sglang.launch_server"])


def _logged(server: object, message: str, **kw: object) -> list[str]:
    out = io.StringIO()
    with redirect_stdout(out):
        server.log(message, **kw)  # type: ignore[attr-defined]
    return out.getvalue().splitlines()


def test_real_sglang_http_lines_carry_no_rank_and_scheduler_lines_do() -> None:
    """tests/data/sglang_real_lines.txt: uvicorn's and the access lines (10, 11, 19, 20) have no rank;
    the scheduler's lines (9, 13, 17, 18) have one (TP>1 or DP attention)."""
    for i in (9, 10, 18, 19):
        assert parse_line(REAL_LOG[i]).ranks == "" and "INFO:" in REAL_LOG[i], REAL_LOG[i]
    for i in (8, 12, 16, 17):
        assert parse_line(REAL_LOG[i]).ranks.endswith("TP0"), REAL_LOG[i]


@pytest.mark.parametrize("message", ["INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
                                     'INFO:     127.0.0.1:40052 - "GET /model_info HTTP/1.1" 200 OK',
                                     "The server is fired up and ready to roll!",
                                     "server_args=ServerArgs(model_path='/m', tp_size=4)"])
def test_the_fake_sglangs_http_process_lines_carry_no_rank(message: str) -> None:
    lines = _logged(_fake_sglang(4), message)
    assert len(lines) == 1 and parse_line(lines[0]).ranks == "", lines
    assert re.match(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\] ", lines[0])


def test_the_fake_sglangs_scheduler_lines_carry_the_rank_as_real_ones_do() -> None:
    lines = _logged(_fake_sglang(4), "Load weight begin. avail mem=94.21 GB", all_ranks=True)
    assert [parse_line(x).ranks for x in lines] == ["TP0", "TP1", "TP2", "TP3"]
    decode = _logged(_fake_sglang(4), "Decode batch, #running-req: 1, #queue-req: 0")
    assert [parse_line(x).ranks for x in decode] == ["TP0"]  # batch stats: the stats rank only
    # TP=1: the scheduler's prefix names no TP rank (SGLang adds " TP{n}" only if tp_size > 1)
    assert [parse_line(x).ranks for x in _logged(_fake_sglang(1), "Load weight begin. avail mem=94.21 GB")] == [""]


# -- SGLang's /metrics -------------------------------------------------------------------------
def _metric_types(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE)}


def _label_keys(text: str, metric: str) -> set[str]:
    m = re.search(rf"^{re.escape(metric)}\{{([^}}]*)\}} ", text, re.MULTILINE)
    assert m is not None, metric
    return {pair.split("=", 1)[0] for pair in m.group(1).split(",")}


def test_the_fake_sglangs_metrics_match_the_real_ones_the_console_reads() -> None:
    """sgl-project/sglang PRs #4444 and #1853 (tests/data/sglang_metrics_real.txt): each metric the
    console reads that the real text has, the fake has too, of the same type and with the real
    label keys; both parse the same way."""
    real = (DATA / "sglang_metrics_real.txt").read_text()
    fake = _fake_sglang(4).metrics()  # type: ignore[attr-defined]
    real_types, fake_types = _metric_types(real), _metric_types(fake)
    shared = [m for m in (*METRICS, "sglang:max_total_num_tokens", "sglang:prompt_tokens_total") if m in real_types]
    assert {"sglang:num_running_reqs", "sglang:token_usage"} <= set(shared)
    for metric in shared:
        assert fake_types.get(metric) == real_types[metric], metric
    assert _label_keys(real, "sglang:num_running_reqs") <= _label_keys(fake, "sglang:num_running_reqs")
    assert set(parse_prometheus(real, tuple(shared))) == set(shared)
    assert set(parse_prometheus(fake, tuple(shared))) == set(shared)


def test_no_fake_writes_into_the_real_home() -> None:
    assert Path(os.environ["HOME"]).name == "home"  # conftest's own (the fakes above ran under it)
