"""Escape sequences from host data never reach the operator's terminal (issue 21, item 1).

Host strings are cleaned once, where they are read (console/sanitize.py): log lines, GPU
process and device names, unit text, /server_info, file names of a listing, errors. A crafted or
older recording is cleaned as it is read. Checked at each source, in every pane's screenshot of
the live console on a planted host, in `report --format md`, `diff`'s text, and in the bytes
`replay` writes to a pty (OSC 0 sets the title, OSC 52 writes the clipboard).
"""

from __future__ import annotations

import gzip
import json
import os
import pty
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.sanitize import clean_block, clean_json, clean_line, has_control
from tests.kit.figures import record
from tests.kit.pty import read_pty

ROOT = Path(__file__).resolve().parent.parent.parent
TITLE = "\x1b]0;PWNED-TITLE\x07"
CLIP = "\x1b]52;c;UFdORUQtQ0xJUA==\x07"  # base64 of PWNED-CLIP
HOSTILE = [TITLE, CLIP, "\x1b[2J\x1b[H", "\x1b]8;;http://evil/\x1b\\link\x1b]8;;\x1b\\", "\x9d0;C1-TITLE\x9c",
           "\x9b31m", "\x1bc", "\x1bP+q6b64\x1b\\", "\x1b_apc\x1b\\", "\x1b]0;unterminated", "\x07\x08\x7f\x00",
           "\u202ereversed\u202c", "\r\x1b[K"]
BAD_BYTES = (b"\x1b]0;", b"\x1b]52;", b"PWNED-TITLE\x07", b"\x1b]8;;http://evil", b"\xc2\x9d", b"\x1bP+q")


def _no_control(text: str) -> None:
    assert not has_control(text), repr(text)


# -- the cleaning itself ------------------------------------------------------------------------
@pytest.mark.parametrize("seq", HOSTILE)
def test_each_sequence_is_removed_and_the_text_around_it_kept(seq: str) -> None:
    out = clean_line(f"before {seq} after")
    _no_control(out)
    assert out.startswith("before") and ("after" in out or "unterminated" in seq)
    assert "PWNED" not in out and "UFdORUQ" not in out


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12)), max_size=12))
def test_no_control_character_survives_any_mix(parts: list[str]) -> None:
    text = "".join(parts)
    _no_control(clean_line(text))
    _no_control(clean_block(text).replace("\n", "").replace("\t", ""))
    assert clean_line(clean_line(text)) == clean_line(text)


@settings(max_examples=100, deadline=None)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cf", "Cs")), max_size=80))
def test_printable_text_is_left_as_it_is(text: str) -> None:
    assert clean_line(text) == text


def test_a_block_keeps_its_lines_and_json_is_cleaned_at_any_depth() -> None:
    assert clean_block(f"[Unit]\r\nDescription=x{TITLE}\n\tExecStart=/bin/true\n") == \
        "[Unit]\nDescription=x\n\tExecStart=/bin/true\n"
    doc = clean_json({"model_path": f"/m{CLIP}", "nested": [{f"k{TITLE}": [f"v{TITLE}", 3]}]})
    assert doc == {"model_path": "/m", "nested": [{"k": ["v", 3]}]}


# -- at each source -----------------------------------------------------------------------------
def test_a_log_line_is_cleaned_before_it_is_parsed() -> None:
    from console.host.sources.log import parse_line

    event = parse_line(f"[2026-01-01 10:00:00 TP0] ERROR boom{TITLE}{CLIP} api_key=sk-abcdefgh1234")
    _no_control(event.text)
    assert "boom" in event.text and "sk-abcdefgh1234" not in event.text


def test_gpu_process_and_device_names_are_cleaned_in_every_reading() -> None:
    from console.model import GpuDevice, GpuProcess
    from console.host.sources.gpu import GpuSource
    from console.host.transport import LocalTransport

    source = GpuSource(LocalTransport(), local=True)
    gpu = GpuDevice(0, f"H200{TITLE}", f"GPU-1{CLIP}", 1, 2, 3, 4, 5.0, 6.0,
                    processes=(GpuProcess(7, f"python{CLIP}evil", 10),), error=f"x{TITLE}")
    reading = source._status("nvidia-smi", (gpu,), (f"problem{TITLE}",), f"550{TITLE}")
    status = reading.data
    assert status is not None
    g = status.gpus[0]
    assert (g.name, g.uuid, g.processes[0].name, g.error) == ("H200", "GPU-1", "pythonevil", "x")
    assert status.problems == ("problem",) and status.driver == "550"


