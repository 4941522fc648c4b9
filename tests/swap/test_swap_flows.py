"""The swap plan's flows at the keys (issue 22 items 1, 4, 6, 11, 12): keys pressed while an action
runs are queued or refused out loud, the override dialog's Enter moves to the name field, a waiting
request is put in front of every other person with its exact commands, the audit reads one line per
action with a final status, and the downtime is one figure with its parts named."""

from __future__ import annotations

from typing import Any

from textual.widgets import Input

from console.core.state import HostState
from console.ui.panes.swap import ApproveScreen, ConfirmScreen, OverrideScreen, SwapScreen, format_plan
from console.domain.swap.controller import Preview
from console.core.derive.swap_view import (
    ApprovalChanged,
    AuditAppended,
    AuditEntry,
    DowntimeChanged,
    GateCheck,
    SwapSetup,
    SwapStep,
    SwapStepChanged,
)
from tests.kit.swap import PlanHost as Host


class FakeControl:
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def swap_preview(self, key: str) -> tuple[str | None, Any]:
        self.calls.append(("preview", key))
        return None, Preview(f"id-{key}", key, key, (f"# {key}", f"systemctl {key}"), False)

    def swap_confirm(self, preview_id: str, who: str | None = None) -> str | None:
        self.calls.append(("confirm", preview_id, who or ""))
        return None

    def swap_approve(self, request_id: str, who: str) -> str | None:
        self.calls.append(("approve", request_id, who))
        return None


def _state(busy: str | None = None) -> HostState:
    state = HostState("h", label="h")
    state.apply(SwapSetup("h", "old.service", "new.service", None, "/m", busy=busy))
    return state


async def test_a_key_for_the_next_step_during_the_drain_is_queued_others_are_refused_aloud() -> None:
    state = _state(busy="stop_old")
    state.apply(SwapStepChanged("h", SwapStep("stop_old", "Stop", "running", 1.0, detail="draining: GPU 0 80,000 MiB")))
    control = FakeControl()
    app = Host(SwapScreen(state, control, "ana"))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        plan = str(app.screen.query_one("#swap-plan").render())
        assert "busy: stop old (draining: GPU 0 80,000 MiB)" in plan
        await pilot.press("n")  # start new: the next step, queued
        await pilot.press("b")  # benchmark: not next, refused with a word
        await pilot.pause()
        assert control.calls == []
        said = [n.message for n in app._notifications]
        assert any(m.startswith("queued: start new") for m in said), said
        assert any(m.startswith("busy: stop old") and "benchmark refused" in m for m in said), said
        state.apply(SwapSetup("h", "old.service", "new.service", None, "/m", busy=None))  # the drain is done
        await _wait_for(lambda: control.calls == [("preview", "start_new")] and isinstance(app.screen, ConfirmScreen))
        assert control.calls == [("preview", "start_new")]
        assert isinstance(app.screen, ConfirmScreen)  # its commands first, as always
        await pilot.press("enter")
        await pilot.pause()
        assert control.calls[-1] == ("confirm", "id-start_new", "ana")


async def test_enter_on_the_override_list_moves_to_the_name_field() -> None:
    picked: list[object] = []
    failing = [GateCheck("diff", False, "--quantization modelopt_fp4"), GateCheck("paths", False, "/data")]
    screen = OverrideScreen(failing)
    app = Host(screen)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app.pop_screen()
        app.push_screen(OverrideScreen(failing), picked.append)
        await pilot.pause()
        await pilot.press("down", "enter")
        await pilot.pause()
        assert isinstance(app.focused, Input), app.focused
        await pilot.press(*"paths", "enter")
        await pilot.pause()
        assert picked == [("paths", "paths")]


async def test_a_waiting_request_is_put_in_front_of_the_other_person_with_its_commands() -> None:
    state = _state()
    state.apply(ApprovalChanged("h", "r1", "stop_old", ("# Stop", "timeout -k 5 120 systemctl stop -- old.service"),
                                "ana", 5.0))
    control = FakeControl()
    app = Host(SwapScreen(state, control, "ben"))
    async with app.run_test(size=(120, 40)) as pilot:
        await _wait_for(lambda: isinstance(app.screen, ApproveScreen))
        assert isinstance(app.screen, ApproveScreen)
        shown = str(app.screen.query_one("#approve-text").render())
        assert "ana asks for your approval" in shown and "systemctl stop -- old.service" in shown
        assert control.calls == []  # nothing approved by merely opening it
        await pilot.press("enter")
        await pilot.pause()
        assert control.calls == [("approve", "r1", "ben")]
    # The one who asked is not asked to approve their own request.
    mine = Host(SwapScreen(state, FakeControl(), "ana"))
    async with mine.run_test(size=(120, 40)):
        # the plan that says the request waits is drawn in the refresh that would have asked
        await _wait_for(lambda: "waiting for approval" in str(mine.screen.query_one("#swap-plan").render()))
        assert isinstance(mine.screen, SwapScreen)


def test_the_audit_is_one_line_per_action_with_a_final_status_and_the_downtime_one_figure() -> None:
    state = _state()
    script = "set -e\n" + "\n".join(f"line {i}" for i in range(20))
    state.apply(AuditAppended("h", AuditEntry("ana", 10.0, "install", script, 0, "", 0.2)))
    state.apply(AuditAppended("h", AuditEntry("ana", 11.0, "stop_old", "timeout -k 5 120 systemctl stop -- old.service",
                                              0, "", 1.0)))
    state.apply(AuditAppended("h", AuditEntry("ana", 12.0, "benchmark", "concurrency 1, 4", None, "", note="started")))
    state.apply(SwapStepChanged("h", SwapStep("benchmark", "Benchmark", "done", 12.0, 40.0, "1 run(s)")))
    state.apply(SwapStepChanged("h", SwapStep("stop_old", "Stop", "done", 100.0, 104.0, "drained")))
    state.apply(SwapStepChanged("h", SwapStep("start_new", "Start", "done", 104.5, 166.4, "ready")))
    state.apply(DowntimeChanged("h", 99.6, "the old server's last served request, in its log", 166.4, "new ready"))
    text = format_plan(state.swap, 200.0).plain
    audit = text.split("last commands")[1]
    assert "set -e  (+20 lines)" in audit and "line 5" not in audit
    assert "systemctl stop old.service" in audit
    bench = next(ln for ln in audit.splitlines() if "concurrency" in ln)
    assert "[done]" in bench, bench  # its step finished: not "–" forever
    # 66.8 s: one rounding (1m07s) everywhere, and the parts named.
    assert "downtime 1m07s" in text and "kept: until" not in text
    assert "drain 4s" in text and "boot to ready 1m02s" in text


async def _wait_for(predicate: Any, timeout: float = 30.0) -> None:
    """A condition on the screen, polled; fails only after a generous timeout."""
    from tests.kit.hosts import wait_for

    await wait_for(predicate, timeout, 0.05)
