"""The swap's steps as small objects, and the plan made of them from the path × runtime table.

A swap is the row of console/core/derive/swap_plan.py's TABLE for the chosen path (in place, beside,
restart) and the service's runtime (a systemd unit, a container, a compose service): the steps that
row runs, in order, each one of the objects below, and the plan's steps it does not take, each
skipped with the table's reason (never left "pending"). One executor (console/domain/swap/controller.py)
runs them in order and keeps the rules: read-only, one action at a time, a confirmation runs once,
the two-person rule, the audit, a failed step stops the plan.

Each step has:
    key        its line in the plan (console/core/derive/swap_view.py's titles)
    preview    the actions it will run, with their exact commands (what the confirmation shows)
    run        runs it through the executor (console/domain/swap/executor_api.py): its words for the
               plan, or StepFailed / StepRefused; its start and end times are the observer's
    rollback   the key of the step that undoes it, where it has one

A step serves the runtimes and paths it names (the paths' own steps name every path: asked for on
another path, their preview says why not, "the plan chose restart, not beside"; the table decides
which run in a plan); `step_for` picks the one the swap needs (the stop of a
unit is `systemctl stop` and a GPU drain, of a container `docker stop` and the same drain; the
rollback of an in-place update restores the old unit file, of a beside start stops the new server).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from console.core.derive import swap_plan
from console.core.derive.swap_view import STEP_TITLES, GateChanged
from console.domain.swap import actions as act
from console.domain.swap import container_fastpath as cfp
from console.domain.swap import container_steps, path_choice, path_steps, shared_steps, unit_steps
from console.domain.swap.executor_api import Executor

UNIT = ("systemd",)
CONTAINER = ("container", "compose")
EVERY_RUNTIME = swap_plan.RUNTIMES
EVERY_PATH = (*swap_plan.PATHS, None)  # None: no path planned yet (the plain restart's steps)

Preview = Callable[[Executor], list[act.Action]]
Run = Callable[[Executor, str], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Step:
    """One step of the swap: its preview, its run, the step that undoes it; `runtimes` and
    `paths`: where it is the step of that key (`when`: a further condition read from the swap)."""

    key: str
    preview: Preview
    run: Run
    runtimes: tuple[str, ...] = EVERY_RUNTIME
    paths: tuple[str | None, ...] = EVERY_PATH
    rollback: str | None = None
    when: Callable[[Executor], bool] | None = None

    @property
    def title(self) -> str:
        return STEP_TITLES.get(self.key, self.key)

    def serves(self, ex: Executor, path: str | None, runtime: str) -> bool:
        return runtime in self.runtimes and path in self.paths and (self.when is None or self.when(ex))


@dataclass(frozen=True, slots=True)
class Planned:
    """One line of a swap's plan: the step that runs, or why the path skips it."""

    key: str
    step: Step | None
    skipped: str | None = None


# -- the previews (the exact commands) and runs, by where the code that knows the host lives ------
def _fast(key: str) -> Preview:
    return lambda ex: ex.fast.build(key)  # type: ignore[no-any-return]


def _containers(key: str) -> Preview:
    return lambda ex: ex.containers.build(key)  # type: ignore[no-any-return]


def _approval(ex: Executor) -> bool:
    return bool(getattr(ex.profile, "require_approval", False))


def _download_preview(ex: Executor) -> list[act.Action]:
    p = ex.profile
    return [act.download(p.repo_id or "", p.model_dir or "")]


def _verify_preview(ex: Executor) -> list[act.Action]:
    commands, why = shared_steps.verify_commands(ex)
    return [act.Action("verify", STEP_TITLES["verify"], commands, waits_for=why or (
        "every file's sha256 against the listing hf download kept (or the Hub's)"))]


def _install_unit_preview(ex: Executor) -> list[act.Action]:
    return [unit_steps.install_action(ex)]


def _preflight_preview(ex: Executor) -> list[act.Action]:
    return [act.Action("preflight", STEP_TITLES["preflight"], (), waits_for=(
        "every check passes (nothing runs on the host: the gate judges what the console reads)"))]


