"""The deployment swap as the swap engine's plan, one per node: the engine's step objects
(console/domain/swap/steps.py's `Step`: key, preview, run, rollback) chosen from the path × runtime
table's row for the path a deployment takes (console/core/derive/swap_plan.py: restart on systemd
units: every node's old unit stopped, the new ones started), each run for its node by a
`NodeExecutor`, the executor the engine's steps are written against (console/domain/swap/executor_api.py).

What a node's plan runs:
    stop_old   the engine's own stop (console/domain/swap/unit_steps.py run_stop_old): `systemctl stop`
               under the host's `timeout -k`, a lost reply re-read from the host, then the GPU drain
               (console/domain/swap/shared_steps.py drain: a GPU reading taken after the stop, every
               GPU under DRAINED_MIB)
    start_new  `systemctl start` of the new unit (unit_steps.unit_command), in its turn: every node of
               the plan stopped and drained, the nodes before it started (rank 0 first, prefill before
               decode); ready is not the node's but the whole deployment's, waited for by the
               deployment swap once every node has started
    rollback   the engine's rollback action (stop the new unit, drain, start the old one in its turn)
and what it skips, each with its reason (never left pending): the table's steps a deployment swap
does not take (download, verify, install, the host's preflight, the benchmark).

The rules are the engine's and are kept once for the deployment, not per node: read-only, a
confirmation, the gate (the checks across nodes), the two-person rule (asked once, before any node's
step: `_approval` and `gate_then_approval` answer at once here), the audit (every command an
AuditAppended in its node's state and a line of the audit file). Each step's intent and words are
written into its node's HostState through `_set`, as the host executor writes them; the step's times,
what was freed and when the host moved are that node's observer's (console/core/derive/swap_observer.py),
never the swap's.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from console.core.derive import swap_plan
from console.core.derive.swap_view import STEP_TITLES, SwapStep, SwapStepChanged
from console.core.events import AuditAppended, AuditEntry
from console.domain.deploy.profile import DeploymentNode
from console.domain.swap import actions as act
from console.domain.swap import shared_steps, unit_steps
from console.domain.swap.errors import StepFailed, StepRefused, _Dropped
from console.domain.swap.executor_api import Executor
from console.domain.swap.steps import Planned, Step
from console.host.transport.base import CommandResult
from console.host.transport.errors import CommandTimeout, TransportError
from console.redact import redact_text

PATH = "restart"  # the table's row a deployment swap takes: units stopped, then started
RUNTIME = "systemd"
TAIL_CHARS = 600  # the output kept per audited command (the host swap's own figure)

# Why a deployment swap skips the table's other steps of its row, said in each node's plan.
SKIPS: dict[str, str] = {
    "download": "the deployment swap downloads nothing: its gate requires every node's copy complete",
    "verify": "the deployment swap verifies no file (v in the node's Download pane does)",
    "install": "the deployment swap installs no unit: both units are on every node already (the gate "
               "compares the nodes' units flag by flag)",
    "preflight": "the deployment's gate stands for it: the checks across nodes and no node's fault, "
                 "judged once before any node's step",
    "benchmark": "the deployment swap runs no benchmark: it ends when the whole deployment is ready",
}
NOTHING_RAN = "nothing ran on this node in the swap: its old unit was never stopped"


class StartTurns:
    """Who may start now: every node of the plan stopped and drained, and the nodes before it in the
    start order (rank 0 first: it opens the store at --dist-init-addr; prefill before decode) started.
    A failed node stops the plan: nodes still waiting for their turn start nothing."""

    def __init__(self, order: list[str]) -> None:
        self.order = order
        self.stopped: set[str] = set()
        self.started: set[str] = set()
        self.failed: str | None = None
        self._changed = asyncio.Event()

    def _tell(self) -> None:
        told, self._changed = self._changed, asyncio.Event()
        told.set()

    def stop(self, key: str) -> None:
        self.stopped.add(key)
        self._tell()

    def start(self, key: str) -> None:
        self.started.add(key)
        self._tell()

    def fail(self, why: str) -> None:
        self.failed = self.failed or why
        self._tell()

    def turn(self, key: str) -> bool:
        before = self.order[:self.order.index(key)]
        return set(self.order) <= self.stopped and all(k in self.started for k in before)

    async def wait(self, key: str) -> None:
        while self.failed is None and not self.turn(key):
            await self._changed.wait()
        if self.failed is not None:
            raise StepRefused(f"not started: the plan stopped ({self.failed})")


@dataclass
class NodeExecutor:
    """The executor the engine's steps run against (executor_api.Executor), for one node of a
    deployment: its HostState, its transport, its profile; the rules answered once for the whole
    deployment (see the module's docstring). `issued`: a command of this plan reached the node's
    transport (the rollback undoes the nodes that ran)."""

    node: DeploymentNode
    state: Any
    transport: Any
    runner: Any
    who: str
    deployment_name: str
    turns: StartTurns
    audit_file: Path | None
    clock: Callable[[], float]
    drain_timeout_s: float = 120.0
    poll_s: float = 0.5
    busy: str | None = None
    fast: Any = None  # no fast path: a deployment swap takes the table's restart row
    containers: Any = None  # units only (the deployment swap's runtime is systemd)
    bench_plan: list[tuple[int, int, int, int]] | None = None
    issued: bool = False
    on_issue: Callable[[act.RemoteCommand], None] | None = None  # the run's timeline: who issued what
    profile: Any = field(init=False)
    session: Any = field(init=False)
    host: str = field(init=False)

    def __post_init__(self) -> None:
        self.profile = replace(self.node.profile, drain_timeout_s=self.drain_timeout_s)
        self.session = getattr(self.runner, "session", None) or SimpleNamespace(transport=self.transport)
        self.host = getattr(self.state, "host", self.node.key)

    # -- what the steps read ---------------------------------------------------------------------
    @property
    def old_unit(self) -> str | None:
        return self.node.profile.compare_unit

    @property
    def new_unit(self) -> str | None:
        return self.node.profile.unit

    def _clock(self) -> float:
        return self.clock()

    def build(self, key: str) -> list[act.Action]:
        return step_of(key).preview(self)

    def evaluate_gate(self) -> tuple[Any, ...]:
        return ()  # the deployment's gate (checks.py), judged once before any node's step

    async def _approval(self, key: str, who: str) -> None:
        return None  # the two-person rule was asked once for the whole plan, before any step

    async def gate_then_approval(self, who: str, serving: str | None) -> None:
        return None  # the deployment's gate and its approval, both taken before the plan ran

    # -- what the steps write: intent and words only -----------------------------------------------
    def _set(self, key: str, **changes: Any) -> SwapStep:
        """The step's intent, words and who in the node's state (the host executor's rule: never its
        times; a new intent carries no time over from an earlier one)."""
        step = self.state.swap.steps.get(key) or SwapStep(key, STEP_TITLES[key])
        state = changes.get("state")
        if state is not None and (step.state != "running" or state == "running"):
            step = SwapStep(step.key, step.title)
        step = replace(step, **changes)
        self.state.apply(SwapStepChanged(self.host, step))
        return step

    # -- commands, audited -----------------------------------------------------------------------
    def _audit(self, who: str, action: str, command: str, status: int | None, output: str,
               duration_s: float | None = None, note: str = "deployment swap") -> None:
        """One command: an AuditAppended in its node's state (its recording, its attached views) and a
        line of the 0600 audit file."""
        tail = redact_text(output[-TAIL_CHARS:])
        self.state.apply(AuditAppended(self.host, AuditEntry(
            who, self.clock(), f"{action} ({self.deployment_name})", redact_text(command), status, tail,
            duration_s, note)))
        audit_line(self.audit_file, self.clock(), {
            "who": who, "deployment": self.deployment_name, "node": self.node.label, "host": self.node.profile.host,
            "action": action, "command": redact_text(command), "status": status, "output": tail})

    async def _run(self, who: str, action: str, cmd: act.RemoteCommand) -> Any:
        """One command through the node's transport, audited under what it does ("stop old.service");
        _Dropped when no exit status came back (the step re-reads the outcome from the host)."""
        if self.transport is None:  # nothing was sent: nothing to re-read on the host
            self._audit(who, cmd.purpose, cmd.script, None, "not sent: no connection", note="not sent")
            raise StepFailed(f"{cmd.purpose} not sent: {self.node.label} has no connection")
        self.issued = True
        if self.on_issue is not None:
            self.on_issue(cmd)
        started = time.monotonic()
        try:
            r = await self.transport.run(cmd.script, timeout=cmd.timeout_s)
        except (TransportError, OSError, asyncio.TimeoutError) as exc:
            kind = "timed out" if isinstance(exc, (CommandTimeout, asyncio.TimeoutError)) else "connection lost"
            self._audit(who, cmd.purpose, cmd.script, None, str(exc), time.monotonic() - started, note=kind)
            raise _Dropped(f"{kind}: {exc}") from None
        result = r if isinstance(r, CommandResult) else CommandResult(
            r.exit_status, r.stdout, r.stderr, time.monotonic() - started)
        output = (result.text + ("\n" + result.error_text if result.error_text else "")).strip()
        self._audit(who, cmd.purpose, cmd.script, result.exit_status, output, time.monotonic() - started)
        if self.runner is not None:  # a unit started or stopped: the node's service pane reads it now
            self.runner.repoll("service")
        return result

    def _connected(self) -> bool:
        status = getattr(getattr(self.transport, "state", None), "status", None)
        return self.transport is not None and status in (None, "connected")

    async def _reconnected(self, key: str, why: str, timeout_s: float = 600) -> None:
        self._set(key, detail=f"{why}: re-reading the outcome from the host when the connection is back")
        deadline = time.monotonic() + timeout_s
        while not self._connected():
            if time.monotonic() > deadline:
                raise StepFailed(f"{why}; {self.node.label} did not come back within {timeout_s:.0f}s: "
                                 "outcome unknown")
            await asyncio.sleep(self.poll_s)

    async def _unit_state(self, unit: str) -> dict[str, str]:
        for _ in range(3):
            try:
                r = await self.transport.run(act.unit_state_check(unit), timeout=20)
                return act.parse_unit_state(r.stdout.decode("utf-8", "replace"))
            except (TransportError, OSError, asyncio.TimeoutError):
                await self._reconnected(self.busy or "stop_old", "connection lost while reading the unit")
        raise StepFailed(f"cannot read the state of {unit} on {self.node.label}")

    async def drain(self, key: str, since: float) -> str:
        return await shared_steps.drain(self, key, since)

    async def death_cause(self, reason: str, wait_s: float = shared_steps.DEATH_CAUSE_WAIT_S) -> str:
        return await shared_steps.death_cause(self, reason, wait_s)

    def _draft_text_raw(self) -> str:
        raise act.ActionError("a deployment swap installs no unit")

    # -- the turns across nodes ------------------------------------------------------------------
    def stopped(self) -> None:
        self.turns.stop(self.node.key)

    def started(self) -> None:
        self.turns.start(self.node.key)

    async def my_turn(self) -> None:
        await self.turns.wait(self.node.key)


def audit_line(path: Path | None, at_s: float, record: dict[str, Any]) -> None:
    """A line of the audit file (0600, as the host swap's)."""
    if path is None:
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    if os.fstat(fd).st_mode & 0o077:
        os.fchmod(fd, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"at_s": at_s, **record}) + "\n")


