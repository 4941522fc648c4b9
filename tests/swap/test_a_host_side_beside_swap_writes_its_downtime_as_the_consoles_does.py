"""The beside path run by an operator on the host (the new unit started on other GPUs and another
port, the router's workers moved by hand, no console action) against the same swap run by the
console: the observer, the one writer of the swap's facts, writes the downtime from the host's facts
for both (the new server's ready line, the router's moves in its log, the old server's end), so the
report gives the same figure, the host-side one with its author ("outside the console"). The switch
seen on the host is done once the router sends all traffic to the new server (its add, then the old
worker's removal), whether or not the operator ever stops the old server (kept warm for a rollback);
the live plan, a console attached late, a replay and the report agree."""

from __future__ import annotations

import json

import pytest

from console.core.derive.swap_observer import OUTSIDE, path_summary
from console.core.events import PathEvent
from console.domain.swap.report import headline
from tests.kit.observed import NEW, OLD, T0, ObservedHost

OLD_URL, NEW_URL = "http://127.0.0.1:30000", "http://127.0.0.1:30001"
STARTED, READY, ADDED, REMOVED, STOPPING, STOPPED = T0 + 2, T0 + 25, T0 + 30, T0 + 40, T0 + 42.5, T0 + 45
OK = '{"status": "ok"}\n200'


def _moves(removed: bool) -> list[tuple[float, str, str]]:
    return [(ADDED, "added", NEW_URL)] + ([(REMOVED, "removed", OLD_URL)] if removed else [])


def _host_side(*, stop_old: bool) -> ObservedHost:
    """The operator's beside swap, as the console's sources read it."""
    h = ObservedHost()
    h.at(T0).units(T0, "active", "inactive", new_port=30001)
    h.at(STARTED + 3).units(STARTED + 3, "active", "active", new_port=30001)
    h.at(READY + 0.5).ready_line(READY)
    h.at(ADDED + 1).router(ADDED + 1, _moves(False), [OLD_URL, NEW_URL])
    h.at(REMOVED + 1).router(REMOVED + 1, _moves(True), [NEW_URL])
    if stop_old:
        h.at(STOPPING).unit_line(STOPPING, OLD, "stopping")
        h.at(STOPPED).unit_line(STOPPED, OLD, "stopped")
        h.at(STOPPED + 5).units(STOPPED + 5, "inactive", "active", new_port=30001)
        h.at(STOPPED + 6).router(STOPPED + 6, _moves(True), [NEW_URL])
    return h


def _console_driven() -> ObservedHost:
    """The same swap run by the console's beside path (its intents and audited commands)."""
    h = ObservedHost()
    h.at(T0).units(T0, "active", "inactive", new_port=30001)
    option = {"path": "beside", "possible": True, "reason": "other GPUs free", "predicted_downtime_s": 0.0}
    h.at(T0 + 0.5).feed(PathEvent("h", "plan", json.dumps({"plan": {"chosen": "beside", "forced": False,
                                                                     "options": [option]}}), T0 + 0.5))
    h.at(T0 + 1).intent("beside", state="running", detail="", who="ana")
    h.at(STARTED + 0.5).audit("beside", f"timeout -k 5 90 systemctl start -- {NEW}", at=STARTED + 0.5, took=0.5)
    h.at(STARTED + 3).units(STARTED + 3, "active", "active", new_port=30001)
    h.at(READY + 0.5).ready_line(READY)
    h.at(READY + 1).intent("beside", state="done", detail="ready on port 30001")
    h.at(ADDED - 0.5).intent("switch_traffic", state="running", detail="", who="ana")
    h.at(ADDED).audit("switch_traffic", f"curl -s -X POST http://127.0.0.1:30100/add_worker?url={NEW_URL}",
                      at=ADDED, took=0.2, output=OK)
    h.at(ADDED + 1).router(ADDED + 1, _moves(False), [OLD_URL, NEW_URL])
    h.at(REMOVED).audit("switch_traffic", f"curl -s -X POST http://127.0.0.1:30100/remove_worker?url={OLD_URL}",
                        at=REMOVED, took=0.2, output=OK)
    h.at(REMOVED + 1).router(REMOVED + 1, _moves(True), [NEW_URL])
    h.at(STOPPING).unit_line(STOPPING, OLD, "stopping")
    h.at(STOPPED).unit_line(STOPPED, OLD, "stopped")
    h.at(STOPPED + 0.5).audit("switch_traffic", f"timeout -k 5 120 systemctl stop -- {OLD}", at=STOPPED + 0.5,
                              took=3.0)
    h.at(STOPPED + 1).intent("switch_traffic", state="done", detail="the router sends traffic to 30001")
    h.at(STOPPED + 5).units(STOPPED + 5, "inactive", "active", new_port=30001)
    return h


