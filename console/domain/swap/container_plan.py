"""The swap's plan when SGLang runs in a container (issue 26, item 5): the controller's steps
(console/domain/swap/controller.py) call this where they would run a unit action, when the profile names
containers (`container` / `compare_container`, or `compose` + `compose_service`).

The same gate, approvals, audit, downtime clock and report as for units: only the commands and the
readings that decide a step differ. Install becomes "check the new container's image (pull it when
missing), create the container from the compose file"; stop is `docker stop`, then the GPUs' memory
must drain; start is `docker start`, then the server must be ready *and* the container running (the
server watcher has no unit to ask: `docker inspect` says whether the container is up, exited, with
what code, OOM-killed, restarting in a loop); rollback stops the new container and starts the old one.

Every name and reference is checked by console/domain/swap/container_actions.py before any command is built:
a hostile name in the profile or from the host never reaches a shell.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from console.domain.swap import actions as act
from console.domain.swap import container_actions as ca
from console.domain.swap import container_fastpath
from console.domain.swap.errors import StepFailed, _Dropped
from console.domain.swap.executor_api import Executor
from console.domain.swap.shared_steps import death_cause, drain
from console.host.parsers.docker import docker_error_text, restart_loop_of
from console.host.sources.server import ServerWatcher
from console.host.transport.errors import TransportError

KEYS = ("install", "stop_old", "start_new", "rollback")
INSTALL_TITLE = "Check the image, create the new container"


def uses_containers(profile: Any) -> bool:
    return bool(getattr(profile, "container", None) or getattr(profile, "compose", None))


def _image_of(side: Any) -> str | None:
    """The image a service side runs: the `image:` line of its text (console.domain.analysis.container_diff's
    `container_text`, the one place the side's launch is written out)."""
    text = getattr(side, "text", None) or ""
    for line in text.splitlines():
        if line.startswith("image: "):
            return line[len("image: "):].strip()
    return None


class ContainerPlan:
    """The container half of the swap; `ctl` is the Executor (its run/audit/drain/approval)."""

    def __init__(self, ctl: Executor) -> None:
        self.ctl = ctl

    # -- what the plan is -------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return uses_containers(self.ctl.profile)

    @property
    def old_name(self) -> str | None:
        return getattr(self.ctl.profile, "compare_container", None)

    @property
    def new_name(self) -> str | None:
        """The new container: the profile's `container`; from a compose file, the one the service
        reading found (its `container_name`, the container Compose's labels name, or
        PROJECT-SERVICE-1 as Compose will name it)."""
        p = self.ctl.profile
        if getattr(p, "container", None):
            return str(p.container)
        report = self.ctl.state.data("service")
        if report is not None and report.new is not None and report.new.error is None and report.new.name:
            return str(report.new.name)
        return None

    def announce(self) -> None:
        """The install step says what it is here (its title is the unit's in the plan's table)."""
        step = self.ctl.state.swap.steps.get("install")
        if step is not None and step.state == "pending" and step.title != INSTALL_TITLE:
            self.ctl._set("install", title=INSTALL_TITLE)

    def _new_image(self) -> str:
        report = self.ctl.state.data("service")
        side = report.new if report is not None else None
        if side is None:
            raise act.ActionError("the new container's image is not known yet (wait for the service pane)")
        if side.error is not None:
            raise act.ActionError(f"the new container cannot be read: {side.error}")
        image = _image_of(side)
        if not image:
            raise act.ActionError("the new container names no image")
        return ca.check_image(image)

    # -- the controller's hooks -------------------------------------------------------------
    def build(self, key: str) -> list[act.Action]:
        p = self.ctl.profile
        approval = bool(getattr(p, "require_approval", False))
        if key == "install":
            image = self._new_image()
            check = ca.check_image_present(image)
            pull = ca.pull_image(image)
            pull = replace(pull, title=pull.title + " (only if the check finds it missing)")
            out = [check, pull]
            if getattr(p, "compose", None):
                out.append(ca.create_from_compose(p.compose, ca.check_service(p.compose_service)))
                ca.check_container(self.new_name)
            else:
                new = ca.check_container(self.new_name)
                out.append(act.Action("new_container", f"the new container {new} exists, not running", (
                    act.RemoteCommand(ca.container_state_check(new), 30, "read the new container's state"),)))
            return out
        if key == "stop_old":
            return [ca.stop_container(ca.check_container(self.old_name), approval=approval)]
        if key == "start_new":
            return [ca.start_container(ca.check_container(self.new_name), approval=approval)]
        if key == "rollback" and (fast := container_fastpath.rollback_action(self.ctl, approval=approval)):
            return [fast]  # in place or beside: the old container never stopped
        if key == "rollback":
            return [ca.rollback(ca.check_container(self.new_name), ca.check_container(self.old_name),
                                approval=approval)]
        raise act.ActionError(f"no such action: {key}")

    # -- reading a container ----------------------------------------------------------------
    async def state_of(self, name: str) -> dict[str, str]:
        """`docker inspect` of one container: status, running, exit_code, restarts, oom_killed;
        {} when there is no such container (or the daemon did not answer)."""
        ctl = self.ctl
        script = ca.container_state_check(name)
        for _ in range(3):
            try:
                r = await ctl.session.transport.run(script, timeout=30)
                return ca.parse_container_state(r.text)
            except TransportError:
                await ctl._reconnected(ctl.busy or "stop_old", "connection lost while reading the container")
        raise StepFailed(f"cannot read the state of {name}")

    async def _docker(self, key: str, who: str, name: str, cmd: act.RemoteCommand, *, running_after: bool) -> None:
        """One docker command; a drop is re-read from the host (is the container up or not?)."""
        ctl = self.ctl
        try:
            result = await ctl._run(who, key, cmd)
            if not result.ok:
                verb = "start" if running_after else "stop"
                raise StepFailed(f"docker {verb} {name} exited {result.exit_status}: "
                                 f"{docker_error_text(result.error_text or result.text)[-200:]}")
        except _Dropped as exc:
            await ctl._reconnected(key, str(exc))
            now = await self.state_of(name)
            if (now.get("running") == "true") != running_after:
                raise StepFailed(f"after the drop, {name} is {now.get('status') or 'unknown'}: the "
                                 f"{'start' if running_after else 'stop'} did not take effect") from None

    # -- the steps --------------------------------------------------------------------------
    async def _install(self, who: str) -> str:
        ctl = self.ctl
        ctl._set("install", title=INSTALL_TITLE)
        built = self.build("install")
        check, pull, last = built[0], built[1], built[2]
        image = self._new_image()
        said = []
        try:
            present = (await ctl._run(who, "install", check.commands[0])).ok
            if not present:
                ctl._set("install", detail=f"{image} is not on the host: pulling it")
                result = await ctl._run(who, "install", pull.commands[0])
                if not result.ok:
                    raise StepFailed(f"docker pull {image} exited {result.exit_status}: "
                                     f"{(result.error_text or result.text).strip()[-200:]}")
                said.append(f"pulled {image}")
            else:
                said.append(f"{image} is on the host")
            result = await ctl._run(who, "install", last.commands[0])
        except _Dropped as exc:
            raise StepFailed(f"{exc}: run the step again (it checks before it changes anything)") from None
        if last.key == "create_new":
            if not result.ok:
                raise StepFailed(f"docker compose create exited {result.exit_status}: "
                                 f"{(result.error_text or result.text).strip()[-200:]}")
            said.append(f"created {self.new_name} from {ctl.profile.compose}")
        else:
            state = ca.parse_container_state(result.text)
            if not state:
                why = (result.error_text or result.text).strip()[-160:]
                raise StepFailed(f"the new container {self.new_name} is not on the host: create it first "
                                 f"(docker create/run with its launch; {why})")
            if (looping := restart_loop_of(state)) is not None:  # Docker says Running: true for it too
                raise StepFailed(f"the new container {self.new_name} is {looping}: it serves nothing; "
                                 "stop it and fix its launch, then run the step again")
            if state["running"] == "true":
                raise StepFailed(f"the new container {self.new_name} is already running: nothing to start")
            said.append(f"{self.new_name} exists ({state['status']})")
        ctl.runner.repoll("service")
        return "; ".join(said)

    async def _stop_old(self, who: str) -> str:
        ctl = self.ctl
        await ctl.gate_then_approval(who, self.old_name)  # the controller's, as for a unit
        name = ca.check_container(self.old_name)
        (action,) = self.build("stop_old")
        issued = ctl._clock()
        await self._docker("stop_old", who, name, action.commands[0], running_after=False)
        drained = await drain(ctl, "stop_old", issued)
        return f"{name} stopped; {drained}"

    async def _start_new(self, who: str) -> str:
        ctl = self.ctl
        await ctl._approval("start_new", who)
        name = ca.check_container(self.new_name)
        (action,) = self.build("start_new")
        issued = ctl._clock()
        await self._docker("start_new", who, name, action.commands[0], running_after=True)
        # No time of the executor's in the words: the step's duration is the observer's.
        return await self._follow_ready("start_new", name, issued, ctl._clock())

    async def _rollback(self, who: str) -> str:
        ctl = self.ctl
        await ctl._approval("rollback", who)
        new, old = ca.check_container(self.new_name), ca.check_container(self.old_name)
        (action,) = self.build("rollback")
        stop, start = action.commands
        issued = ctl._clock()
        await self._docker("rollback", who, new, stop, running_after=False)
        await drain(ctl, "rollback", issued)
        started = ctl._clock()
        await self._docker("rollback", who, old, start, running_after=True)
        return await self._old_ready(old, started)

    # -- following a container to ready -----------------------------------------------------
    def _gone(self, name: str, state: dict[str, str], restarts_before: int | None) -> str | None:
        """Why the container is not coming up (None: it may still): exited (code, OOM-killed), or
        restarting in a loop (its restart policy brings it back, and it dies again)."""
        if not state:
            return f"{name} is no longer on the host"
        restarts = int(state["restarts"])
        if restarts_before is not None and restarts > restarts_before:
            return (f"{name} is restarting in a loop: {restarts - restarts_before} restart(s) since the start, "
                    f"last exit code {state['exit_code']}" + ("; OOM-killed" if state["oom_killed"] == "true" else ""))
        if state["running"] != "true" and state["status"] != "restarting":
            return (f"{name} {state['status']} (exit code {state['exit_code']})"
                    + (" (OOM-killed by the kernel)" if state["oom_killed"] == "true" else ""))
        return None

    async def _follow_ready(self, key: str, name: str, issued: float, started: float) -> str:
        """Ready is the server's honest ready (from a reading taken after the start) while the
        container runs; a container that exits or restarts in a loop fails the step, with its cause."""
        ctl = self.ctl
        timeout = float(getattr(ctl.profile, "ready_timeout_s", 600.0))
        deadline = time.monotonic() + timeout
        first = await self.state_of(name)
        restarts_before = int(first["restarts"]) if first else None
        while True:
            ctl.runner.repoll("server")
            now = await self.state_of(name)
            gone = self._gone(name, now, restarts_before)
            if gone is not None:
                raise StepFailed(f"the new server died while booting: {await death_cause(ctl, gone)}")
            reading = ctl.state.reading("server")
            s = reading.data if reading is not None else None
            if s is not None and (reading.ok_at_s or 0) > started:  # type: ignore[union-attr]
                if s.status == "ready":
                    return f"ready after docker start: {s.reason}"  # the time to ready: the observer's
                ctl._set(key, detail=f"{name} running; {s.status}: {s.reason}")
            if time.monotonic() > deadline:
                raise StepFailed(f"not ready within {timeout:.0f}s (ready_timeout_s): "
                                 f"{s.status + ': ' + s.reason if s else 'no server status'}")
            await asyncio.sleep(ctl.poll_s)

    async def _old_ready(self, name: str, started: float) -> str:
        ctl = self.ctl
        watcher = ServerWatcher(ctl.session.transport, None, ctl.profile.server_port, None)
        timeout = float(getattr(ctl.profile, "ready_timeout_s", 600.0))
        deadline = time.monotonic() + timeout
        first = await self.state_of(name)
        restarts_before = int(first["restarts"]) if first else None
        while True:
            gone = self._gone(name, await self.state_of(name), restarts_before)
            if gone is not None:
                raise StepFailed(f"{name} failed to start again: {gone}")
            try:
                s = await watcher.poll()
            except TransportError:
                s = None
            if s is not None:
                if s.status == "ready":
                    return f"{name} ready again"
                ctl._set("rollback", detail=f"{name}: {s.status}: {s.reason}")
            if time.monotonic() > deadline:
                raise StepFailed(f"{name} not ready within {timeout:.0f}s")
            await asyncio.sleep(max(ctl.poll_s, 1.0))


__all__ = ["ContainerPlan", "INSTALL_TITLE", "KEYS", "uses_containers"]