def _stop_unit_preview(ex: Executor) -> list[act.Action]:
    return [act.stop_service(act.check_unit(ex.old_unit), approval=_approval(ex))]


def _start_unit_preview(ex: Executor) -> list[act.Action]:
    return [act.start_service(act.check_unit(ex.new_unit), approval=_approval(ex))]


def _benchmark_preview(ex: Executor) -> list[act.Action]:
    port = ex.fast.bench_port()  # beside: the new server on its own port
    return [act.benchmark(shared_steps.bench_label(ex)
                          + (f" on port {port}, before traffic moves" if port else ""))]


def _restart_rollback_preview(ex: Executor) -> list[act.Action]:
    return [act.rollback(act.check_unit(ex.new_unit), act.check_unit(ex.old_unit), approval=_approval(ex))]


def _fast_rollback_preview(ex: Executor) -> list[act.Action]:
    return ex.fast.rollback_actions() or []  # type: ignore[no-any-return]


def _beside_old_serving(ex: Executor) -> bool:
    return bool(ex.fast._beside_old_serving())


def _old_stopped(ex: Executor) -> bool:
    return not _beside_old_serving(ex)


async def _run_paths(ex: Executor, who: str) -> str:
    """The `paths` step: the path chosen from the host's facts, then the table's skips for it and the gate."""
    said = await path_choice.run_paths(ex, who)
    mark_skips(ex)
    ex.state.apply(GateChanged(ex.host, ex.evaluate_gate(), ex._clock()))
    return said


async def _in_place_container(ex: Executor, who: str) -> str:
    """In place on a container: the update, then the launch a later restart must use."""
    return await path_steps.run_in_place(ex, who) + cfp.later_restart(ex)


async def _beside_container(ex: Executor, who: str) -> str:
    return await cfp.run_beside(ex, who)


async def _rollback_in_place_container(ex: Executor, who: str) -> str:
    return await cfp.run_rollback_in_place(ex, who)


async def _rollback_beside_container(ex: Executor, who: str) -> str:
    return await cfp.run_rollback_beside(ex, who)


# -- the registry: every step, for the runtimes and paths it serves -----------------------------------
STEPS: tuple[Step, ...] = (
    Step("download", _download_preview, shared_steps.run_download),
    Step("verify", _verify_preview, shared_steps.run_verify),
    Step("install", _install_unit_preview, unit_steps.run_install, UNIT),
    Step("install", _containers("install"), container_steps.run_install, CONTAINER),
    Step("preflight", _preflight_preview, shared_steps.run_preflight),
    Step("paths", path_choice.preview, _run_paths),
    Step("prewarm", _fast("prewarm"), path_steps.run_prewarm),
    Step("stop_old", _stop_unit_preview, unit_steps.run_stop_old, UNIT, rollback="rollback"),
    Step("stop_old", _containers("stop_old"), container_steps.run_stop_old, CONTAINER, rollback="rollback"),
    Step("start_new", _start_unit_preview, unit_steps.run_start_new, UNIT, rollback="rollback"),
    Step("start_new", _containers("start_new"), container_steps.run_start_new, CONTAINER, rollback="rollback"),
    Step("in_place", _fast("in_place"), path_steps.run_in_place, UNIT, rollback="rollback"),
    Step("in_place", _fast("in_place"), _in_place_container, CONTAINER, rollback="rollback"),
    Step("beside", _fast("beside"), path_steps.run_beside, UNIT, rollback="rollback"),
    Step("beside", _fast("beside"), _beside_container, CONTAINER, rollback="rollback"),
    Step("switch_traffic", _fast("switch_traffic"), path_steps.run_switch),
    Step("benchmark", _benchmark_preview, shared_steps.run_benchmark),
    # rollback: in place, the previous unit file restarted (a container: restarted with its own
    # launch); beside while the old server serves, the new one stopped; otherwise stop the new
    # service and start the old one.
    Step("rollback", _fast_rollback_preview, path_steps.run_rollback_in_place, UNIT, ("in-place",)),
    Step("rollback", _containers("rollback"), _rollback_in_place_container, CONTAINER, ("in-place",)),
    Step("rollback", _fast_rollback_preview, path_steps.run_rollback_beside, UNIT, ("beside",),
         when=_beside_old_serving),
    Step("rollback", _containers("rollback"), _rollback_beside_container, CONTAINER, ("beside",),
         when=_beside_old_serving),
    Step("rollback", _restart_rollback_preview, unit_steps.run_rollback, UNIT, ("restart", None, "beside"),
         when=_old_stopped),
    Step("rollback", _containers("rollback"), container_steps.run_rollback, CONTAINER, ("restart", None, "beside"),
         when=_old_stopped),
)
KEYS = tuple(dict.fromkeys(s.key for s in STEPS))


