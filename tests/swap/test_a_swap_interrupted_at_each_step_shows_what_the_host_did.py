"""A swap interrupted at each step (its connection dropped, the console closed under it, an
operator acting on the host at the same time): the plan shows what the host did, once, with the
right author, and a late attach and a replay of the recording show the same (issue 33, "Bad input
and faults"). The stop's drop and the console closed after its stop are in
test_observer_writes_the_swaps_facts.py; here the other steps."""

from __future__ import annotations

import json

from console.core.derive.swap_view import SwapStepChanged
from tests.kit.observed import NEW, OLD, T0, ObservedHost

CANCELLED = "cancelled (the console closed)"


def _written(h: ObservedHost, key: str, state: str) -> int:
    """How many times the step was written in this state (a re-read must not write it twice)."""
    return sum(1 for e in h.recorded if isinstance(e, SwapStepChanged) and e.step.key == key
               and e.step.state == state and e.step.ended_at_s is not None)


def _same_everywhere(h: ObservedHost) -> None:
    live, attach, replay = h.views()
    assert live == attach == replay


def _stopped_by_the_console(h: ObservedHost) -> None:
    h.units(T0, "active", "inactive")
    h.at(T0 + 1).intent("stop_old", state="running", detail="", who="ana")
    h.at(T0 + 4).audit("stop_old", f"timeout -k 5 120 systemctl stop -- {OLD}", at=T0 + 4, took=2)
    h.units(T0 + 5, "inactive", "inactive")
    h.at(T0 + 6).intent("stop_old", state="done", detail="stopped")


def test_a_drop_during_the_consoles_start_is_re_read_and_stays_the_consoles() -> None:
    h = ObservedHost()
    _stopped_by_the_console(h)
    h.at(T0 + 10).intent("start_new", state="running", detail="", who="ana")
    h.at(T0 + 31).audit("start_new", f"timeout -k 5 90 systemctl start -- {NEW}", at=T0 + 31, took=20,
                        status=None, output="connection lost")
    h.unit_line(T0 + 11.5, NEW, "started")  # the host started it; the log reached us after the reconnect
    h.units(T0 + 33, "inactive", "active")
    h.ready_line(T0 + 40)
    h.server(T0 + 41, NEW, "ready")
    h.at(T0 + 42).intent("start_new", state="done", detail="ready after systemctl start")
    start = h.state.swap.steps["start_new"]
    assert (start.state, start.who, start.observed) == ("done", "ana", False)
    assert (start.started_at_s, start.ended_at_s) == (T0 + 11, T0 + 40)
    assert "outside the console" not in start.detail
    assert _written(h, "start_new", "done") == 1
    d = h.state.swap.downtime
    assert d.ended_at_s == T0 + 40
    _same_everywhere(h)


def test_the_console_closed_while_its_start_boots_the_host_brings_it_up_as_anas() -> None:
    """The console's start reached the host (its command audited), then the console closed; the
    server went on booting and got ready. The start is ana's, done when the host said ready; it is
    never rewritten as a start outside the console."""
    h = ObservedHost()
    _stopped_by_the_console(h)
    h.at(T0 + 10).intent("start_new", state="running", detail="", who="ana")
    h.at(T0 + 11).audit("start_new", f"timeout -k 5 90 systemctl start -- {NEW}", at=T0 + 11, took=0.5)
    h.units(T0 + 12, "inactive", "active")
    h.at(T0 + 15).intent("start_new", state="failed", detail=CANCELLED)
    h.ready_line(T0 + 40)
    h.server(T0 + 41, NEW, "ready")
    start = h.state.swap.steps["start_new"]
    assert start.who == "ana" and "outside the console" not in start.detail, start
    assert start.state == "done" and start.ended_at_s == T0 + 40, start
    assert h.state.swap.downtime.ended_at_s == T0 + 40
    assert _written(h, "start_new", "done") == 1
    _same_everywhere(h)