# -- the steps' previews and runs --------------------------------------------------------------------
def _stop_preview(ex: Executor) -> list[act.Action]:
    return [act.stop_service(act.check_unit(ex.old_unit))]


def _start_preview(ex: Executor) -> list[act.Action]:
    return [act.start_service(act.check_unit(ex.new_unit))]


def _rollback_preview(ex: Executor) -> list[act.Action]:
    return [act.rollback(act.check_unit(ex.new_unit), act.check_unit(ex.old_unit))]


async def run_stop_old(ex: Any, who: str) -> str:
    """The engine's stop of a unit (its command, a lost reply re-read, the GPU drain), then this
    node counts as stopped for the others' turns."""
    said = await unit_steps.run_stop_old(ex, who)
    ex.stopped()
    return str(said)


async def run_start_new(ex: Any, who: str) -> str:
    unit = act.check_unit(ex.new_unit)
    (action,) = ex.build("start_new")
    await ex._approval("start_new", who)
    ex._set("start_new", detail="waiting for its turn: every node stopped and drained, the nodes before it started")
    await ex.my_turn()
    await unit_steps.unit_command(ex, "start_new", who, unit, action.commands[0], running_after=True)
    ex.started()
    return f"{unit} started; ready is the whole deployment's (rank 0 answers, every node's ranks up)"


