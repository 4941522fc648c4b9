"""The steps of a swap on containers (a container, or a compose service): check the new container's
image (pull it when missing) and that the container exists (or create it from the compose file), stop
the old one and wait for the GPUs to drain, start the new one and follow it to ready (the server's
honest ready while the container runs: one that exits or restarts in a loop fails the step with its
cause), roll back (stop the new, start the old, follow it to ready). The step objects of
console/domain/swap/steps.py run these for the runtimes "container" and "compose"; the container fast
paths (console/domain/swap/container_fastpath.py) use the same docker commands and waits.

What is read of the containers and their names are the container plan's (console/domain/swap/
container_plan.py: `ex.containers`); every command goes through the executor's audited `_run`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from console.domain.swap import actions as act
from console.domain.swap import container_actions as ca
from console.domain.swap.errors import StepFailed, _Dropped
from console.domain.swap.executor_api import Executor
from console.domain.swap.shared_steps import run_checked
from console.host.parsers.docker import docker_error_text, restart_loop_of
from console.host.sources.server import ServerWatcher
from console.host.transport.errors import TransportError
from console.units import counted

INSTALL_TITLE = "Check the image, create the new container"


async def docker_command(ex: Executor, key: str, who: str, name: str, cmd: act.RemoteCommand, *,
                         running_after: bool) -> None:
    """One docker command; a drop is re-read from the host (is the container up or not?)."""
    verb = "start" if running_after else "stop"
    if await run_checked(ex, who, key, cmd, lambda r: f"docker {verb} {name} exited {r.exit_status}",
                         said=docker_error_text) is None:
        now = await ex.containers.state_of(name)
        if (now.get("running") == "true") != running_after:
            raise StepFailed(f"after the drop, {name} is {now.get('status') or 'unknown'}: the "
                             f"{'start' if running_after else 'stop'} did not take effect") from None


async def run_install(ex: Executor, who: str) -> str:
    ex._set("install", title=INSTALL_TITLE)
    built = ex.containers.build("install")
    check, pull, last = built[0], built[1], built[2]
    image = ex.containers.new_image()
    said = []
    try:
        present = (await ex._run(who, "install", check.commands[0])).ok
        if not present:
            ex._set("install", detail=f"{image} is not on the host: pulling it")
            result = await ex._run(who, "install", pull.commands[0])
            if not result.ok:
                raise StepFailed(f"docker pull {image} exited {result.exit_status}: "
                                 f"{(result.error_text or result.text).strip()[-200:]}")
            said.append(f"pulled {image}")
        else:
            said.append(f"{image} is on the host")
        result = await ex._run(who, "install", last.commands[0])
    except _Dropped as exc:
        raise StepFailed(f"{exc}: run the step again (it checks before it changes anything)") from None
    if last.key == "create_new":
        if not result.ok:
            raise StepFailed(f"docker compose create exited {result.exit_status}: "
                             f"{(result.error_text or result.text).strip()[-200:]}")
        said.append(await _compose_current(ex, who, built[3], result))
    else:
        state = ca.parse_container_state(result.text)
        if not state:
            why = (result.error_text or result.text).strip()[-160:]
            raise StepFailed(f"the new container {ex.containers.new_name} is not on the host: create it first "
                             f"(docker create/run with its launch; {why})")
        if (looping := restart_loop_of(state)) is not None:  # Docker says Running: true for it too
            raise StepFailed(f"the new container {ex.containers.new_name} is {looping}: it serves nothing; "
                             "stop it and fix its launch, then run the step again")
        if state["running"] == "true":
            raise StepFailed(f"the new container {ex.containers.new_name} is already running: nothing to start")
        said.append(f"{ex.containers.new_name} exists ({state['status']})")
    ex.runner.repoll("service")
    return "; ".join(said)


async def _compose_current(ex: Executor, who: str, check: act.Action, created: Any) -> str:
    """What `docker compose create --no-recreate` did: created the service's container (Compose says
    "Creating"), or left one there, silently, even one created from an earlier version of the file; that
    one is not the file's launch (it would start with the old one, under a diff that shows the file's):
    Compose's hash of the service now against the container's label, and on a difference the step fails
    and says how to recreate it."""
    name, path, service = ex.containers.new_name, ex.profile.compose, ex.profile.compose_service
    words = f"{created.error_text or ''}\n{created.text or ''}"
    if f"{name}  Creating" in words or f"{name} Creating" in words:
        return f"created {name} from {path}"
    try:
        result = await ex._run(who, "install", check.commands[0])
    except _Dropped as exc:
        raise StepFailed(f"{exc}: run the step again (it checks before it changes anything)") from None
    hashes = ca.parse_compose_current(result.text, service) if result.ok else None
    if hashes is None:
        why = (result.error_text or result.text).strip()[-160:] or f"exit {result.exit_status}"
        return (f"{name} exists (created before this swap); whether it is {service} as {path} says it now "
                f"is unknown: {why}")
    in_file, on_container = hashes
    if in_file != on_container:
        raise StepFailed(f"{name} was created from an earlier {path} (Compose's hash of {service} there, "
                         f"{on_container[:12] or 'none'}, is not the file's now, {in_file[:12]}): docker compose "
                         f"create --no-recreate left it as it was; recreate it (docker compose -f {path} create "
                         f"--force-recreate -- {service}) or remove it, then run the step again")
    return f"{name} exists, as {path} says {service} now (created before this swap)"


async def run_stop_old(ex: Executor, who: str) -> str:
    await ex.gate_then_approval(who, ex.containers.old_name)  # the controller's, as for a unit
    name = ca.check_container(ex.containers.old_name)
    (action,) = ex.containers.build("stop_old")
    issued = ex._clock()
    await docker_command(ex, "stop_old", who, name, action.commands[0], running_after=False)
    drained = await ex.drain("stop_old", issued)
    return f"{name} stopped; {drained}"


async def run_start_new(ex: Executor, who: str) -> str:
    await ex._approval("start_new", who)
    name = ca.check_container(ex.containers.new_name)
    (action,) = ex.containers.build("start_new")
    await docker_command(ex, "start_new", who, name, action.commands[0], running_after=True)
    # No time of the executor's in the words: the step's duration is the observer's.
    return await follow_ready(ex, "start_new", name, ex._clock())


async def run_rollback(ex: Executor, who: str) -> str:
    await ex._approval("rollback", who)
    new, old = ca.check_container(ex.containers.new_name), ca.check_container(ex.containers.old_name)
    (action,) = ex.containers.build("rollback")
    stop, start = action.commands
    issued = ex._clock()
    await docker_command(ex, "rollback", who, new, stop, running_after=False)
    await ex.drain("rollback", issued)
    await docker_command(ex, "rollback", who, old, start, running_after=True)
    return await old_ready(ex, old)


def why_gone(name: str, state: dict[str, str], restarts_before: int | None) -> str | None:
    """Why the container is not coming up (None: it may still): exited (code, OOM-killed), or
    restarting in a loop (its restart policy brings it back, and it dies again)."""
    if not state:
        return f"{name} is no longer on the host"
    restarts = int(state["restarts"])
    if restarts_before is not None and restarts > restarts_before:
        return (f"{name} is restarting in a loop: {counted(restarts - restarts_before, 'restart')} since the start, "
                f"last exit code {state['exit_code']}" + ("; OOM-killed" if state["oom_killed"] == "true" else ""))
    if state["running"] != "true" and state["status"] != "restarting":
        return (f"{name} {state['status']} (exit code {state['exit_code']})"
                + (" (OOM-killed by the kernel)" if state["oom_killed"] == "true" else ""))
    return None


async def follow_ready(ex: Executor, key: str, name: str, started: float) -> str:
    """Ready is the server's honest ready (from a reading taken after the start) while the
    container runs; a container that exits or restarts in a loop fails the step, with its cause."""
    timeout = float(getattr(ex.profile, "ready_timeout_s", 600.0))
    deadline = time.monotonic() + timeout
    first = await ex.containers.state_of(name)
    restarts_before = int(first["restarts"]) if first else None
    while True:
        ex.runner.repoll("server")
        now = await ex.containers.state_of(name)
        gone = why_gone(name, now, restarts_before)
        if gone is not None:
            raise StepFailed(f"the new server died while booting: {await ex.death_cause(gone)}")
        reading = ex.state.reading("server")
        s = reading.data if reading is not None else None
        if s is not None and (reading.ok_at_s or 0) > started:  # type: ignore[union-attr]
            if s.status == "ready":
                return f"ready after docker start: {s.reason}"  # the time to ready: the observer's
            ex._set(key, detail=f"{name} running; {s.status}: {s.reason}")
        if time.monotonic() > deadline:
            raise StepFailed(f"not ready within {timeout:.0f}s (ready_timeout_s): "
                             f"{s.status + ': ' + s.reason if s else 'no server status'}")
        await asyncio.sleep(ex.poll_s)


async def old_ready(ex: Executor, name: str) -> str:
    watcher = ServerWatcher(ex.session.transport, None, ex.profile.server_port, None)
    timeout = float(getattr(ex.profile, "ready_timeout_s", 600.0))
    deadline = time.monotonic() + timeout
    first = await ex.containers.state_of(name)
    restarts_before = int(first["restarts"]) if first else None
    while True:
        gone = why_gone(name, await ex.containers.state_of(name), restarts_before)
        if gone is not None:
            raise StepFailed(f"{name} failed to start again: {gone}")
        try:
            s = await watcher.poll()
        except TransportError:
            s = None
        if s is not None:
            if s.status == "ready":
                return f"{name} ready again"
            ex._set("rollback", detail=f"{name}: {s.status}: {s.reason}")
        if time.monotonic() > deadline:
            raise StepFailed(f"{name} not ready within {timeout:.0f}s")
        await asyncio.sleep(max(ex.poll_s, 1.0))


__all__ = ["INSTALL_TITLE", "docker_command", "follow_ready", "why_gone", "old_ready", "run_install", "run_rollback",
           "run_start_new", "run_stop_old"]
