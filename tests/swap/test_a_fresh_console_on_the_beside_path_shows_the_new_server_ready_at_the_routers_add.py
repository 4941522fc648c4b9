"""A console started after the beside path's new server came up and the router took it in: the
first reading finds both servers serving, and the router's record says when it added the new worker
(its log's "Added worker" line, at its own time). The router adds a worker that answers, so the
beside step (start the new server beside the old one, wait for ready) is done at that time at the
latest: the fresh console showed it "running" from its own first reading, and later "done" at the old
server's stop. The switch step is done once the router's record says all traffic moved (the old
worker removed after the new one was added), stopped or not; until then it is running."""

from __future__ import annotations

from tests.kit.observed import NEW, T0, ObservedHost

OLD_URL, NEW_URL = "http://127.0.0.1:30000", "http://127.0.0.1:30001"
ADDED, REMOVED = T0 + 60, T0 + 75


def _fresh(removed: bool) -> ObservedHost:
    h = ObservedHost()
    h.at(T0 + 100).units(T0 + 100, "active", "active", new_port=30001)
    moves = [(ADDED, "added", NEW_URL)] + ([(REMOVED, "removed", OLD_URL)] if removed else [])
    h.at(T0 + 101).router(T0 + 101, moves, [NEW_URL] if removed else [OLD_URL, NEW_URL])
    return h


def test_a_fresh_console_shows_the_beside_step_done_at_the_routers_add() -> None:
    for removed in (False, True):
        h = _fresh(removed)
        beside = h.state.swap.steps["beside"]
        assert beside.state == "done" and beside.observed, beside
        assert beside.ended_at_s == ADDED and (beside.started_at_s or 0) <= ADDED, beside
        assert NEW in beside.detail and "the router added" in beside.detail, beside.detail
        switch = h.state.swap.steps["switch_traffic"]
        if removed:  # all traffic on the new server: done at the old worker's removal, the old one warm
            assert (switch.state, switch.started_at_s, switch.ended_at_s) == ("done", ADDED, REMOVED), switch
        else:
            assert switch.state == "running" and switch.started_at_s == ADDED, switch
        live, attach, replay = h.views()
        assert live == attach == replay


def test_the_old_servers_stop_ends_the_switch_and_leaves_the_beside_step_at_the_routers_add() -> None:
    h = _fresh(removed=True)
    h.at(T0 + 120).units(T0 + 120, "inactive", "active", new_port=30001)
    h.at(T0 + 121).router(T0 + 121, [(ADDED, "added", NEW_URL), (REMOVED, "removed", OLD_URL)], [NEW_URL])
    steps = h.state.swap.steps
    assert steps["beside"].state == "done" and steps["beside"].ended_at_s == ADDED, steps["beside"]
    assert steps["switch_traffic"].state == "done" and steps["switch_traffic"].ended_at_s is not None
    assert h.state.swap.path() == "beside"
    live, attach, replay = h.views()
    assert live == attach == replay


def test_a_router_that_has_not_added_the_new_worker_leaves_the_beside_step_to_the_host() -> None:
    h = ObservedHost()
    h.at(T0 + 100).units(T0 + 100, "active", "active", new_port=30001)
    h.at(T0 + 101).router(T0 + 101, [], [OLD_URL])
    assert h.state.swap.steps["beside"].state == "running"  # started beside the old one, not known ready