def runtime(ex: Executor) -> str:
    """What runs the server: a systemd unit, a container, or a compose service (the profile's)."""
    containers = getattr(ex, "containers", None)
    if containers is None or not containers.active:
        return "systemd"
    return "compose" if getattr(ex.profile, "compose", None) else "container"


def where(ex: Executor) -> tuple[str | None, str]:
    """(the chosen path or None, the runtime) of the swap the executor runs."""
    return ex.fast.chosen, runtime(ex)


def mark_skips(ex: Executor) -> None:
    """The plan's steps the chosen path does not take, skipped with the table's reason; a step an
    earlier plan skipped that this path runs is pending again. The steps' intent, written by the
    executor (`_set`); the path plan keeps which keys its plan skipped."""
    path, on = where(ex)
    skipped: set[str] = ex.fast.plan_skipped
    skips = dict(swap_plan.skips(path, on, verify_sha=bool(getattr(ex.profile, "verify_sha", False))))
    now = ex.state.swap.steps
    for key in sorted(skipped - set(skips)):
        step = now.get(key)
        if step is not None and step.state == "skipped" and not step.observed:
            ex._set(key, state="pending", detail="", who=None)
        skipped.discard(key)
    for key, why in skips.items():
        step = now.get(key)
        if step is None or step.state != "pending" or step.observed:
            continue
        ex._set(key, state="skipped", detail=why, who=None, commands=())
        skipped.add(key)


async def ensure_plan(ex: Executor) -> None:
    """Before the preflight and the stop (path_choice.PLAN_BEFORE): the path planned from the host's
    read-only facts when nobody ran `paths` (the gate then shows it, or what kept it from planning),
    and the table's skips for the path chosen."""
    planned = await path_choice.plan_before(ex)
    mark_skips(ex)
    if planned:
        ex.state.apply(GateChanged(ex.host, ex.evaluate_gate(), ex._clock()))


def step_for(ex: Executor, key: str) -> Step:
    """The step of this key for the swap's path and runtime; ActionError when there is none."""
    path, runtime = where(ex)
    for step in STEPS:
        if step.key == key and step.serves(ex, path, runtime):
            return step
    if key in KEYS:
        raise act.ActionError(f"{STEP_TITLES.get(key, key)} is not a step of the {path or 'restart'} path on a "
                              f"{swap_plan.RUNTIME_NAMES.get(runtime, runtime)}")
    raise act.ActionError(f"no such action: {key}")


def plan(ex: Executor) -> list[Planned]:
    """The swap's plan from the table: the steps its path runs on its runtime, in order (Verify
    only when the profile asks for it), then those it skips, each with the reason."""
    path, runtime = where(ex)
    verify_sha = bool(getattr(ex.profile, "verify_sha", False))
    runs = [Planned(k, step_for(ex, k)) for k in swap_plan.steps_of(path, runtime, verify_sha=verify_sha)]
    return runs + [Planned(k, None, why) for k, why in swap_plan.skips(path, runtime, verify_sha=verify_sha)]


def to_run(ex: Executor, done: Any) -> list[str]:
    """The keys of the plan's steps still to run (`done(key)`: the step is done or skipped), in
    order. Verify is kept while pending: a Verify asked for from the plan runs (the table skips it
    only when the path is planned)."""
    path, runtime = where(ex)
    keys = swap_plan.steps_of(path, runtime, verify_sha=True)
    return [k for k in keys if not done(k)]


__all__ = ["KEYS", "STEPS", "Planned", "Step", "ensure_plan", "mark_skips", "plan", "runtime", "step_for", "to_run",
           "where"]
