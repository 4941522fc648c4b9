"""Issue 26's remainder, unit level: the container plan's stop uses the controller's one gate-then-
approval function (item 6), the faster paths on containers (item 5)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from console.swap.container_plan import ContainerPlan


class _Refused(Exception):
    pass


class _Ctl:
    """What ContainerPlan._stop_old may touch: the controller's gate-then-approval, nothing else
    before the stop (a copy of the gate in the plan would call _fresh_service/evaluate_gate here)."""

    def __init__(self) -> None:
        self.profile = SimpleNamespace(container="sglang-new", compare_container="sglang-old", compose=None,
                                       require_approval=False)
        self.calls: list[tuple[str, Any]] = []

    async def gate_then_approval(self, who: str, serving: str | None) -> None:
        self.calls.append((who, serving))
        raise _Refused(f"the preflight gate refuses: x; nothing ran, {serving} still serves")

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the container plan reached ctl.{name} before the gate")


async def test_the_container_stop_runs_the_controllers_one_gate_and_approval() -> None:
    ctl = _Ctl()
    plan = ContainerPlan(ctl)  # type: ignore[arg-type]
    with pytest.raises(_Refused, match="sglang-old still serves"):
        await plan._stop_old("alice")
    assert ctl.calls == [("alice", "sglang-old")]