def test_unit_text_local_or_from_the_host_is_cleaned() -> None:
    from console.domain.analysis.service_report import side_from_text

    side = side_from_text("x.service", f"[Unit]\nDescription=evil{TITLE}\n[Service]\n"
                                       f"Environment=NOTE=a{CLIP}b\nExecStart=/opt/venv/bin/python -m "
                                       f"sglang.launch_server --model-path /m{TITLE}\n")
    _no_control(json.dumps(side.environment, ensure_ascii=False))
    assert side.environment.get("NOTE") == "ab"
    assert side.text is None or not has_control(side.text)


def test_errors_are_cleaned() -> None:
    from console.host.sources.base import describe_error

    assert describe_error(RuntimeError(f"nvidia-smi: {CLIP}failed")) == "RuntimeError: nvidia-smi: failed"


# -- a crafted recording, the report, replay in a pty ----------------------------------------------
def _crafted(tmp_path: Path) -> Path:
    """A recording as an older gpuconsole (or an attacker) could write it: raw host strings."""
    from console.core.recording import Recorder
    from console.core.state import HostState, LogAppended, NoteChanged, ReadingChanged
    from console.model import GpuDevice, GpuProcess, GpuStatus, Reading
    from console.host.parsers.sglang_log import LogEvent
    from console.core.derive.swap_view import AuditAppended, AuditEntry, SwapSetup

    state = HostState("gpu-01", label="gpu-01")
    rec = Recorder(state, tmp_path / "rec").start()
    now = time.time()
    gpu = GpuDevice(0, f"NVIDIA H200{TITLE}", "GPU-1", 1000, 143000, 50, 40, 300.0, 700.0,
                    processes=(GpuProcess(4242, f"python{CLIP}", 900),))
    state.apply(ReadingChanged("gpu-01", "gpu", Reading("gpu", GpuStatus("nvidia-smi", (gpu,)), now)))
    state.apply(LogAppended("gpu-01", tuple(LogEvent("error", f"ERROR boom {s} done", severity="error")
                                            for s in HOSTILE)))
    state.apply(NoteChanged("gpu-01", f"note{TITLE}", f"ana{CLIP}", now))
    state.apply(SwapSetup("gpu-01", "old.service", "new.service", f"Qwen/X{TITLE}", "/shared/m", False, True,
                          False, None))
    state.apply(AuditAppended("gpu-01", AuditEntry("ana", now, "stop_old", f"systemctl stop{CLIP}", 0,
                                                   f"output{TITLE}", 0.5, "")))
    rec.close()
    return rec.path


def test_a_crafted_recording_is_cleaned_as_it_is_read(tmp_path: Path) -> None:
    from console.core import codec
    from console.core.recording import read_recording

    path = _crafted(tmp_path)
    with gzip.open(path, "rb") as fh:
        assert b"\\u001b]52;" in fh.read()  # the file does hold them
    rec = read_recording(path)
    assert len(rec.entries) >= 5 and rec.skipped == 0
    for _t, event in rec.entries:
        _no_control(json.dumps(json.loads(codec.encode_event(event)), ensure_ascii=False).replace("\\n", ""))


