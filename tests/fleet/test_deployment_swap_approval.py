"""The deployment swap inside the host swap's machinery (issue 37): with `require_approval` on a node's
profile the run waits for another person's approval (the two-person rule: the requester cannot
approve), the request is the host swap's ApprovalChanged in every node's HostState, a denial runs
nothing, and each command and decision is an AuditAppended in its node's state as well as a line of
the 0600 audit file."""

from __future__ import annotations

import asyncio
import json
import stat
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from console.domain.deploy.swap import DeploymentSwap
from tests.kit.deploy import FakeWatch, deployment


def approving() -> FakeWatch:
    d = deployment()
    return FakeWatch(replace(d, nodes=tuple(replace(n, profile=replace(n.profile, unit="new.service",
                                                                   compare_unit="old.service",
                                                                   require_approval=i == 1))
                                        for i, n in enumerate(d.nodes))))


async def pending(swap: DeploymentSwap) -> Any:
    deadline = time.monotonic() + 30
    while not swap.pending():
        assert time.monotonic() < deadline, "no request was asked"
        await asyncio.sleep(0.01)
    return swap.pending()[0]


def test_the_swap_waits_for_another_persons_approval_then_runs_audited_in_each_node(tmp_path: Path) -> None:
    watch = approving()
    audit = tmp_path / "audit.jsonl"
    swap = DeploymentSwap(watch, who="ana", audit_file=audit)

    async def run() -> Any:
        task = asyncio.ensure_future(swap.run(confirmed=True))
        req = await pending(swap)
        assert not any(h.ran for h in watch.hosts.values())  # nothing ran while it waits
        for state in watch.states.values():  # the host swap's own request, in every node's state
            assert state.swap.approvals[req.request_id].status == "pending"
        assert req.action == "swap of deployment big" and req.requested_by == "ana"
        assert "node 1: timeout -k 5 120 systemctl stop -- old.service" in req.commands
        assert swap.approve(req.request_id, "ana") == "another person must approve (the two-person rule)"
        assert swap.approve(req.request_id, "ben") is None
        return await task

    done = asyncio.run(run())
    assert done.outcome == "ready"
    assert all(len(h.ran) >= 2 for h in watch.hosts.values())
    node1 = watch.states["node1"].swap
    assert [e.command for e in node1.audit][:1] == ["approval " + next(iter(node1.approvals)) + ": granted"]
    assert [e.action for e in node1.audit][1:] == ["stop old.service (big)", "start new.service (big)"]
    assert node1.audit[0].who == "ben" and node1.audit[0].note == "two-person rule"
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert lines[0]["who"] == "ben" and lines[0]["note"] == "two-person rule"
    assert [x["action"] for x in lines[1:]] == ["stop old.service"] * 2 + ["start new.service"] * 2
    assert stat.S_IMODE(audit.stat().st_mode) == 0o600


@pytest.mark.parametrize("decision", ["deny", "withdraw"])
def test_a_denied_or_withdrawn_request_runs_nothing(decision: str) -> None:
    watch = approving()
    swap = DeploymentSwap(watch, who="ana")

    async def run() -> Any:
        task = asyncio.ensure_future(swap.run(confirmed=True))
        req = await pending(swap)
        if decision == "deny":
            assert swap.deny(req.request_id, "ben") is None
        else:
            assert swap.withdraw(req.request_id, "ben") == "only ana, who asked, can withdraw it"
            assert swap.withdraw(req.request_id, "ana") is None
        return await task

    done = asyncio.run(run())
    by = "ben denied" if decision == "deny" else "ana withdrew"
    assert done.outcome == f"refused: {by} the request: nothing ran", done.outcome
    assert not any(h.ran for h in watch.hosts.values())
    assert not swap.busy
