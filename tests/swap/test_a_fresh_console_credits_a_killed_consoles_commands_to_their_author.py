"""A console killed outright in the middle of its swap, and a fresh console started on the same host
afterwards: the fresh one reads the first one's audit log back (the commands it ran, by whom), so its
plan and its report credit the stop and the start the host went on with to their author and their
commands, never to someone "outside the console". The audit log read back is this user's own local
file: cleaned and redacted again, never run, and not read at all when someone else may write it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from console.core.derive.swap_observer import OUTSIDE
from console.domain.swap.report import ReportBuilder, render_markdown
from tests.kit.observed import NEW, OLD, T0, ObservedHost, console_on

INSTALL = f"install -m 0644 -- /tmp/draft /etc/systemd/system/{NEW} && systemctl daemon-reload"
STOP = f"timeout -k 5 120 systemctl stop -- {OLD}"
START = f"timeout -k 5 90 systemctl start -- {NEW}"


def _killed_mid_swap(audit: Path) -> None:
    """ana's console installs the new unit, stops the old unit and starts the new one, then is killed while it boots."""
    first = ObservedHost()
    ctl = console_on(first, audit)
    ctl.announce()
    first.at(T0 + 3)
    ctl._audit("ana", "install", INSTALL, 0, "", 0.2)
    first.at(T0 + 8)
    ctl._audit("ana", "stop_old", STOP, 0, "", 3.0)
    first.at(T0 + 10)
    ctl._audit("ana", "start_new", START, 0, "", 0.5)


def test_a_fresh_console_credits_the_killed_consoles_stop_and_start_to_ana(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    _killed_mid_swap(audit)
    h = ObservedHost()
    h.at(T0 + 15)
    fresh = console_on(h, audit, who="bob")
    fresh.announce()
    h.units(T0 + 16, "inactive", "active")
    h.gpu(T0 + 16.5, 500, 500)
    h.ready_line(T0 + 30)
    h.server(T0 + 31, NEW, "ready")
    steps = h.state.swap.steps
    for key, command in (("install", INSTALL), ("stop_old", STOP), ("start_new", START)):
        step = steps[key]
        assert step.state == "done" and step.who == "ana" and step.commands == (command,), step
        assert OUTSIDE not in step.detail and "by ana" in step.detail, step.detail
    assert steps["start_new"].ended_at_s == T0 + 30
    assert [(a.who, a.action, a.command) for a in h.state.swap.audit] == [
        ("ana", "install", INSTALL), ("ana", "stop_old", STOP), ("ana", "start_new", START)]
    report = ReportBuilder("h", "h")
    for event in h.recorded:
        report.feed(h.now, event)
    r = report.build()
    rows = {s["key"]: s for s in r["steps"]}
    assert rows["stop_old"]["who"] == rows["start_new"]["who"] == "ana"
    assert [(a["who"], a["command"]) for a in r["audit"]] == [("ana", INSTALL), ("ana", STOP), ("ana", START)]
    md = render_markdown(r)
    assert OUTSIDE not in md and "systemctl stop" in md
    live, attach, replay = h.views()
    assert live == attach == replay


def test_the_audit_log_read_back_is_cleaned_never_another_users_and_only_the_last_swaps(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    rows = [
        {"host": "h", "who": "ana", "at_s": T0 - 7200, "action": "stop_old", "command": "an earlier swap's",
         "exit_status": 0, "output_tail": "", "duration_s": 1.0, "note": ""},
        {"host": "other", "who": "eve", "at_s": T0 + 5, "action": "stop_old", "command": "another host's",
         "exit_status": 0, "output_tail": "", "duration_s": 1.0, "note": ""},
        {"host": "h", "who": "ana\x1b]0;pwned\x07", "at_s": T0 + 8, "action": "stop_old",
         "command": STOP + " # HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrSt", "exit_status": 0,
         "output_tail": "\x1b[31mok", "duration_s": 3.0, "note": "forged"},
        {"host": "h", "who": "ana", "at_s": T0 + 9, "action": "rm -rf /", "command": "not a step",
         "exit_status": 0, "output_tail": "", "duration_s": 1.0, "note": ""},
    ]
    audit.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{not json\n")
    os.chmod(audit, 0o600)
    h = ObservedHost()
    h.at(T0 + 15)
    console_on(h, audit).announce()
    (entry,) = h.state.swap.audit
    assert entry.who == "ana" and entry.output_tail == "ok"
    assert entry.command.startswith(STOP) and "hf_AbCdEfGhIjKlMnOpQrSt" not in entry.command
    assert entry.note != "forged"
    # A file others may write is never read: who ran what cannot be planted by another user
    os.chmod(audit, 0o622)
    h2 = ObservedHost()
    h2.at(T0 + 15)
    ctl = console_on(h2, audit)
    ctl.announce()
    assert not h2.state.swap.audit
    assert any("not read back" in text for _, text in ctl.notices)


def test_a_read_back_stop_the_host_contradicts_dates_nothing(tmp_path: Path) -> None:
    """The old service serves again (undone by hand since): the read-back stop opens no downtime."""
    audit = tmp_path / "audit.jsonl"
    _killed_mid_swap(audit)
    h = ObservedHost()
    h.at(T0 + 15)
    console_on(h, audit).announce()
    h.units(T0 + 16, "active", "inactive")
    assert h.state.swap.downtime is None and h.state.swap.steps["stop_old"].state == "pending"
