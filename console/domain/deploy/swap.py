"""The swap across a deployment's nodes (issue 37): every node's old unit stopped (each drained),
the new units started in the order SGLang needs (rank 0 first: it hosts the rendezvous store the
others join; prefill before decode), ready only when the whole deployment is ready (state.derive),
and a rollback of every node.

One side of a prefill/decode pair may be swapped alone behind the router (`side="decode"` or
`"prefill"`): the other side keeps running untouched. Only when the model allows it: the prefill
side computes the KV cache the decode side receives, so both must run the same weights (the same
model, revision, quantization) and agree on how the KV cache is laid out and sent (KV cache dtype,
page size, transfer backend). A side whose target unit differs from the other side's serving unit
in any of those is refused, naming the flag: a model change swaps both sides. A flag-only change
(batch limits, CUDA graphs, memory fraction) may be one-sided. While any PD swap runs, the router's
own view of its workers (router.py: its `GET /workers`) is read on the router's host and each
change goes to the router's timeline in the report: the swapped side's worker unhealthy, then back.

The host swap's machinery, not a second one: when any node's profile says `require_approval`, the
run waits (after the gate, before any command) for another person's approval — the two-person rule,
`approve(request_id, who)` refused for the requester — asked as the host swap asks it, an
`ApprovalChanged` in every node's HostState; each command and each decision is an `AuditAppended`
in its node's state as well as a line of the audit file. So every node's recording holds the
deployment swap's requests and commands, and a paired console attached to a node sees the request
and approves it with the host screen's own key (console/share/deployment.py routes it here).

The plan is the swap engine's, one per node (node_steps.py): the path × runtime table's restart row
on a systemd unit, each step one of the engine's step objects (stop_old: the engine's stop and GPU
drain; start_new: `systemctl start` in the node's turn; rollback: the engine's rollback action),
every step the deployment does not take skipped in the node's state with its reason. `plan()` lists
every command before anything runs; `ask()` gives the confirmation and `confirm(id)` runs it once;
the gate is the checks across nodes (checks.py: flags, downloads, rendezvous) and no node's fault;
under read_only nothing runs; a failed step stops the plan (rollback is offered) and the rollback
undoes the nodes whose swap ran. Each node's steps run against its NodeExecutor: the steps' intent,
words and who go into the node's HostState, each command is audited there and in the audit file;
their times and what the host did are the node's observer's, never the swap's: the report shows
each node's timeline read back from the node's state (its steps, its log's init and ready lines).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from console.core.derive.swap_view import STEP_TITLES
from console.core.events import ApprovalChanged, AuditAppended, AuditEntry
from console.domain.deploy.checks import Check
from console.domain.deploy.node_steps import NOTHING_RAN, NodeExecutor, StartTurns, audit_line, node_plan
from console.domain.deploy.profile import Deployment, DeploymentNode
from console.domain.deploy.read_back import read_back
from console.domain.deploy.router import read_router
from console.domain.deploy.state import DUMMY_HEALTH, FIRED_UP, INIT_BEGIN, INIT_ENDS, message
from console.domain.swap import actions as act
from console.domain.swap.errors import StepFailed, StepRefused
from console.domain.swap.steps import Planned
from console.sanitize import clean_line

ROUTER_EVERY_S = 1.0  # how often the router's /workers is read while a PD swap runs
# What both sides of a PD pair must agree on (the KV cache prefill computes is what decode receives):
# the weights (--model-path compared by its last component: hosts may mount models elsewhere)
# and the KV cache's layout and transport.
PD_MUST_MATCH = ("--model-path", "--revision", "--quantization", "--kv-cache-dtype", "--page-size",
                 "--disaggregation-transfer-backend")
SIDES = ("prefill", "decode")


@dataclass(frozen=True, slots=True)
class NodeStep:
    """One command of a node's plan, as the confirmation lists it."""

    node: str  # the node's key
    label: str
    title: str  # "stop sglang-qwen397b-r1.service"
    command: act.RemoteCommand
    key: str = "stop_old"  # the engine's step it belongs to (stop_old, start_new, rollback)


