"""The swap's data without a host: its events through the codec, the actions' commands."""

from __future__ import annotations

import json
import shlex

import pytest

from console.core.codec import decode_event, encode_event
from console.core.state import HostState
from console.domain.swap import actions as act
from console.core.derive.swap_view import (
    AuditAppended,
    AuditEntry,
)
from tests.kit.swap import EVENTS


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_swap_events_round_trip_through_the_codec_and_reach_the_state(event: object) -> None:
    assert decode_event(encode_event(event)) == event  # type: ignore[arg-type]
    state = HostState("h")
    state.apply(event)  # type: ignore[arg-type]
    assert state.version == 1


def test_the_state_keeps_the_plan_the_gate_the_clock_and_the_audit() -> None:
    state = HostState("h")
    for e in EVENTS:
        state.apply(e)  # type: ignore[arg-type]
    swap = state.swap
    assert swap.steps["stop_old"].state == "done" and swap.steps["stop_old"].duration_s == 1.5
    assert [c.name for c in swap.gate] == ["download", "fit"] and swap.gate[1].passes and not swap.gate[0].passes
    assert swap.downtime_s(now_s=999.0) == 161.0
    assert swap.approvals["r1"].decided_by == "ben" and not swap.pending_approvals
    assert swap.audit[-1].who == "ana" and swap.setup is not None and swap.setup.busy == "stop_old"


def test_every_value_in_an_action_is_quoted_and_cannot_be_read_as_an_option() -> None:
    a = act.download("Qwen/Qwen3.5-122B-A10B", "/shared/models/it's here")
    script = a.commands[0].script
    assert "--local-dir '/shared/models/it'\"'\"'s here' -- Qwen/Qwen3.5-122B-A10B" in script
    assert "timeout -k 5 30 systemd-run" in script and "setsid nohup" in script
    for bad in ("-rf", "../x", "x/../../y", "a b", "Qwen/x;rm"):
        with pytest.raises(act.ActionError):
            act.download(bad, "/shared/m")
    with pytest.raises(act.ActionError):
        act.download("Qwen/x", "relative/dir")
    with pytest.raises(act.ActionError):
        act.stop_service("-H.service")
    stop = act.stop_service("sglang-qwen397b.service").commands[0].script
    assert shlex.split(stop) == ["timeout", "-k", "5", "120", "systemctl", "stop", "--", "sglang-qwen397b.service"]
    install = act.install_unit("new.service", "[Service]\nExecStart=/bin/true\n", "20261130T150000Z")
    assert install.write is not None and install.write.temp_path == "/etc/systemd/system/.new.service.gpuconsole-new"
    lines = install.display()
    assert lines[0].startswith("sftp put /etc/systemd/system/.new.service.gpuconsole-new")
    assert "cp -p -- /etc/systemd/system/new.service /etc/systemd/system/new.service.bak-20261130T150000Z" in lines[1]
    assert "mv -f -- /etc/systemd/system/.new.service.gpuconsole-new /etc/systemd/system/new.service" in lines[1]
    assert "timeout -k 5 60 systemctl daemon-reload" in lines[1]
    rb = act.rollback("new.service", "old.service")
    assert [c.purpose for c in rb.commands] == ["stop new.service", "start old.service"]


def _recording(tmp_path, events):  # type: ignore[no-untyped-def]
    from console.core.recording import Recorder

    state = HostState("gpu-01", label="gpu-01")
    rec = Recorder(state, tmp_path).start()
    for e in events:
        state.apply(e)
    rec.close()
    return rec.path


def test_report_cli_renders_a_recording_and_refuses_what_is_not_one(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from console.cli.main import main

    path = _recording(tmp_path, [EVENTS[-1], EVENTS[0], EVENTS[2], EVENTS[4], EVENTS[1]])
    assert main(["report", str(path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["old_new"]["old_unit"] == "old.service" and out["timing"]["downtime_s"] == 161.0
    assert {s["key"]: s["state"] for s in out["steps"]}["stop_old"] == "done" and out["audit"][0]["who"] == "ana"
    assert main(["report", str(path), "--format", "html", "-o", str(tmp_path / "r.html")]) == 0
    assert "<h2>Audit log</h2>" in (tmp_path / "r.html").read_text()
    bogus = tmp_path / "not.jsonl.gz"
    bogus.write_text("hello")
    assert main(["report", str(bogus)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuconsole: ") and err.count("\n") == 1 and "Traceback" not in err
    empty = _recording(tmp_path / "e", [])
    assert main(["report", str(empty)]) == 2
    assert "no swap in this recording" in capsys.readouterr().err


def test_the_report_redacts_secrets_that_reached_an_audit_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from console.domain.swap.report import render, report_from_recording

    leak = AuditAppended("h", AuditEntry("ana", 1.0, "download", "HF_TOKEN=hf_abcdefghijklmnop1234 hf download",
                                         0, "token=hf_abcdefghijklmnop1234", 0.1))
    path = _recording(tmp_path, [EVENTS[-1], leak])
    report = report_from_recording(path)
    for fmt in ("md", "html", "json"):
        assert "hf_abcdefghijklmnop1234" not in render(report, fmt)


async def test_a_streams_stderr_written_after_its_stdout_closed_is_there_when_the_lines_end() -> None:
    """Found while running the swap's sshd tests before test_transport's stream test: stderr can
    arrive after stdout's end (and the exit status), so the tail read right then was empty."""
    from console.host.transport.local import LocalTransport

    t = LocalTransport()
    try:
        stream = await t.stream("echo one; exec 1>&-; sleep 0.3; echo oops >&2; exit 3")
        lines = [line async for line in stream]
        assert lines == [b"one"] and "oops" in stream.stderr_tail
        await stream.close()
    finally:
        await t.close()