def _pty_run(argv: list[str], env: dict[str, str], timeout_s: float = 90) -> bytes:
    """Everything the command writes to its terminal (a pty, as the operator's terminal sees it)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT, close_fds=True)
    os.close(slave)
    out = read_pty(master, timeout_s, proc=proc)
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)
    os.close(master)
    return out


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"),
            "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "50"}


def test_replay_report_and_diff_write_no_escape_sequence_to_the_terminal(tmp_path: Path) -> None:
    path = _crafted(tmp_path)
    env = _env(tmp_path)
    shot = tmp_path / "replay.svg"
    replay = _pty_run([sys.executable, "-m", "console", "--screenshot", str(shot), "--screenshot-after", "3",
                       "replay", str(path)], env)
    assert shot.exists(), replay[-2000:]
    report = _pty_run([sys.executable, "-m", "console", "report", str(path), "--format", "md"], env)
    assert b"Qwen/X" in report, report[-2000:]
    old, new = tmp_path / "old.service", tmp_path / "new.service"
    old.write_text(f"[Unit]\nDescription=old{TITLE}\n[Service]\nExecStart=/opt/venv/bin/python -m "
                   "sglang.launch_server --model-path /m --tp-size 4\n")
    new.write_text(f"[Unit]\nDescription=new{CLIP}\n[Service]\nEnvironment=X=a{TITLE}\nExecStart=/opt/venv/bin/"
                   f"python -m sglang.launch_server --model-path /m{CLIP} --tp-size 8\n")
    diff = _pty_run([sys.executable, "-m", "console", "diff", str(old), str(new)], env)
    assert b"tp-size" in diff, diff[-2000:]
    found_all = []
    for name, out in (("replay", replay), ("report", report), ("diff", diff)):
        found = [bad for bad in BAD_BYTES if bad in out]
        found_all += found
        assert found == [], (name, found)
    record("escape sequences in a crafted recording: replay, report md, diff (pty bytes)",
           tried=len(HOSTILE) + 8, escapes=len(found_all), escaped=0)
    svg = shot.read_text()
    assert "\x1b" not in svg and "PWNED" not in svg and "boom" in svg


# -- the live console on a planted host: every pane -------------------------------------------------
@pytest.fixture
async def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[object]:
    from console.ui.app import ConsoleApp
    from console.demo.hostsim import HostSimulator
    from console.demo.hostsim.scenario import demo_profile, start_scenario
    from console.host.session import HostSession, make_transport

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    sim = HostSimulator(tmp_path / "host")
    await sim.start()
    await start_scenario(sim)
    unit = Path(sim.path("/etc/systemd/system/sglang-qwen397b.service"))
    unit.write_text(unit.read_text().replace("[Service]\n", f"[Service]\nEnvironment=NOTE=unit{TITLE}x\n", 1))
    journal = sim.root / ".sim" / "journal" / "sglang-qwen397b.service.jsonl"
    journal.parent.mkdir(parents=True, exist_ok=True)
    now_us = int(time.time() * 1e6)
    with open(journal, "a", encoding="utf-8") as fh:
        for i, seq in enumerate(HOSTILE):
            fh.write(json.dumps({"__CURSOR": f"s=plant;i={i}", "__REALTIME_TIMESTAMP": str(now_us + i),
                                 "_SYSTEMD_UNIT": "sglang-qwen397b.service", "_PID": "1",
                                 "MESSAGE": f"ERROR planted {seq} line{i}"}) + "\n")
    smi = sim.bin_dir / "nvidia-smi"
    smi.rename(sim.bin_dir / "nvidia-smi.real")
    # every process name the host reports carries an OSC 52 (any user can name a CUDA process)
    smi.write_text('#!/bin/sh\n"$(dirname "$0")/nvidia-smi.real" "$@" | '
                   "sed -u 's/sglang::scheduler_TP/evil\\x1b]52;c;UFdORUQ=\\x07TP/g'\n")
    smi.chmod(0o755)
    # the NVML sampler's JSON (python3 on the host's PATH) carries them escaped, as JSON would
    py = sim.bin_dir / "python3"
    py.write_text(f'#!/bin/sh\n"{sys.executable}" "$@" | '
                  "sed -u 's/sglang::scheduler_TP/evil\\\\u001b]52;c;UFdORUQ=\\\\u0007TP/g'\n")
    py.chmod(0o755)
    profile = demo_profile(sim)
    try:
        yield ConsoleApp.for_session(HostSession(profile, make_transport(profile), demo=True), record=True,
                                     record_dir=tmp_path / "rec")
    finally:
        await sim.stop()


async def test_planted_escape_sequences_reach_no_pane_and_no_recording(planted: object, tmp_path: Path) -> None:
    from console.ui.app import ConsoleApp
    from tests.kit.hosts import wait_for

    app = planted
    assert isinstance(app, ConsoleApp)
    shots = []
    async with app.run_test(size=(160, 50)) as pilot:
        def procs() -> list[str]:
            gpu = app.state.data("gpu")
            return [p.name for g in (gpu.gpus if gpu else ()) for p in g.processes]

        await wait_for(lambda: any("planted" in e.text for e in app.state.log_lines) and procs(), 30)
        await wait_for(lambda: app.state.data("service") is not None, 30)
        await wait_for(lambda: "planted" in app.export_screenshot(), 30, 0.25)  # the panes drew the host's text
        shots.append(app.export_screenshot())
        for key in "123456":
            await pilot.press(key)
            await pilot.pause(0.3)
            shots.append(app.export_screenshot())
            await pilot.press(key)
        names = procs()
        lines = [e.text for e in app.state.log_lines if "planted" in e.text]
    assert names and all(n.startswith("evilTP") for n in names), names
    assert len(lines) == len(HOSTILE) and not any(has_control(t) for t in lines), lines
    blob = "\n".join(shots)
    record("escape sequences planted on the host: every pane, the recording", tried=len(HOSTILE) + len(names) + 1,
           escapes=blob.count("\x1b") + blob.count("\x07"), escaped=0)
    assert "\x1b" not in blob and "\x07" not in blob and "PWNED" not in blob
    assert "planted" in blob
    recordings = list((tmp_path / "rec").glob("*.jsonl.gz"))
    assert recordings
    for path in recordings:
        with gzip.open(path, "rb") as fh:
            raw = fh.read()
        assert b"\\u001b" not in raw and b"\\u0007" not in raw and b"\xc2\x9d" not in raw