@dataclass
class NodeTimeline:
    """What happened on one node, in the console's clock: the swap's own intents (issued) and what
    the node's state showed (unit inactive, GPUs drained, its log's init and ready lines)."""

    label: str
    events: list[tuple[float | None, str]] = field(default_factory=list)  # None: no time observed

    def add(self, at_s: float | None, what: str) -> None:
        self.events.append((at_s, what))


@dataclass
class SwapRun:
    kind: str  # "swap" or "rollback"
    started_at_s: float
    outcome: str = "running"  # "ready", "failed: …", "refused: …"
    ended_at_s: float | None = None
    nodes: dict[str, NodeTimeline] = field(default_factory=dict)


def start_order(d: Deployment, side: str | None = None) -> list[DeploymentNode]:
    """Rank 0 first (it opens the store at --dist-init-addr), then the other ranks; prefill before
    decode; the router is not swapped (its URLs name the same servers). `side`: that side's nodes only."""
    role_order = {"rank": 0, "prefill": 0, "decode": 1}
    nodes = [n for n in d.nodes if n.role != "router" and (side is None or n.role == side)]
    return sorted(nodes, key=lambda n: (role_order.get(n.role, 2), n.node_rank))


def _side(state: Any, which: str) -> Any:
    report = state.data("service") if state is not None else None
    return getattr(report, which, None)


def _model_value(cmd: Any, flag: str) -> Any:
    v = cmd.value(flag)
    if flag == "--model-path" and isinstance(v, str):
        return v.rstrip("/").rsplit("/", 1)[-1]
    return v


def one_side_refusal(d: Deployment, states: Any, side: str, kind: str = "swap") -> str | None:
    """Why `side` may not be swapped alone now (None: it may), from the nodes' own service reports:
    the side's target unit (its unit for a swap, its compare_unit for a rollback) against the unit
    the other side is serving now."""
    if d.kind != "pd":
        return "one side is a prefill/decode deployment's: a multi-node server's nodes swap together"
    if side not in SIDES:
        return f"the side is prefill or decode, not {side!r}"
    other = "decode" if side == "prefill" else "prefill"
    target = "new" if kind == "swap" else "old"
    mine = [(n, getattr(_side(states.get(n.key), target), "command", None)) for n in d.group(side)]
    for n, cmd in mine:
        if cmd is None:
            return f"{n.label}'s target unit is not read yet: whether it runs the same model as {other} is not known"
    serving = []
    for n in d.group(other):
        new, old = _side(states.get(n.key), "new"), _side(states.get(n.key), "old")
        live = next((s for s in (new, old) if getattr(s, "active_state", None) == "active"
                     and getattr(s, "command", None) is not None), None)
        if live is None:
            return f"{n.label} serves no unit that was read (neither is active): nothing to keep serving"
        serving.append((n, live.command))
    for n, cmd in mine:
        for o, theirs in serving:
            for flag in PD_MUST_MATCH:
                a, b = _model_value(cmd, flag), _model_value(theirs, flag)
                if a != b:
                    return (f"{n.label}'s unit has {flag} {a if a is not None else '(absent)'} and {o.label} "
                            f"serves {b if b is not None else '(absent)'}: prefill and decode must run the same "
                            "weights and KV cache layout, so this change swaps both sides (S)")
    return None


