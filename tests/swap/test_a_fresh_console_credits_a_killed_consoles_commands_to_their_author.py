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
from console.core.derive.swap_view import SwapStepChanged
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


# -- a console killed in the middle of the beside path's traffic switch -------------------------------
ROUTER = "http://127.0.0.1:30100"
NEW_WORKER, OLD_WORKER = "http://127.0.0.1:30001", "http://127.0.0.1:30000"
ADD = f"timeout -k 5 60 curl -s -X POST -- '{ROUTER}/add_worker?url={NEW_WORKER}'"
REMOVE = f"timeout -k 5 60 curl -s -X POST -- '{ROUTER}/remove_worker?url={OLD_WORKER}'"
BY_ANA = "by ana from a console that ended: its audit log"


def _killed_mid_switch(audit: Path, *, removed: bool) -> None:
    """ana's console started the new server beside the old one, asked the router to add it (and to
    remove the old worker), then was killed before its next command."""
    first = ObservedHost()
    ctl = console_on(first, audit)
    ctl.announce()
    first.at(T0 + 3)
    ctl._audit("ana", "beside", f"timeout -k 5 90 systemctl start -- {NEW}", 0, "", 0.5)
    first.at(T0 + 40)
    ctl._audit("ana", "switch_traffic", ADD, 0, f"Successfully added worker: {NEW_WORKER}\n200", 0.8)
    if removed:
        first.at(T0 + 42)
        ctl._audit("ana", "switch_traffic", REMOVE, 0, f"Successfully removed worker: {OLD_WORKER}\n200", 0.3)


def _fresh_console(audit: Path) -> ObservedHost:
    h = ObservedHost()
    h.at(T0 + 50)
    console_on(h, audit, who="bob").announce()
    h.units(T0 + 51, "active", "active", new_port=30001)
    return h


def _switch_writes(h: ObservedHost) -> list[SwapStepChanged]:
    return [e for e in h.recorded if isinstance(e, SwapStepChanged) and e.step.key == "switch_traffic"]


def test_a_fresh_console_shows_the_routers_add_done_at_its_time_and_the_remove_not_done(tmp_path: Path) -> None:
    """Killed after the add, before the remove: the router's own record (its log's line at its
    time, its worker list with both workers) says the add was done and the remove not; the step is
    ana's, from her console's audit log, with that one command."""
    audit = tmp_path / "audit.jsonl"
    _killed_mid_switch(audit, removed=False)
    h = _fresh_console(audit)
    for at in (T0 + 52, T0 + 57, T0 + 62):  # the router polled again and again: written once
        h.router(at, [(T0 + 20, "added", OLD_WORKER), (T0 + 39, "added", NEW_WORKER)], [OLD_WORKER, NEW_WORKER])
    step = h.state.swap.steps["switch_traffic"]
    assert (step.state, step.who, step.commands) == ("running", "ana", (ADD,)), step
    assert (step.started_at_s, step.ended_at_s) == (T0 + 39, None)  # the router's time, not the reply's (T0 + 40)
    assert f"the router added {NEW_WORKER} 10:00:39" in step.detail and BY_ANA in step.detail, step.detail
    assert "not removed" in step.detail and "removed http" not in step.detail and OUTSIDE not in step.detail
    assert len(_switch_writes(h)) == 1
    live, attach, replay = h.views()
    assert live == attach == replay


def _no_downtime_by_ana(h: ObservedHost, stopped_at: float) -> None:
    """The beside path's downtime, written as for the console's own switch: an instant (none) at the
    old server's stop, its author the console that ended."""
    d = h.state.swap.downtime
    assert d is not None and d.started_at_s == d.ended_at_s == stopped_at, d
    assert BY_ANA in d.start_source and OUTSIDE not in d.start_source, d
    assert h.state.swap.paths["outcome"].data()["downtime_s"] == 0.0


def test_a_fresh_console_shows_both_router_moves_once_each_never_doubled(tmp_path: Path) -> None:
    """Killed after both moves: each is shown once, at the router's time; the old server's stop
    later ends the step (no downtime), the moves still once each."""
    audit = tmp_path / "audit.jsonl"
    _killed_mid_switch(audit, removed=True)
    h = _fresh_console(audit)
    moves = [(T0 + 39, "added", NEW_WORKER), (T0 + 41, "removed", OLD_WORKER)]
    for at in (T0 + 52, T0 + 57):
        h.router(at, moves, [NEW_WORKER])
    step = h.state.swap.steps["switch_traffic"]
    assert (step.state, step.who, step.commands) == ("running", "ana", (ADD, REMOVE)), step
    assert step.started_at_s == T0 + 39 and BY_ANA in step.detail, step
    assert step.detail.count("added") == 1 and step.detail.count("removed") == 1, step.detail
    assert f"removed {OLD_WORKER} 10:00:41" in step.detail and "not stopped" in step.detail
    assert len(_switch_writes(h)) == 1
    h.units(T0 + 70, "inactive", "active", new_port=30001)  # the old server stopped on the host since
    h.router(T0 + 72, moves, [NEW_WORKER])
    step = h.state.swap.steps["switch_traffic"]
    assert (step.state, step.who, step.started_at_s, step.ended_at_s) == ("done", "ana", T0 + 39, T0 + 70), step
    assert step.detail.count("added") == 1 and step.detail.count("removed") == 1, step.detail
    assert [e.step.state for e in _switch_writes(h)] == ["running", "done"]
    _no_downtime_by_ana(h, T0 + 70)
    live, attach, replay = h.views()
    assert live == attach == replay


def test_a_fresh_console_after_the_switchs_stop_shows_the_beside_path_done_never_a_restart(tmp_path: Path) -> None:
    """Killed after the old server's stop (the switch's last act): the fresh console's first reading
    finds the old one stopped and the new one serving. That is the beside path, done, no downtime —
    never a stop and start "outside the console" with a downtime left open — with the router's moves
    once each, whichever of the router and the service is read first."""
    stop = f"timeout -k 5 120 systemctl stop -- {OLD}"
    moves = [(T0 + 39, "added", NEW_WORKER), (T0 + 41, "removed", OLD_WORKER)]
    for router_first in (False, True):
        audit = tmp_path / f"audit-{router_first}.jsonl"
        _killed_mid_switch(audit, removed=True)
        first = ObservedHost()
        first.at(T0 + 45)
        console_on(first, audit)._audit("ana", "switch_traffic", stop, 0, "", 2.0)
        h = ObservedHost()
        h.at(T0 + 50)
        console_on(h, audit, who="bob").announce()
        if router_first:
            h.router(T0 + 50.5, moves, [NEW_WORKER])
        h.units(T0 + 51, "inactive", "active", new_port=30001)
        h.router(T0 + 52, moves, [NEW_WORKER])
        s = h.state.swap.steps
        assert (s["beside"].state, s["beside"].who, s["beside"].started_at_s) == ("done", "ana", T0 + 2.5), s["beside"]
        switch = s["switch_traffic"]
        assert (switch.state, switch.who, switch.commands) == ("done", "ana", (ADD, REMOVE, stop)), switch
        assert (switch.started_at_s, switch.ended_at_s) == (T0 + 39, T0 + 43), switch  # the router's add, the stop
        assert switch.detail.count("added") == 1 and switch.detail.count("removed") == 1, switch.detail
        assert BY_ANA in switch.detail and OUTSIDE not in switch.detail, switch.detail
        assert s["stop_old"].state == s["start_new"].state == "skipped", (s["stop_old"], s["start_new"])
        _no_downtime_by_ana(h, T0 + 43)
        live, attach, replay = h.views()
        assert live == attach == replay