def test_an_operator_starting_the_new_unit_while_the_console_drains_is_the_operators() -> None:
    h = ObservedHost()
    h.units(T0, "active", "inactive")
    h.at(T0 + 1).intent("stop_old", state="running", detail="", who="ana")
    h.at(T0 + 4).audit("stop_old", f"timeout -k 5 120 systemctl stop -- {OLD}", at=T0 + 4, took=2)
    h.unit_line(T0 + 6, NEW, "started")
    h.units(T0 + 7, "inactive", "active")  # someone on the host started it while the console drained
    h.at(T0 + 8).intent("stop_old", state="done", detail="stopped")
    h.ready_line(T0 + 30)
    h.server(T0 + 31, NEW, "ready")
    stop, start = h.state.swap.steps["stop_old"], h.state.swap.steps["start_new"]
    assert (stop.who, stop.observed) == ("ana", False)
    assert start.observed and start.who is None and "outside the console" in start.detail
    assert start.state == "done" and start.ended_at_s == T0 + 30
    assert _written(h, "start_new", "done") == 1
    _same_everywhere(h)


UPDATE = "curl -s -X POST http://127.0.0.1:30000/update_weights_from_disk"


def test_an_update_whose_reply_was_lost_is_the_consoles_as_the_servers_log_tells_it() -> None:
    """The update's answer did not come back (the step fails: outcome unknown); the server's log,
    read after the reconnect, says the weights were updated. The plan shows the update done, as
    ana's, with the log's times; never an update seen outside the console."""
    h = ObservedHost(old=NEW, new=NEW)
    h.units(T0, "active", "active")
    h.at(T0 + 1).intent("in_place", state="running", detail="", who="ana")
    h.at(T0 + 30).audit("in_place", UPDATE, at=T0 + 30, took=28.5, status=None, output="connection lost")
    h.at(T0 + 31).intent("in_place", state="failed", detail="the update's answer did not come back")
    h.log(T0 + 3.2, "[2026-12-01 10:00:03] Update engine weights online from disk begin. avail mem=4.26 GB")
    h.log(T0 + 15.7, "[2026-12-01 10:00:15] Update weights end.")
    step = h.state.swap.steps["in_place"]
    assert step.who == "ana" and "outside the console" not in step.detail, step
    assert step.state == "done" and (step.started_at_s, step.ended_at_s) == (T0 + 1.5, T0 + 15.7), step
    d = h.state.swap.downtime
    assert (d.started_at_s, d.ended_at_s) == (T0 + 3.2, T0 + 15.7)
    assert _written(h, "in_place", "done") == 1
    _same_everywhere(h)


def test_an_update_that_failed_on_the_server_stays_failed_and_the_consoles() -> None:
    h = ObservedHost(old=NEW, new=NEW)
    h.units(T0, "active", "active")
    h.at(T0 + 1).intent("in_place", state="running", detail="", who="ana")
    reply = json.dumps({"success": False, "message": "Unexpected key"}) + "\n400"
    h.at(T0 + 5).audit("in_place", UPDATE, at=T0 + 5, took=3, output=reply)
    h.at(T0 + 6).intent("in_place", state="failed", detail="the reply says it failed")
    h.log(T0 + 3, "[2026-12-01 10:00:03] Update engine weights online from disk begin. avail mem=4.26 GB")
    h.log(T0 + 4, "[2026-12-01 10:00:04] Failed to update weights: Unexpected key")
    step = h.state.swap.steps["in_place"]
    assert (step.state, step.who, step.detail) == ("failed", "ana", "the reply says it failed")
    _same_everywhere(h)


def test_the_console_closed_during_the_move_of_traffic_the_host_finishes_no_downtime() -> None:
    """Beside: the console added the new worker and removed the old one, then closed; the old unit
    was stopped on the host (its stop command had gone out). No downtime, the move ana's."""
    h = ObservedHost()
    h.units(T0, "active", "inactive")
    h.at(T0 + 50).intent("switch_traffic", state="running", detail="", who="ana")
    h.at(T0 + 51).audit("switch_traffic", "curl -s -X POST http://127.0.0.1:30100/add_worker", at=T0 + 51,
                        took=0.2, output='{"status": "ok"}\n200')
    h.at(T0 + 52).audit("switch_traffic", "curl -s -X POST http://127.0.0.1:30100/remove_worker", at=T0 + 52,
                        took=0.2, output='{"status": "ok"}\n200')
    h.at(T0 + 53).intent("switch_traffic", state="failed", detail=CANCELLED)
    h.unit_line(T0 + 54, OLD, "stopping")
    h.units(T0 + 60, "inactive", "active")
    moved = h.state.swap.steps["switch_traffic"]
    assert moved.who == "ana" and "outside the console" not in moved.detail, moved
    d = h.state.swap.downtime
    assert d is None or d.start_source.startswith("beside") or d.ended_at_s == d.started_at_s, d
    _same_everywhere(h)