class DeploymentSwap:
    def __init__(self, watch: Any, *, who: str = "operator", ready_timeout_s: float = 600.0,
                 drain_timeout_s: float = 120.0, audit_file: Path | None = None,
                 clock: Any = time.time) -> None:
        self.watch = watch
        self.deployment: Deployment = watch.deployment
        self.who = who
        self.ready_timeout_s = ready_timeout_s
        self.drain_timeout_s = drain_timeout_s
        self.audit_file = audit_file
        self.clock = clock
        self.runs: list[SwapRun] = []
        self.busy = False
        self._approvals: dict[str, asyncio.Future[str]] = {}
        self.on_end: list[Any] = []  # called with each run when it ends, refused ones too (the recording)
        self._swapped: set[str] | None = None  # the nodes the last swap ran a command on (None: no swap ran)
        # A swap another console ran (killed, or beside this one): the nodes it reached, from the audit file
        back, why = read_back(audit_file, self.deployment, clock())
        self.read_back_note: str | None = back.note if back is not None else why
        if back is not None:
            self._swapped = set(back.swapped)
        self._previews: dict[str, tuple[str, str | None]] = {}  # a confirmation to give: (kind, side)
        self._consumed: dict[str, tuple[str, str | None]] = {}  # confirmations given: each runs once

    # -- the two-person rule (the host swap's events, in every node's state) ------------------
    @property
    def require_approval(self) -> bool:
        return any(n.profile.require_approval for n in self.deployment.nodes)

    def _states(self) -> list[Any]:
        return [st for n in self.deployment.nodes if (st := self.watch.states.get(n.key)) is not None] \
            if hasattr(self.watch, "states") else []

    def request(self, rid: str) -> ApprovalChanged | None:
        return next((st.swap.approvals[rid] for st in self._states()
                     if rid in getattr(getattr(st, "swap", None), "approvals", {})), None)

    def pending(self) -> list[ApprovalChanged]:
        return [a for a in {a.request_id: a for st in self._states() for a in st.swap.approvals.values()}.values()
                if a.status == "pending" and a.request_id in self._approvals]

    def _tell(self, event: Any) -> None:
        for st in self._states():
            st.apply(replace(event, host=st.host) if hasattr(event, "host") else event)

    def approve(self, request_id: str, who: str) -> str | None:
        """Another person grants a pending request (the requester cannot: the two-person rule)."""
        return self._decide(request_id, who, "granted")

    def deny(self, request_id: str, who: str) -> str | None:
        return self._decide(request_id, who, "denied")

    def withdraw(self, request_id: str, who: str) -> str | None:
        req, future = self.request(request_id), self._approvals.get(request_id)
        if req is None or future is None or req.status != "pending":
            return "no such pending request"
        if who != req.requested_by:
            return f"only {req.requested_by}, who asked, can withdraw it"
        return self._settle(req, who, "withdrawn", future)

    def _decide(self, request_id: str, who: str, status: str) -> str | None:
        req, future = self.request(request_id), self._approvals.get(request_id)
        if req is None or future is None or req.status != "pending":
            return "no such pending request"
        if not who or who == req.requested_by:
            return "another person must approve (the two-person rule)"
        return self._settle(req, who, status, future)

    def _settle(self, req: ApprovalChanged, who: str, status: str, future: asyncio.Future[str]) -> None:
        self._tell(replace(req, status=status, decided_by=who, decided_at_s=self.clock()))
        if not future.done():
            future.set_result(status)
        return None

    async def _approval(self, run: SwapRun, kind: str, side: str | None) -> str | None:
        """Wait for another person's decision; None when granted, else why nothing runs."""
        rid = secrets.token_hex(4)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._approvals[rid] = future
        action = f"{kind} of deployment {self.deployment.name}" + (f" ({side} side alone)" if side else "")
        commands = tuple(line for line in self.preview(kind, side) if not line.startswith("#"))
        self._tell(ApprovalChanged("", rid, action, commands, self.who, self.clock()))
        for key in run.nodes:
            run.nodes[key].add(self.clock(), f"waiting for another person's approval (request {rid})")
        try:
            status = await future
        except asyncio.CancelledError:
            req = self.request(rid)
            if req is not None and req.status == "pending":
                self._tell(replace(req, status="withdrawn", decided_at_s=self.clock()))
            raise
        finally:
            self._approvals.pop(rid, None)
        decided = self.request(rid)
        by = decided.decided_by if decided is not None and decided.decided_by else "?"
        for n in self.deployment.nodes:
            self._audit_event(n.key, AuditEntry(by, self.clock(), action, f"approval {rid}: {status}", None, "",
                                                note="two-person rule"))
        self._audit_line({"who": by, "deployment": self.deployment.name, "action": action,
                          "command": f"approval {rid}: {status}", "status": None, "note": "two-person rule"})
        if status != "granted":
            return f"{by} {'withdrew' if status == 'withdrawn' else status} the request: nothing ran"
        for key in run.nodes:
            run.nodes[key].add(self.clock(), f"approved by {by}")
        return None

    # -- what runs, before it runs ----------------------------------------------------------
    @property
    def read_only(self) -> bool:
        return any(n.profile.read_only for n in self.deployment.nodes)

    def plan(self, kind: str = "swap", side: str | None = None) -> list[NodeStep]:
        """Every host command, in order (raises ActionError on a unit name a command cannot hold):
        each node's plan of the engine's steps (node_steps.py), its stops first (the other ranks
        first, rank 0 last: nothing waits on a store), then its starts in the start order. A rollback
        covers the nodes whose swap ran (every node when no swap ran from this console)."""
        order = [n for n in start_order(self.deployment, side) if kind != "rollback" or self._ran(n.key)]
        stops: list[NodeStep] = []
        starts: list[NodeStep] = []
        for n in order:
            if (why := _not_a_unit(n)) is not None:
                raise act.ActionError(why)
            ex = self._executor(n, None)
            for line in node_plan(kind):
                if line.step is None:
                    continue
                for a in line.step.preview(ex):
                    for cmd in a.commands:
                        step = NodeStep(n.key, n.label, cmd.purpose, cmd, line.key)
                        (stops if cmd.purpose.startswith("stop") else starts).append(step)
        return list(reversed(stops)) + starts

    def _ran(self, key: str) -> bool:
        """Whether the node's swap ran a command (a rollback undoes it); unknown (no swap ran from
        this console): yes, every node is rolled back."""
        return self._swapped is None or key in self._swapped

    def _executor(self, n: DeploymentNode, turns: StartTurns | None, run: SwapRun | None = None) -> NodeExecutor:
        states = getattr(self.watch, "states", {})
        runner = getattr(self.watch, "runner", None)
        ex = NodeExecutor(n, states.get(n.key), self.watch.transport(n.key) if turns is not None else None,
                          runner(n.key) if runner is not None and turns is not None else None, self.who,
                          self.deployment.name, turns or StartTurns([]), self.audit_file, self.clock,
                          self.drain_timeout_s)
        if run is not None and n.key in run.nodes:
            timeline = run.nodes[n.key]
            ex.on_issue = lambda cmd: timeline.add(self.clock(), f"{cmd.purpose} issued by {self.who}")
        return ex

    def side_refusal(self, side: str, kind: str = "swap") -> str | None:
        return one_side_refusal(self.deployment, self.watch.states, side, kind)

    def preview(self, kind: str = "swap", side: str | None = None) -> list[str]:
        """The lines the confirmation shows: each node's exact command, then what is waited for."""
        if side is None:
            lines = [f"# {kind} of {self.deployment.name}: {len(start_order(self.deployment))} nodes"]
        else:
            other = "decode" if side == "prefill" else "prefill"
            lines = [f"# {kind} of {self.deployment.name}'s {side} side alone: "
                     f"{len(start_order(self.deployment, side))} node(s); {other} keeps running, untouched"]
        if self.read_back_note and not self.runs:
            lines.append(f"# {self.read_back_note}")
        if kind == "rollback":
            lines += [f"# {n.label}: not rolled back: {NOTHING_RAN}" for n in start_order(self.deployment, side)
                      if not self._ran(n.key)]
        for s in self.plan(kind, side):
            lines.append(f"{s.label}: {s.command.script}")
            if s.title.startswith("stop"):
                lines.append(f"{s.label}: then wait: the unit inactive and its GPU memory drained")
        if self._router() is not None:
            lines.append("meanwhile: the router's GET /workers read on its host every second (its view in the report)")
            if side is not None:
                lines.append(f"while {side} is down the router has no {side} worker: requests through it fail "
                             "until it is back")
        lines.append("then wait: the whole deployment ready (rank 0 answers, every node's ranks up)")
        return lines

    def _router(self) -> DeploymentNode | None:
        return next((n for n in self.deployment.nodes if n.role == "router"), None)

    def gate(self) -> list[str]:
        """Why the swap may not start now (empty: it may): a failed check or a fault of any node."""
        why = [f"{c.name}: {c.message}" for c in self.watch.checks() if c.severity == "error"]
        why += [f"fault: {f}" for f in self.watch.view().faults]
        return why

    # -- the confirmation, once ---------------------------------------------------------------
    def ask(self, kind: str = "swap", side: str | None = None) -> tuple[str, list[str]]:
        """A confirmation to give: its id and what it shows (preview's lines; ActionError on a unit
        name a command cannot hold). `confirm(id)` runs it, once (the host executor's rule)."""
        lines = self.preview(kind, side)
        pid = secrets.token_hex(6)
        self._previews[pid] = (kind, side)
        return pid, lines

    async def confirm(self, preview_id: str) -> SwapRun:
        """Run what the confirmation `preview_id` showed; a second confirmation of it is refused."""
        entry = self._previews.pop(preview_id, None)
        if entry is None:
            kind, side = self._consumed.get(preview_id, ("swap", None))
            run = self._new_run(kind, side)
            return self._end(run, "refused: already confirmed: it runs once" if preview_id in self._consumed
                             else "refused: no such confirmation (open the preview again)")
        self._consumed[preview_id] = entry
        return await self.run(entry[0], confirmed=True, side=entry[1])

    # -- running -----------------------------------------------------------------------------
    def _new_run(self, kind: str, side: str | None) -> SwapRun:
        nodes = {n.key: NodeTimeline(n.label) for n in start_order(self.deployment, side)}
        if (router := self._router()) is not None:
            nodes[router.key] = NodeTimeline("router (its view of the workers)")
        run = SwapRun(kind if side is None else f"{kind} of the {side} side", self.clock(), nodes=nodes)
        self.runs.append(run)
        return run

    async def run(self, kind: str = "swap", *, confirmed: bool = False, side: str | None = None) -> SwapRun:
        """Run the plan now (`confirmed`: the caller showed the preview and was answered: a script's,
        or `--yes`); a screen gives its confirmation once through ask/confirm."""
        run = self._new_run(kind, side)
        router = self._router()
        if self.read_only:
            return self._end(run, "refused: read-only: this session changes nothing on the hosts")
        if not confirmed:
            return self._end(run, "refused: not confirmed (the preview lists what would run)")
        if self.busy:
            return self._end(run, "refused: a swap is running: one at a time")
        if kind == "swap" and hasattr(self.watch, "probe_all"):
            await self.watch.probe_all()  # the gate judges the nodes as they are now, not at the last probe
        if kind == "swap" and (why := self.gate()):
            return self._end(run, "refused: the gate: " + "; ".join(why[:3]))
        if side is not None and (why := self.side_refusal(side, kind)) is not None:
            return self._end(run, f"refused: one side alone: {why}")
        try:
            self.plan(kind, side)  # every unit name checked before anything runs
        except act.ActionError as exc:
            return self._end(run, f"refused: {exc}")
        if kind == "rollback" and not any(self._ran(n.key) for n in start_order(self.deployment, side)):
            return self._end(run, "refused: nothing to roll back: the swap ran no command on any node")
        self.busy = True
        if self.require_approval:
            try:
                why = await self._approval(run, kind, side)
            except BaseException:
                self.busy = False
                raise
            if why is not None:
                self.busy = False
                return self._end(run, f"refused: {why}")
        observer = asyncio.ensure_future(self._observe_router(run, router)) if router is not None else None
        try:
            if (failed := await self._walk(run, kind, side)) is not None:
                return self._end(run, f"failed: {failed}")
            return self._end(run, await self._ready(run))
        finally:
            self.busy = False
            if observer is not None:
                observer.cancel()
                with contextlib.suppress(BaseException):
                    await observer

    async def _walk(self, run: SwapRun, kind: str, side: str | None) -> str | None:
        """Every node's plan at once, each walked in order by its node's executor (the starts wait
        for their turn: StartTurns); a failed step stops the plan (nodes waiting for their turn start
        nothing). Returns the first failure, or None when every node's plan ran."""
        order = start_order(self.deployment, side)
        running = [n for n in order if kind != "rollback" or self._ran(n.key)]
        turns = StartTurns([n.key for n in running])
        executors = {n.key: self._executor(n, turns, run) for n in order}
        plans = {n.key: node_plan(kind, ran=kind != "rollback" or self._ran(n.key)) for n in order}
        for n in order:  # the plan in each node's state: what runs pending, what it skips with why
            ex = executors[n.key]
            if ex.state is None:
                continue
            for line in plans[n.key]:
                if line.step is None:
                    ex._set(line.key, state="skipped", detail=line.skipped or "", who=None, commands=())
                else:
                    ex._set(line.key, state="pending", detail="", who=None)
        try:
            await asyncio.gather(*(self._walk_node(executors[n.key], plans[n.key], run) for n in order))
        finally:
            if kind != "rollback":
                self._swapped = {k for k, ex in executors.items() if ex.issued} | (
                    self._swapped or set() if side is not None else set())
        return turns.failed

    async def _walk_node(self, ex: NodeExecutor, plan: list[Planned], run: SwapRun) -> None:
        """One node's plan, step by step: the engine's rules for each (its intent and who written
        through `_set`, its words its run's; failed or refused stops the node and the plan)."""
        label = ex.node.label
        for line in plan:
            if line.step is None:
                continue
            key, title = line.key, STEP_TITLES.get(line.key, line.key)
            if ex.turns.failed is not None:  # never left pending: the plan stopped before it
                ex._set(key, state="refused", detail=f"not run: the plan stopped ({ex.turns.failed})", who=self.who)
                continue
            ex.busy = key
            try:
                commands = tuple(text for a in ex.build(key) for text in a.display())
                ex._set(key, state="running", detail="", commands=commands, who=self.who)
                words = await line.step.run(ex, self.who)
            except StepRefused as exc:
                ex._set(key, state="refused", detail=str(exc))
                ex.turns.fail(f"{label}: {title}: {exc}")
                continue
            except (StepFailed, act.ActionError) as exc:
                ex._set(key, state="failed", detail=f"{exc} (rollback is offered)")
                ex.turns.fail(f"{label}: {title}: {exc}")
                continue
            except asyncio.CancelledError:
                ex._set(key, state="failed", detail="cancelled (the console closed)")
                ex.turns.fail(f"{label}: {title}: cancelled")
                raise
            finally:
                ex.busy = None
            ex._set(key, state="done", detail=words)

    async def _observe_router(self, run: SwapRun, router: DeploymentNode) -> None:
        """The router's view of its workers, each change on the router's timeline (until cancelled)."""
        while True:
            await self._read_router(run, router)
            await asyncio.sleep(ROUTER_EVERY_S)

    async def _read_router(self, run: SwapRun, router: DeploymentNode) -> Any:
        view = await read_router(self.watch.transport(router.key), router.profile.server_port)
        line = f"router: {view.describe()}"
        events = run.nodes[router.key].events
        if not events or events[-1][1] != line:
            run.nodes[router.key].add(self.clock(), line)
        return view

    async def _router_not_ready(self, run: SwapRun) -> str | None:
        """Why the router does not serve the swapped servers yet (None: it does, or cannot say): a
        worker its own GET /workers still lists as unhealthy (its health checks lag the servers')."""
        router = self._router()
        if router is None or router.key not in run.nodes:
            return None
        view = await self._read_router(run, router)
        bad = [w for w in (view.workers or ()) if w.healthy is False]
        return f"the router still lists {bad[0].worker_type} {bad[0].url} as unhealthy" if bad else None

    def _end(self, run: SwapRun, outcome: str) -> SwapRun:
        run.outcome = outcome
        run.ended_at_s = self.clock()
        if not outcome.startswith("refused"):  # a refused run ran nothing: no node has a timeline
            self._read_back(run)
        for callback in list(self.on_end):
            callback(run)
        return run

    async def _ready(self, run: SwapRun) -> str:
        deadline = time.monotonic() + self.ready_timeout_s
        asked = 0.0
        router_why: str | None = None
        while time.monotonic() < deadline:
            if time.monotonic() - asked > 3.0:  # each node's probe asks its server port too
                asked = time.monotonic()
                await self.watch.probe_all()
            status = self.watch.view().status
            if status.status == "ready":
                # behind a router, ready is also the router's own word: it routes to every worker again
                if (router_why := await self._router_not_ready(run)) is None:
                    return "ready"
            if status.status == "failed":
                return f"failed: {status.reason}"
            await asyncio.sleep(0.5)
        reason = router_why if self.watch.view().status.status == "ready" and router_why else \
            self.watch.view().status.reason
        return f"failed: not ready within {self.ready_timeout_s:.0f} s: {reason}"

    def _read_back(self, run: SwapRun) -> None:
        """Each node's own lines since the run began, as the node's state holds them: its init
        begin/ends, its dummy health server, rank 0's ready line (times on the console's clock)."""
        view = self.watch.view()
        marks = {INIT_BEGIN: "distributed init began", INIT_ENDS: "distributed init ended",
                 DUMMY_HEALTH: "dummy health server up", FIRED_UP: "ready line"}
        seen: set[tuple[str, str]] = set()
        for line in view.timeline:
            if line.at_s is None or line.at_s < run.started_at_s or line.node not in run.nodes:
                continue
            for needle, what in marks.items():
                if line.text.startswith(needle) and (line.node, what) not in seen:
                    seen.add((line.node, what))
                    run.nodes[line.node].add(line.at_s, f"{what} ({line.label})")
        # each node's steps as its state holds them: the words the steps wrote, the times its
        # observer wrote (none where the node's state has no observer: the time is not known)
        keys = ("rollback",) if run.kind.startswith("rollback") else ("stop_old", "start_new")
        for key, t in run.nodes.items():
            state = self.watch.states.get(key) if hasattr(self.watch, "states") else None
            steps = getattr(getattr(state, "swap", None), "steps", {})
            for k in keys:
                step = steps.get(k)
                if step is None or step.state in ("pending", "running"):
                    continue
                t.add(step.ended_at_s, f"{step.title}: {step.state}" + (f": {step.detail}" if step.detail else ""))
        for t in run.nodes.values():
            t.events.sort(key=lambda e: (e[0] is None, e[0] or 0.0))

    def _audit_event(self, key: str, entry: AuditEntry) -> None:
        state = self.watch.states.get(key) if hasattr(self.watch, "states") else None
        if state is not None:
            state.apply(AuditAppended(state.host, entry))

    def _audit_line(self, record: dict[str, Any]) -> None:
        audit_line(self.audit_file, self.clock(), record)


