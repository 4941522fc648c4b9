"""The start of the new server, run from the console under the two-person rule: its words in the plan
say what happened (started, ready, why), never a duration the executor measured itself (the wait for
the approval, "after 23s"); the step's duration the plan and the report show is the observer's, its
end minus its start: from its first audited command on the host (after the approval) to the new
server's ready line; the wait for the approval is the request's own record (asked, decided).
On a unit (systemctl start) and on a container (docker start)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.config import HostProfile
from console.demo.hostsim import HostSimulator
from console.domain.swap.report import report_from_recording
from tests.kit.swap import Driven, driven_host
from tests.kit.swap import run_step as _run
from tests.kit.swap import until as _until

SPEED = 8.0
WAIT_S = 1.5  # the approval comes this long after the request: a wait the old words said ("after 2s …")
A_DURATION = re.compile(r"\b\d+(\.\d+)?\s?(s|ms|min|m\d+s)\b|waiting for approval")


def _containers(_sim: HostSimulator, profile: HostProfile) -> HostProfile:
    return profile


@pytest.fixture(params=["drive", "docker-drive"])
async def paired(request: pytest.FixtureRequest, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Driven]:
    profile = _containers if request.param == "docker-drive" else None
    async with driven_host(tmp_path, monkeypatch, scenario=request.param, speed=SPEED, require_approval=True,
                           profile=profile) as d:
        yield d


async def _approved_by_ben(d: Driven, key: str, *, after_s: float = 0.0) -> None:
    await _until(lambda: any(r.action == key for r in d.state.swap.pending_approvals), 30, f"the {key} request")
    (req,) = [r for r in d.state.swap.pending_approvals if r.action == key]
    await _until(lambda: d.state.now() - req.requested_at_s >= after_s, 10 + after_s, "the wait before approving")
    assert d.runner.swap.approve(req.request_id, "ben") is None


async def test_the_start_step_says_what_happened_and_its_time_is_the_observers(paired: Driven) -> None:
    d = paired
    swap = d.runner.swap
    await _until(lambda: d.state.data("gpu") is not None and d.state.data("service") is not None
                 and d.state.data("service").old is not None, 30, "GPU and service readings")
    await _run(d, "install", 60)
    assert d.state.swap.steps["install"].state == "done", d.state.swap.steps["install"]
    for check in swap.evaluate_gate():
        if not check.passes:
            assert swap.override(check.name, check.name) is None
    assert swap.request("stop_old", "ana") is None
    await _approved_by_ben(d, "stop_old")
    await swap.wait_idle(90)
    assert d.state.swap.steps["stop_old"].state == "done", d.state.swap.steps["stop_old"]

    assert swap.request("start_new", "ana") is None
    await _approved_by_ben(d, "start_new", after_s=WAIT_S)
    await swap.wait_idle(120)
    step = d.state.swap.steps["start_new"]
    assert step.state == "done" and not step.observed, step
    assert "ready" in step.detail, step.detail
    assert not A_DURATION.search(step.detail), step.detail  # no time of the executor's in its words
    # The duration shown is the observer's: its end minus its start, which is the first command the
    # host ran for it, after the approval; the wait for the approval is the request's own record.
    (req,) = [a for a in d.state.swap.approvals.values() if a.action == "start_new"]
    assert step.started_at_s is not None and step.ended_at_s is not None
    assert step.duration_s == pytest.approx(step.ended_at_s - step.started_at_s)
    assert req.decided_at_s - req.requested_at_s >= WAIT_S
    assert req.decided_at_s <= step.started_at_s < step.ended_at_s

    d.recorder.flush()
    r = report_from_recording(d.recorder.path)
    row = next(s for s in r["steps"] if s["key"] == "start_new")
    assert row["duration_s"] == pytest.approx(step.duration_s, abs=0.01)
    assert row["detail"] == step.detail
