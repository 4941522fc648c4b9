"""The swap, run in the core: the runner owns one `SwapController`; views ask it for a preview
(the exact commands), confirm it once, approve, override a gate check. Everything it does reaches
the views as state events (the plan's steps, the gate, the downtime clock, approvals, the audit
log), so every attached client sees the same thing and a recording can be turned into a report.

Rules kept here, not in a widget: read-only refuses every action; one action at a time; a
confirmation runs once; a failed step stops the plan (rollback is offered); a step whose command
lost the connection is re-read from the host when it is back, never assumed.

This is the one executor: every key's preview and run is a step object of console/domain/swap/steps.py,
chosen for the swap's path and runtime from the path × runtime table (console/core/derive/swap_plan.py);
the steps' bodies are their modules' (shared_steps: download, verify, preflight, benchmark and the
shared waits; unit_steps: systemd units; container_steps: containers; fastpath and container_fastpath:
the paths' own steps). The executor walks the plan and writes each step's intent, words and who
through `_set`, runs every command through `_run` (audited), and keeps the approvals and the gate;
the step's start and end are the observer's (console/core/derive/swap_observer.py), as are the
downtime and what the host did.
"""

from __future__ import annotations

import asyncio
import difflib
import getpass
import json
import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from console.core.derive.swap_observer import _side
from console.core.derive.swap_view import (
    STEP_TITLES,
    ApprovalChanged,
    AuditAppended,
    AuditEntry,
    GateChanged,
    SwapSetup,
    SwapStep,
    SwapStepChanged,
)
from console.domain.swap import actions as act
from console.domain.swap import audit_log, container_plan, fastpath, path_choice, preflight, shared_steps, steps
from console.domain.swap.errors import StepFailed, StepRefused, _Dropped
from console.host.transport.errors import CommandTimeout, TransportError
from console.locations import data_home
from console.redact import redact_text

log = logging.getLogger("gpuconsole.swap")

APPROVAL_ACTIONS = ("stop_old", "start_new", "rollback", *fastpath.APPROVAL_KEYS)  # issue 24: its host changes
ACTIONS = ("download", "stop_download", "verify", "install", "preflight", "stop_old", "start_new", "benchmark",
           "rollback", "swap", *fastpath.KEYS)  # fastpath.KEYS: issue 24's faster paths
# Commands that start, stop or replace a unit (or a container): the service source re-reads at once
UNIT_ACTIONS = ("install", "stop_old", "start_new", "rollback", "in_place", "beside", "switch_traffic")
TAIL_CHARS = 600


def default_who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"


def audit_path(*, demo: bool = False) -> Path:
    """The user's audit log; a demo keeps its own beside it (its simulated actions are not the user's)."""
    return data_home() / ("demo-audit.jsonl" if demo else "audit.jsonl")


@dataclass(frozen=True, slots=True)
class Preview:
    """What a confirmation dialog shows: the action's commands, and the gate for a stop."""

    id: str
    key: str
    title: str
    lines: tuple[str, ...]
    needs_approval: bool
    gate: tuple[Any, ...] = ()


