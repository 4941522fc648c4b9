"""Issue 24: the faster paths' host-changing steps (pre-warm, in place, beside, switch traffic)
under the two-person rule exactly like the stop: the preview shows their exact commands, nothing
runs before another person approves, a denial runs nothing, and every command is audited.

Unit level: the SwapController over a scripted transport (no simulator), so each test takes well
under a second."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from console.core.state import HostState
from console.domain.swap.controller import SwapController
from tests.kit.downtime import controller as _controller
from tests.kit.downtime import plan as _plan

CASES = {"in_place": ("in-place", "update_weights_from_disk"), "beside": ("beside", "systemctl start -- new.service"),
         "switch_traffic": ("beside", "add_worker"), "prewarm": ("restart", "setsid nohup")}


def _ready(ctl: SwapController, key: str) -> None:
    ctl.fast.plan = _plan(CASES[key][0])
    ctl.fast.shards = [("model-00001-of-00001.safetensors", 100)]


async def _pending(state: HostState, timeout: float = 10) -> Any:
    for _ in range(int(timeout / 0.01)):
        pending = [r for r in state.swap.approvals.values() if r.status == "pending"]
        if pending:
            return pending[0]
        await asyncio.sleep(0.01)
    raise AssertionError("no approval was asked for")


@pytest.mark.parametrize("key", sorted(CASES))
async def test_each_host_changing_step_waits_for_another_persons_approval(key: str) -> None:
    ctl, transport, state = _controller()
    _ready(ctl, key)
    marker = CASES[key][1]
    why, preview = ctl.preview(key)
    assert preview is not None, why
    assert preview.needs_approval is True
    assert any("needs another person's approval" in line for line in preview.lines)
    assert any(marker in line for line in preview.lines), preview.lines  # the exact commands, first
    assert ctl.confirm(preview.id, "ana") is None
    request = await _pending(state)
    assert request.action == key and any(marker in line for line in request.commands)
    assert not any(marker in c for c in transport.ran), "a command ran before the approval"
    assert ctl.approve(request.request_id, "ana") == "another person must approve (the two-person rule)"
    assert ctl.approve(request.request_id, "bo") is None
    await ctl.wait_idle(20)
    step = state.swap.steps[key]
    assert step.state == "done", step.detail
    assert any(marker in c for c in transport.ran)
    audit = list(state.swap.audit)
    assert any(a.action == key and "approval" in a.command and "granted" in a.command and a.who == "bo"
               for a in audit)
    assert any(a.action == key and marker in a.command and a.who == "ana" for a in audit)


@pytest.mark.parametrize("key", sorted(CASES))
async def test_a_denied_step_runs_nothing(key: str) -> None:
    ctl, transport, state = _controller()
    _ready(ctl, key)
    assert ctl.request(key, "ana") is None
    request = await _pending(state)
    assert ctl.deny(request.request_id, "bo") is None
    await ctl.wait_idle(20)
    assert state.swap.steps[key].state == "refused"
    assert not any(CASES[key][1] in c for c in transport.ran)


async def test_without_the_rule_no_approval_is_asked() -> None:
    ctl, transport, state = _controller(approval=False)
    _ready(ctl, "in_place")
    why, preview = ctl.preview("in_place")
    assert preview is not None and preview.needs_approval is False, why
    assert ctl.confirm(preview.id, "ana") is None
    await ctl.wait_idle(20)
    assert state.swap.steps["in_place"].state == "done" and not state.swap.approvals


async def test_the_operators_switch_without_a_router_needs_no_approval() -> None:
    ctl, transport, state = _controller()
    ctl.fast.router_url = None
    _ready(ctl, "switch_traffic")
    why, preview = ctl.preview("switch_traffic")
    assert preview is not None and preview.needs_approval is False, why
    assert ctl.confirm(preview.id, "ana") is None
    await ctl.wait_idle(20)
    assert state.swap.steps["switch_traffic"].state == "done" and not state.swap.approvals
    assert "switch your clients from port 30000 to 30001" in state.swap.steps["switch_traffic"].detail