def _not_a_unit(n: DeploymentNode) -> str | None:
    """Why a node cannot be swapped by the deployment swap (its steps are systemd's), or None."""
    p = n.profile
    if p.unit and p.compare_unit:
        return None
    container = getattr(p, "container", None) or getattr(p, "compose", None)
    if container:
        return (f"{n.label} runs SGLang in a container ({clean_line(str(container))[:80]}): the deployment swap "
                f"stops and starts systemd units only; swap that host on its own (gpuconsole --profile "
                f"{clean_line(p.name)[:60]}, the Swap plan)")
    missing = " and ".join(k for k, v in (("unit", p.unit), ("compare_unit", p.compare_unit)) if not v)
    return f"{n.label}: its profile names no {missing} (the new and the old systemd unit the swap stops and starts)"


def format_report(run: SwapRun, deployment: Deployment, checks: tuple[Check, ...] = ()) -> str:
    """The run as Markdown: the outcome, then each node's timeline (seconds from the start)."""
    took = f"{run.ended_at_s - run.started_at_s:.1f} s" if run.ended_at_s is not None else "running"
    out = [f"# {run.kind} of {deployment.name}: {run.outcome}", "",
           f"started {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(run.started_at_s))} UTC, took {took}", ""]
    for key, t in run.nodes.items():
        out.append(f"## {t.label} ({deployment.node(key).profile.host})")
        if not t.events:
            out.append("- nothing happened on this node")
        for at, what in t.events:
            when = f"+{at - run.started_at_s:6.1f} s" if at is not None else "(no time observed)"
            out.append(f"- {when}  {what}")
        out.append("")
    return "\n".join(out)


__all__ = ["DeploymentSwap", "SwapRun", "format_report", "message", "start_order"]