class SwapController:
    def __init__(self, runner: Any, *, who: str | None = None) -> None:
        self.runner = runner
        self.state = runner.state
        self.host = runner.host
        self.session = runner.session
        self.profile = runner.session.profile
        self.who = who or default_who()
        self.busy: str | None = None
        self.poll_s = 0.5
        self.bench_plan: list[tuple[int, int, int, int]] | None = None  # None: the story's sweep
        self.audit_file: Path | None = getattr(runner.session, "audit_file", None) or audit_path(
            demo=bool(getattr(runner.session, "demo", False)))
        self._previews: dict[str, tuple[str, float]] = {}
        self._consumed: set[str] = set()
        self._overrides: dict[str, str] = {}
        self._approvals: dict[str, asyncio.Future[str]] = {}
        self._task: asyncio.Task[Any] | None = None
        self._download_task: asyncio.Task[Any] | None = None
        self._clock: Callable[[], float] = time.time
        # The swap as the host lived it (steps nobody ran from here, written in as observed) is a
        # step of the state's apply, turned on by the runner (console/core/derive.py: Observe).
        self.fast = fastpath.FastPaths(self)  # issue 24: the path plan (path_choice.py chooses) and its commands
        self.containers = container_plan.ContainerPlan(self)  # issue 26: the swap on containers

    # -- what views may ask ----------------------------------------------------------------
    @property
    def read_only(self) -> bool:
        return bool(getattr(self.profile, "read_only", False) or self.state.info.read_only)

    @property
    def old_unit(self) -> str | None:
        if self.containers.active:  # issue 26 hook: the old service is a container
            return self.containers.old_name
        return self.profile.compare_unit

    @property
    def new_unit(self) -> str | None:
        if self.containers.active:  # issue 26 hook: the new service is a container
            return self.containers.new_name
        return self.profile.unit

    def announce(self) -> None:
        compose_file, old_service, new_service = (self.containers.compose_names() if self.containers.active
                                                  else (None, None, None))
        self.state.apply(SwapSetup(self.host, self.old_unit, self.new_unit, self.profile.repo_id,
                                   self.profile.model_dir, self.read_only,
                                   bool(getattr(self.profile, "require_approval", False)),
                                   bool(getattr(self.profile, "verify_sha", False)), self.busy,
                                   compose_file, old_service, new_service))
        if self.containers.active:  # issue 26 hook
            self.containers.announce()
        if not self.state.swap.audit:  # a fresh console: the commands of one that ended mid-swap, by whom
            entries, why = audit_log.read_back(self.audit_file, self.host, self._clock())
            for entry in entries:
                self.state.apply(AuditAppended(self.host, entry))
            if why:
                self.runner.notice("audit log", why, "warning")

    def refusal(self, key: str) -> str | None:
        if self.read_only:
            return "read-only: this session changes nothing on the host"
        if key not in ACTIONS:
            return f"no such action: {key}"
        if self.busy is not None:
            return f"{STEP_TITLES.get(self.busy, self.busy)} is running: one action at a time"
        if key == "download" and self._download_followed():
            return "the download is already running (x stops it)"
        return None

    def build(self, key: str) -> list[act.Action]:
        """The actions behind a key, with their exact commands (raises ActionError on bad values):
        the preview of the step the swap's path and runtime take (console/domain/swap/steps.py)."""
        if key == "stop_download":
            return [act.stop_download(self.profile.model_dir or "")]
        if key == "swap":
            out: list[act.Action] = []
            for step in self._remaining():
                out += self.build(step)
            return out
        return steps.step_for(self, key).preview(self)

    def preview(self, key: str) -> tuple[str | None, Preview | None]:
        """(why not, None) or (None, the preview to confirm)."""
        why = self.refusal(key)
        if why:
            return why, None
        try:
            built = self.build(key)
        except (act.ActionError, OSError) as exc:
            return str(exc), None
        lines: list[str] = []
        for a in built:
            lines.append(f"# {a.title}" + ("  (needs another person's approval)" if a.needs_approval else ""))
            lines += a.display()
            lines += self._preview_extra(a)
        gate: tuple[Any, ...] = ()
        if key in ("stop_old", "swap", "preflight"):
            gate = self.evaluate_gate()
        pid = secrets.token_hex(6)
        self._previews[pid] = (key, self._clock())
        return None, Preview(pid, key, STEP_TITLES.get(key, "The swap, step by step"), tuple(lines),
                             any(a.needs_approval for a in built), gate)

    def _preview_extra(self, action: act.Action) -> list[str]:
        """What a preview must show besides the commands: the unit's text and its diff against the
        installed one; the gate's checks as they stand."""

        if action.key == "install" and action.write is not None:
            side = _named_side(self.state.data("service"), self.new_unit)
            installed = side.text if side is not None and side.error is None and side.text else None
            new_text = redact_text(action.write.text)
            out = [f"# {action.write.path}: " + ("the installed file, then the new one (diff)" if installed
                                                  else "not installed yet; its text:")]
            if installed is None:
                return out + [f"  {line}" for line in new_text.splitlines()]
            diff = list(difflib.unified_diff(installed.splitlines(), new_text.splitlines(),
                                             "installed", "new", lineterm="", n=1))
            return out + (diff or ["  (the same text as the installed file)"])
        if action.key == "preflight":
            planned = [] if self.fast.plan is not None or not path_choice.can_plan(self) else [
                "# first the path is planned from the host's read-only facts (both config.json, the shards, "
                "fincore, this host's recorded boots): the gate then shows it with its predicted downtime"]
            return planned + ["# the checks, as they stand now:"] + [
                f"  {c.name}: {c.verdict} — {c.reason}" for c in self.evaluate_gate()]
        return []

    def confirm(self, preview_id: str, who: str | None = None) -> str | None:
        """Run a previewed action; a second confirmation of the same preview is refused."""
        if preview_id in self._consumed:
            return "already confirmed: it runs once"
        entry = self._previews.pop(preview_id, None)
        if entry is None:
            return "no such confirmation (open the action again)"
        key = entry[0]
        why = self.refusal(key)
        if why:
            return why
        self._consumed.add(preview_id)
        self._start(key, who or self.who)
        return None

    def request(self, key: str, who: str | None = None) -> str | None:
        """Preview and confirm at once (the API for scripts and tests)."""
        why, preview = self.preview(key)
        if preview is None:
            return why
        return self.confirm(preview.id, who)

    def override(self, check: str, typed: str, who: str | None = None) -> str | None:
        """Override one failing gate check: only by typing its exact name."""
        if self.read_only:
            return "read-only: this session changes nothing on the host"
        if check not in preflight.CHECKS:
            return f"no such check: {check}"
        if typed.strip() != check:
            return f"type the check's name ({check}) to override it"
        self._overrides[check] = who or self.who
        self._audit(who or self.who, "override", f"override gate check {check}", None, "", note="gate override")
        self.state.apply(GateChanged(self.host, self.evaluate_gate(), self._clock()))
        return None

    def approve(self, request_id: str, who: str) -> str | None:
        """The one hook a paired client calls: another person grants a pending request."""
        return self._decide(request_id, who, "granted")

    def deny(self, request_id: str, who: str) -> str | None:
        return self._decide(request_id, who, "denied")

    def withdraw(self, request_id: str, who: str) -> str | None:
        """The requester takes a pending request back: the step fails, nothing runs."""
        req = self.state.swap.approvals.get(request_id)
        future = self._approvals.get(request_id)
        if req is None or future is None or req.status != "pending":
            return "no such pending request"
        if who != req.requested_by:
            return f"only {req.requested_by}, who asked, can withdraw it"
        self.state.apply(replace(req, status="withdrawn", decided_by=who, decided_at_s=self._clock()))
        if not future.done():
            future.set_result("withdrawn")
        return None

    def _decide(self, request_id: str, who: str, status: str) -> str | None:
        req = self.state.swap.approvals.get(request_id)
        future = self._approvals.get(request_id)
        if req is None or future is None or req.status != "pending":
            return "no such pending request"
        if not who or who == req.requested_by:
            return "another person must approve (the two-person rule)"
        self.state.apply(replace(req, status=status, decided_by=who, decided_at_s=self._clock()))
        if not future.done():
            future.set_result(status)
        return None

    def evaluate_gate(self) -> tuple[Any, ...]:
        return preflight.evaluate(self.state, forbidden=tuple(self.profile.forbidden_prefixes),
                                  verify_sha=bool(getattr(self.profile, "verify_sha", False)),
                                  model_dir=self.profile.model_dir, overrides=self._overrides) \
            + self.fast.gate_checks()  # issue 24 hook: the chosen path and its predicted downtime

    async def wait_idle(self, timeout: float = 600) -> None:
        if self._task is not None:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)

    def cancel(self) -> None:
        for task in (self._task, self._download_task):
            if task is not None:
                task.cancel()

    async def wait_download(self, timeout: float = 600) -> None:
        if self._download_task is not None:
            await asyncio.wait_for(asyncio.shield(self._download_task), timeout)

    # -- running ---------------------------------------------------------------------------
    def _start(self, key: str, who: str) -> None:
        self.busy = key
        self.announce()
        self._task = self.runner._spawn(self._run_key(key, who), f"swap:{key}")

    async def _run_key(self, key: str, who: str) -> None:
        try:
            if key == "swap":
                ran: set[str] = set()
                # The remaining steps again after each: the preflight may plan a faster path (issue 24).
                while (step := next((k for k in self._remaining() if k not in ran), None)) is not None:
                    ran.add(step)
                    if step == "download" and self._download_followed():
                        await asyncio.shield(self._download_task)  # type: ignore[arg-type]
                        if self.state.swap.steps["download"].state != "done":
                            break
                        continue
                    if not await self._step(step, who):
                        break
            elif key == "download":
                # Started, then followed in the background: the other steps (install, the gate) may
                # run while the files arrive, as in the story.
                if await self._step("download", who, detach=True):
                    self._download_task = self.runner._spawn(self._follow_download_step(), "swap:download")
            elif key == "stop_download":
                await shared_steps.stop_download(self, who)
            else:
                await self._step(key, who)
        finally:
            self.busy = None
            self.announce()

    def _remaining(self) -> list[str]:
        """The plan's steps still to run, in order: the row of the path × runtime table for the
        chosen path (console/core/derive/swap_plan.py), less those done or skipped."""
        now = self.state.swap.steps
        return steps.to_run(self, lambda k: k in now and now[k].state in ("done", "skipped"))

    def _set(self, key: str, **changes: Any) -> SwapStep:
        """The step's intent and who (its state, words, commands): never its times. A new intent (a
        run begins, the plan skips it or puts it back) carries no time over from an earlier one: the
        observer (console/core/derive/swap_observer.py) dates each from the moment it sees it."""
        step = self.state.swap.steps.get(key) or SwapStep(key, STEP_TITLES[key])
        state = changes.get("state")
        if state is not None and (step.state != "running" or state == "running"):  # not the end of a run
            step = SwapStep(step.key, step.title)  # the console's own from now on (never "observed")
        step = replace(step, **changes)
        self.state.apply(SwapStepChanged(self.host, step))
        return step

    def _download_followed(self) -> bool:
        return self._download_task is not None and not self._download_task.done()

    async def _follow_download_step(self) -> None:
        try:
            detail = await shared_steps.follow_download(self)
        except StepFailed as exc:
            if self.state.swap.steps["download"].state == "running":
                self._set("download", state="failed", detail=str(exc))
                self.runner.notice("swap step failed", f"{STEP_TITLES['download']}: {exc}", "error")
            return
        if self.state.swap.steps["download"].state == "running":
            self._set("download", state="done", detail=detail)

    async def _step(self, key: str, who: str, *, detach: bool = False) -> bool:
        """Run one step to done, failed or skipped; True when the plan may go on. `detach`: the
        download only starts (the step stays running, followed by another task)."""
        if key in path_choice.PLAN_BEFORE:  # issue 24 hook: the path and its prediction, before anything ran
            await steps.ensure_plan(self)
        try:
            step = steps.step_for(self, key)  # the step of the swap's path and runtime
            commands = tuple(line for a in self.build(key) for line in a.display())
        except (act.ActionError, OSError) as exc:
            self._set(key, state="failed", detail=str(exc),
                      who=who)
            return False
        self._set(key, state="running", detail="", commands=commands,
                  who=who)
        try:
            if detach:
                await shared_steps.download_start(self, who)
                self._set(key, detail="started; following the download")
                return True
            detail = await step.run(self, who)
        except StepRefused as exc:
            self._set(key, state="refused", detail=str(exc))
            self.runner.notice("swap step refused", f"{STEP_TITLES[key]}: {exc}", "warning")
            return False
        except StepFailed as exc:
            self._set(key, state="failed", detail=str(exc))
            if key not in ("rollback", "benchmark", "download", "verify", "preflight", "install"):
                self.runner.notice("swap step failed", f"{STEP_TITLES[key]}: {exc} — rollback is offered", "error")
            else:
                self.runner.notice("swap step failed", f"{STEP_TITLES[key]}: {exc}", "error")
            return False
        except asyncio.CancelledError:
            self._set(key, state="failed", detail="cancelled (the console closed)")
            raise
        if detail == "skipped":
            self._set(key, state="skipped", detail="not asked for by the profile")
        else:
            self._set(key, state="done", detail=detail)
        return True

    # -- commands, audited -----------------------------------------------------------------
    def _audit(self, who: str, action: str, command: str, status: int | None, output: str,
               duration_s: float | None = None, note: str = "") -> None:
        entry = AuditEntry(who, self._clock(), action, redact_text(command), status,
                           redact_text(output[-TAIL_CHARS:]), duration_s, note)
        self.state.apply(AuditAppended(self.host, entry))
        if self.audit_file is not None:
            try:
                self.audit_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                # 0600 like the recordings: who ran what on which host is nobody else's (issue 21, item 16)
                fd = os.open(self.audit_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                if os.fstat(fd).st_mode & 0o077:
                    os.fchmod(fd, 0o600)
                with os.fdopen(fd, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"host": self.host, **{f: getattr(entry, f) for f in entry.__slots__}})
                             + "\n")
            except OSError as exc:
                self.runner.notice("audit log", f"cannot append to {self.audit_file}: {exc}", "warning")

    async def _run(self, who: str, action: str, cmd: act.RemoteCommand) -> Any:
        """One command through the transport; its exit status is respected by the caller. Raises
        _Dropped when no exit status came back (the outcome must be re-read from the host)."""
        started = time.monotonic()
        try:
            result = await self.session.transport.run(cmd.script, timeout=cmd.timeout_s)
        except TransportError as exc:
            kind = "timed out" if isinstance(exc, CommandTimeout) else "connection lost"
            self._audit(who, action, cmd.script, None, str(exc), time.monotonic() - started, note=kind)
            raise _Dropped(f"{kind}: {exc}") from None
        output = (result.text + ("\n" + result.error_text if result.error_text else "")).strip()
        self._audit(who, action, cmd.script, result.exit_status, output, time.monotonic() - started)
        if action in UNIT_ACTIONS:  # a unit started, stopped or replaced: the diff pane reads it now
            self.runner.repoll("service")
        return result

    async def drain(self, key: str, since: float) -> str:
        """The GPUs drained after a stop (console/domain/swap/shared_steps.py), for every runtime's step."""
        return await shared_steps.drain(self, key, since)

    async def death_cause(self, reason: str, wait_s: float = shared_steps.DEATH_CAUSE_WAIT_S) -> str:
        """Why the server died, from its log (console/domain/swap/shared_steps.py)."""
        return await shared_steps.death_cause(self, reason, wait_s)

    async def _reconnected(self, key: str, why: str, timeout_s: float = 600) -> None:
        self._set(key, detail=f"{why}: re-reading the outcome from the host when the connection is back")
        deadline = time.monotonic() + timeout_s
        while not self._connected():
            if time.monotonic() > deadline:
                raise StepFailed(f"{why}; the host did not come back within {timeout_s:.0f}s: outcome unknown")
            await asyncio.sleep(self.poll_s)

    def _connected(self) -> bool:
        return self.session.transport.state.status == "connected"

    async def _unit_state(self, unit: str) -> dict[str, str]:
        for _ in range(3):
            try:
                r = await self.session.transport.run(act.unit_state_check(unit), timeout=20)
                return act.parse_unit_state(r.text)
            except TransportError:
                await self._reconnected(self.busy or "stop_old", "connection lost while reading the unit")
        raise StepFailed(f"cannot read the state of {unit}")

    # -- the steps -------------------------------------------------------------------------

    def _draft_text_raw(self) -> str:
        path = getattr(self.profile, "unit_draft", None)
        if not path:
            raise act.ActionError("no drafted unit: set unit_draft in the profile (the new unit file on this machine)")
        text = Path(path).expanduser().read_text(encoding="utf-8")
        if "[Service]" not in text:
            raise act.ActionError(f"{path} is not a unit file (no [Service] section)")
        return text

    async def _approval(self, key: str, who: str) -> None:
        if not getattr(self.profile, "require_approval", False) or key not in APPROVAL_ACTIONS:
            return
        (action,) = self.build(key)
        if not action.commands:  # issue 24: an action with no command (the operator's switch) changes nothing
            return
        rid = secrets.token_hex(4)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._approvals[rid] = future
        self.state.apply(ApprovalChanged(self.host, rid, key, tuple(action.display()), who, self._clock()))
        # Everyone attached hears of it (a toast in every console), not only whoever opens the plan.
        self.runner.notice("approval needed", f"{who} asks to {STEP_TITLES[key].lower()}: "
                           + "; ".join(c.script for c in action.commands)[:300] + " (Swap plan: a approves)",
                           "warning")
        self._set(key, detail=f"waiting for another person's approval (request {rid})")
        try:
            status = await future
        except asyncio.CancelledError:
            req = self.state.swap.approvals.get(rid)
            if req is not None and req.status == "pending":
                self.state.apply(replace(req, status="withdrawn", decided_at_s=self._clock()))
            raise
        finally:
            self._approvals.pop(rid, None)
        decided = self.state.swap.approvals[rid]
        self._audit(decided.decided_by or "?", key, f"approval {rid}: {status}", None, "", note="two-person rule")
        if status != "granted":
            verb = "withdrew" if status == "withdrawn" else status
            raise StepRefused(f"{decided.decided_by} {verb} the request: nothing ran")
        self._set(key, detail=f"approved by {decided.decided_by}")

    async def gate_then_approval(self, who: str, serving: str | None) -> None:
        """Before the old service stops (unit or container, issue 26): the gate judged on a fresh
        reading, refused with what still serves, then the approval. One function both use."""
        await shared_steps.fresh_service(self)
        checks = self.evaluate_gate()
        self.state.apply(GateChanged(self.host, checks, self._clock()))
        bad = preflight.failing(checks)
        if bad:
            raise StepRefused("the preflight gate refuses: " + "; ".join(f"{c.name}: {c.reason}" for c in bad)
                              + f"; nothing ran, {serving} still serves")
        await self._approval("stop_old", who)













def _named_side(report: Any, unit: str | None) -> Any:

    return _side(report, unit)


__all__ = ["SwapController", "Preview", "StepFailed", "StepRefused", "audit_path"]
