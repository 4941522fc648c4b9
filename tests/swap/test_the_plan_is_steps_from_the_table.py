"""A swap is a plan of step objects chosen from the path × runtime table: every step a row runs has
one object for that runtime (its preview, its run, the step that undoes it), every step the row does
not take is skipped with the table's reason, and the rollback is the path's own."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from console.core.derive import swap_plan
from console.domain.swap import steps


def _ex(path: str | None, runtime: str, *, verify_sha: bool = False, old_serving: bool = True) -> Any:
    """An executor as the plan sees it: the chosen path, and the runtime the profile names (a container
    or a compose service; neither: a systemd unit)."""
    fast = SimpleNamespace(chosen=path, _beside_old_serving=lambda: path == "beside" and old_serving)
    return SimpleNamespace(fast=fast, containers=SimpleNamespace(active=runtime != "systemd"),
                           profile=SimpleNamespace(verify_sha=verify_sha,
                                                   compose="compose.yaml" if runtime == "compose" else None))


@pytest.mark.parametrize(("path", "runtime"), sorted(swap_plan.TABLE))
@pytest.mark.parametrize("verify_sha", [False, True])
def test_each_row_of_the_table_is_a_plan_of_step_objects_for_its_runtime(path: str, runtime: str,
                                                                          verify_sha: bool) -> None:
    plan = steps.plan(_ex(path, runtime, verify_sha=verify_sha))
    row = swap_plan.TABLE[(path, runtime)]
    runs = [p for p in plan if p.step is not None]
    assert [p.key for p in runs] == [k for k in row.runs if verify_sha or k != "verify"]
    for p in runs:
        assert p.step.key == p.key and runtime in p.step.runtimes and p.skipped is None  # type: ignore[union-attr]
    skipped = {p.key: p.skipped for p in plan if p.step is None}
    assert skipped == dict(swap_plan.skips(path, runtime, verify_sha=verify_sha))
    assert all(why for why in skipped.values())  # a reason each, never a silent "pending"
    assert not set(skipped) & {p.key for p in runs}


@pytest.mark.parametrize("runtime", swap_plan.RUNTIMES)
def test_the_steps_that_touch_the_service_are_the_runtimes_own(runtime: str) -> None:
    """A unit is stopped, started and installed by the unit's steps; a container (or a compose
    service) by the container's: never one runtime's commands for the other."""
    kind = steps.UNIT if runtime == "systemd" else steps.CONTAINER
    for key in ("install", "stop_old", "start_new", "in_place", "beside", "rollback"):
        for path in (*swap_plan.PATHS, None):
            step = steps.step_for(_ex(path, runtime, old_serving=True), key)
            assert step.runtimes == kind, (key, path, runtime)


@pytest.mark.parametrize("runtime", swap_plan.RUNTIMES)
def test_the_rollback_is_the_paths_own(runtime: str) -> None:
    def rollback(path: str | None, old_serving: bool = True) -> steps.Step:
        return steps.step_for(_ex(path, runtime, old_serving=old_serving), "rollback")

    restart = rollback("restart")
    assert rollback(None) is restart  # nothing planned: the plain restart's
    in_place = rollback("in-place")
    beside_serving, beside_moved = rollback("beside", True), rollback("beside", False)
    assert len({id(restart), id(in_place), id(beside_serving)}) == 3
    assert beside_moved.run is restart.run  # the old one stopped by the switch: stop the new, start the old
    for key in ("stop_old", "start_new", "in_place", "beside"):
        assert steps.step_for(_ex("restart", runtime), key).rollback == "rollback"


def test_a_step_no_runtime_has_is_refused_with_a_line() -> None:
    from console.domain.swap.actions import ActionError

    with pytest.raises(ActionError, match="no such action: reboot"):
        steps.step_for(_ex("restart", "systemd"), "reboot")