async def run_rollback(ex: Any, who: str) -> str:
    """The engine's rollback action on a node: the new unit stopped and drained, then the old one
    started in its turn (every node of the rollback stopped, the nodes before it started)."""
    await ex._approval("rollback", who)
    new, old = act.check_unit(ex.new_unit), act.check_unit(ex.old_unit)
    (action,) = ex.build("rollback")
    stop, start = action.commands
    issued = ex._clock()
    await unit_steps.unit_command(ex, "rollback", who, new, stop, running_after=False)
    drained = await ex.drain("rollback", issued)
    ex.stopped()
    ex._set("rollback", detail=f"{new} stopped; {drained}; waiting for its turn to start {old}")
    await ex.my_turn()
    await unit_steps.unit_command(ex, "rollback", who, old, start, running_after=True)
    ex.started()
    return f"{new} stopped; {drained}; {old} started (ready is the whole deployment's)"


UNIT = (RUNTIME,)
STEPS: tuple[Step, ...] = (
    Step("stop_old", _stop_preview, run_stop_old, UNIT, (PATH,), rollback="rollback"),
    Step("start_new", _start_preview, run_start_new, UNIT, (PATH,), rollback="rollback"),
    Step("rollback", _rollback_preview, run_rollback, UNIT, (PATH,)),
)


def step_of(key: str) -> Step:
    step = next((s for s in STEPS if s.key == key), None)
    if step is None:
        raise act.ActionError(f"{STEP_TITLES.get(key, key)} is not a step of a deployment swap")
    return step


def node_plan(kind: str, ran: bool = True) -> list[Planned]:
    """One node's plan: the table's restart row on a systemd unit, the steps a deployment swap takes
    and every other step of that row skipped with its reason. A rollback is the engine's rollback
    step alone; `ran` False: nothing of the swap ran on the node, so its rollback is skipped too."""
    row = swap_plan.steps_of(PATH, RUNTIME, verify_sha=True)
    if kind == "rollback":
        lines = [Planned("rollback", step_of("rollback") if ran else None, None if ran else NOTHING_RAN)]
        return lines + [Planned(k, None, SKIPS[k]) for k in row if k in SKIPS]
    return [Planned(k, step_of(k)) if k not in SKIPS else Planned(k, None, SKIPS[k]) for k in row]


__all__ = ["NOTHING_RAN", "NodeExecutor", "PATH", "RUNTIME", "SKIPS", "STEPS", "StartTurns", "audit_line", "node_plan",
           "step_of"]
