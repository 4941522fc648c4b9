"""`snapshot --json` credited the ready server to the new unit while that unit was inactive (the old
unit's server answered on the port): a port that answers is never credited to a unit that is not
running."""

from __future__ import annotations

from console.domain.analysis.server_status import HttpFacts, combine
from console.cli.snapshot import server_json

ANSWERING = HttpFacts(server_info={"status": "ready"}, health_ok=True, health_at_s=100.0, health_ever_ok=True)


def test_a_ready_port_is_not_the_inactive_units_server() -> None:
    st = combine("sglang-new.service", "inactive", None, None, ANSWERING, 100.0)
    out = server_json(st)
    assert out["status"] == "ready"  # something serves on the port: true
    assert out["unit"] is None and out["unit_state"] is None  # but not the unit followed, which is inactive
    assert "not sglang-new.service, which is inactive" in out["reason"]


def test_a_failed_unit_is_not_credited_either_and_a_running_one_still_is() -> None:
    assert combine("u.service", "failed", None, None, ANSWERING, 100.0).unit is None
    running = combine("u.service", "active", 42, None, ANSWERING, 100.0)
    assert (running.status, running.unit, running.unit_state, running.main_pid) == ("ready", "u.service", "active", 42)
    dead = combine("u.service", "inactive", None, None, HttpFacts(server_info_error="refused"), 100.0)
    assert (dead.status, dead.unit) == ("dead", "u.service")  # nothing answers: the unit's own death