def test_an_operators_beside_swap_writes_the_same_downtime_as_the_consoles() -> None:
    console, host = _console_driven().report(), _host_side(stop_old=True).report()
    for r in (console, host):
        assert r["swap_path"] == "beside", r["swap_path"]
        assert r["timing"]["downtime_s"] == 0.0 and not r["timing"]["downtime_running"], r["timing"]
        assert r["downtime_s"] == 0.0
        assert [p["measured_s"] for p in r["downtime_paths"]["phases"]] == [0.0]
        assert headline(r)[1].startswith("downtime 0s: none"), headline(r)
    # the facts it was read from: the console's stop of the old server, the router's move seen on the host
    t = host["timing"]
    assert t["downtime_from"] == t["downtime_to"] and t["downtime_from"] is not None, t
    assert OUTSIDE in t["downtime_from_source"], t  # its author: the operator on the host
    assert OUTSIDE in headline(host)[1] and OUTSIDE not in headline(console)[1], (headline(host), headline(console))


def test_the_beside_step_seen_on_the_host_ends_at_the_new_servers_ready_line_as_the_consoles() -> None:
    for h in (_console_driven(), _host_side(stop_old=True)):
        beside = h.state.swap.steps["beside"]
        assert beside.state == "done" and beside.ended_at_s == pytest.approx(READY, abs=0.01), beside


def test_an_old_server_kept_warm_after_the_routers_move_leaves_the_switch_done_and_no_downtime() -> None:
    h = _host_side(stop_old=False)
    switch = h.state.swap.steps["switch_traffic"]
    assert switch.state == "done" and switch.observed, switch
    assert (switch.started_at_s, switch.ended_at_s) == (ADDED, REMOVED), switch
    assert OLD in switch.detail and "still running" in switch.detail, switch.detail
    d = h.state.swap.downtime
    assert d is not None and d.started_at_s == d.ended_at_s == REMOVED, d
    assert path_summary(h.state, REMOVED + 600) == ("beside", 0.0, True)
    r = h.report()
    assert r["timing"]["downtime_s"] == 0.0 and r["downtime_s"] == 0.0, r["timing"]
    assert "kept running" in headline(r)[1] and OUTSIDE in headline(r)[1], headline(r)
    live, attach, replay = h.views()
    assert live == attach == replay


def test_a_console_started_after_the_move_says_the_same_as_the_one_that_watched_it() -> None:
    watched = _host_side(stop_old=False)
    fresh = ObservedHost()
    fresh.at(REMOVED + 60).units(REMOVED + 60, "active", "active", new_port=30001)
    fresh.at(REMOVED + 61).router(REMOVED + 61, _moves(True), [NEW_URL])
    for key in ("switch_traffic",):
        a, b = watched.state.swap.steps[key], fresh.state.swap.steps[key]
        assert (a.state, a.started_at_s, a.ended_at_s) == (b.state, b.started_at_s, b.ended_at_s), (a, b)
    assert fresh.state.swap.downtime == watched.state.swap.downtime
    assert fresh.report()["timing"]["downtime_s"] == watched.report()["timing"]["downtime_s"] == 0.0


def test_the_old_servers_later_stop_keeps_the_switch_at_the_routers_move() -> None:
    h = _host_side(stop_old=True)
    switch = h.state.swap.steps["switch_traffic"]
    assert switch.state == "done" and (switch.started_at_s, switch.ended_at_s) == (ADDED, REMOVED), switch
    assert "stopped" in switch.detail, switch.detail
    live, attach, replay = h.views()
    assert live == attach == replay
