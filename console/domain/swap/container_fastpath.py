"""The faster swap paths of issue 24 when SGLang runs in a container (issue 26, item 5). The path
logic (console/domain/swap/paths.py) and its steps (console/domain/swap/fastpath.py) are the same; what differs
is where a path is seen from, what "the server died" reads, and what a rollback runs:

    in place   POST /update_weights_from_disk to the running container's server works as for a unit,
               but the server reads `model_path` inside the container: the new model's host directory
               must be under one of the old container's bind mounts, and the body carries the path as
               the container sees it. The old model's config.json is read through the old container's
               mount (its `--model-path` is a container path). A later restart must not bring the old
               weights back: the install step has created the new container (not started), the launch
               a restart uses. Rolling back is `docker restart` of the old container (its own launch,
               the old weights).
    beside     the new container on GPUs the old one does not use, on another port: its launch must
               say so (`--gpus '"device=4,5,6,7"'`, `--port`); a container's launch cannot be edited
               after it is created, so the plan checks the new container's and refuses with what to
               change when it does not fit the chosen GPUs and port.

The hooks in fastpath.py call the functions below; each is the identity for a unit.
"""

from __future__ import annotations

import asyncio
import posixpath
from dataclasses import replace

from console.domain.analysis.container_diff import _host_path
from console.domain.swap import actions as act
from console.domain.swap import container_actions as ca
from console.domain.swap import container_steps, port_free
from console.domain.swap.errors import StepFailed, StepRefused
from console.domain.swap.executor_api import Executor
from console.domain.swap.paths import PathOption, gpu_assignment
from console.domain.swap.ready_wait import wait_beside_ready
from console.host.parsers.docker import ContainerSpec


def active(ctl: Executor) -> bool:
    return bool(getattr(ctl, "containers", None) is not None and ctl.containers.active)


def spec(ctl: Executor, side: str) -> ContainerSpec | None:
    """The last `docker inspect` (or compose service) read of "new" or "old"."""
    watcher = ctl.session.service_watcher() if hasattr(ctl.session, "service_watcher") else None
    specs = getattr(watcher, "specs", None) or {}
    found = specs.get(side)
    return found if isinstance(found, ContainerSpec) else None


def host_model_path(ctl: Executor, path: str | None) -> str | None:
    """The old server's `--model-path` as a host path: inside a container it is the container's
    path, read on the host through the old container's bind mount (None: under no mount)."""
    if not active(ctl) or not path:
        return path
    old = spec(ctl, "old")
    if old is None or not path.startswith("/"):
        return None
    return _host_path(path, old)


def served_model_path(ctl: Executor, host_dir: str) -> str:
    """The new model's host directory as the running (old) container sees it: the path POSTed to
    /update_weights_from_disk. Raises ActionError when no bind mount of the old container holds it."""
    if not active(ctl):
        return host_dir
    old = spec(ctl, "old")
    name = ctl.old_unit or "the old container"
    if old is None:
        raise act.ActionError(f"the mounts of {name} are not known yet (wait for the service pane)")
    host_dir = posixpath.normpath(host_dir)
    best = None
    for m in old.mounts:
        if m.kind != "bind" or not m.source.startswith("/"):
            continue
        src = posixpath.normpath(m.source)
        if (host_dir == src or host_dir.startswith(src.rstrip("/") + "/")) and (
                best is None or len(src) > len(posixpath.normpath(best.source))):
            best = m
    if best is None:
        mounted = ", ".join(f"{m.source}:{m.destination}" for m in old.mounts if m.kind == "bind") or "none"
        raise act.ActionError(f"{host_dir} is not mounted into {name} (its bind mounts: {mounted}): the running "
                              "server cannot read the new weights in place")
    rest = host_dir[len(posixpath.normpath(best.source)):].lstrip("/")
    return posixpath.join(best.destination, rest) if rest else best.destination


def adjust_options(ctl: Executor, in_place: PathOption, beside: PathOption,
                   model_dir: str) -> tuple[PathOption, PathOption]:
    """The paths as containers allow them: in place only when the running container sees the new
    model; beside only when the new container's launch is on the chosen GPUs and port."""
    if not active(ctl):
        return in_place, beside
    if in_place.possible:
        try:
            inside = served_model_path(ctl, model_dir)
            in_place = replace(in_place, details=(*in_place.details,
                                                  f"the running container reads the new weights at {inside}"))
        except act.ActionError as exc:
            in_place = replace(in_place, possible=False, predicted_downtime_s=None, reason=str(exc))
    if beside.possible:
        why = beside_misfit(ctl, beside)
        if why is not None:
            beside = replace(beside, possible=False, predicted_downtime_s=None, reason=why)
    return in_place, beside


def beside_misfit(ctl: Executor, beside: PathOption) -> str | None:
    """Why the new container cannot boot beside the old one as planned (None: it can)."""
    new = spec(ctl, "new")
    name = ctl.new_unit or "the new container"
    if new is None:
        return f"the launch of {name} is not known yet"
    want = tuple(str(g) for g in beside.gpus)
    have = new.gpus.device_ids if new.gpus is not None else ()
    gpus_flag = gpu_assignment(beside.gpus, container=True, compose=bool(getattr(ctl.profile, "compose", None)))
    problems = []
    if tuple(have) != want:
        seen = new.gpus.describe if new.gpus is not None else "no GPU request"
        problems.append(f"its GPUs are {seen}, not {','.join(want)} ({gpus_flag})")
    port = _port_of(new)
    if beside.port is not None and port != beside.port:
        problems.append(f"it listens on {port if port is not None else 'an unknown port'}, not {beside.port} "
                        f"(--port {beside.port}, and its published port if not on the host network)")
    if problems:
        return (f"{name} was created for another placement: " + "; ".join(problems)
                + ": create it again with these (docker create … or the compose service), then choose the path")
    return None


def _port_of(s: ContainerSpec) -> int | None:
    argv = list(s.argv)
    for i, a in enumerate(argv):
        if a == "--port" and i + 1 < len(argv) and argv[i + 1].isdigit():
            return int(argv[i + 1])
        if a.startswith("--port=") and a.split("=", 1)[1].isdigit():
            return int(a.split("=", 1)[1])
    return None


async def server_dead(ctl: Executor) -> bool:
    """Did the old container die during an in-place update? `docker inspect` says exited/dead."""
    name = ca.check_container(ctl.old_unit)
    for _ in range(10):
        try:
            state = await ctl.containers.state_of(name)
        except Exception:  # noqa: BLE001 - cannot read: not proof of death
            return False
        if not state or (state.get("running") != "true" and state.get("status") in ("exited", "dead")):
            return True
        await asyncio.sleep(ctl.poll_s)
    return False


# -- rollback and the in-place step's word on a later restart ---------------------------------------
def rollback_in_place(ctl: Executor, *, approval: bool = False) -> act.Action:
    """In place on a container: the old container restarted runs its own launch, the old weights."""
    old = ca.check_container(ctl.old_unit)
    grace = ca.stop_grace(spec(ctl, "old"))
    return act.Action("rollback", f"Roll back {old}: restart it (its own launch, the old weights)", (
        act.RemoteCommand(act.bounded(["docker", "restart", "-t", str(grace.seconds), "--", old], grace.seconds + 60),
                          grace.seconds + 70, f"restart {old} (SIGTERM, then SIGKILL after {grace.said})"),),
        waits_for=f"{old} ready again with the old weights", needs_approval=approval)


async def run_rollback_in_place(ctl: Executor, who: str) -> str:
    await ctl._approval("rollback", who)
    old = ca.check_container(ctl.old_unit)
    action = rollback_in_place(ctl, approval=bool(getattr(ctl.profile, "require_approval", False)))
    r = await ctl._run(who, "rollback", action.commands[0])
    if not r.ok:
        raise StepFailed(f"docker restart {old} exited {r.exit_status}: {(r.error_text or r.text).strip()[-200:]}")
    said = await container_steps.old_ready(ctl, old)
    return said + " (restarted with its own launch: the old weights)"


def later_restart(ctl: Executor) -> str:
    """What the in-place step adds: the launch a later restart must use."""
    new, old = ctl.new_unit, ctl.old_unit
    return (f"; {old} serves the new weights until it stops: a later restart is `docker start {new}` "
            f"(on the host, not started), not {old} (its own launch has the old weights)")


# -- beside --------------------------------------------------------------------------------------------
def beside_action(ctl: Executor, opt: PathOption) -> act.Action:
    new = ca.check_container(ctl.new_unit)
    why = beside_misfit(ctl, opt)
    if why is not None:
        raise act.ActionError(why)
    start = act.RemoteCommand(act.bounded(["docker", "start", "--", new], 60), 70, f"start {new}")
    check = () if not on_host_network(ctl) else (
        act.RemoteCommand(port_free.port_check(int(opt.port or 0)), 15, f"port {opt.port} free on the host"),)
    return act.Action("beside", f"Start {new} beside the old server", (*check, start),
                      waits_for=f"ready on port {opt.port} (GPUs {opt.cuda_visible_devices}), the old server serving")


def on_host_network(ctl: Executor) -> bool:
    """The new container shares the host's network (`--network host`, as SGLang's images are run): its
    server binds the host's port itself, so the port is checked on the host first; on a bridge,
    Docker's own publish refuses a taken port at `docker start` and says so."""
    new = spec(ctl, "new")
    return new is not None and (new.network_mode or "") == "host"


def stop_old_command(ctl: Executor) -> act.RemoteCommand | None:
    """switch_traffic's last command on containers: `docker stop` of the old one (None: a unit)."""
    if not active(ctl):
        return None
    old = ca.check_container(ctl.old_unit)
    return ca.stop_command(old, ca.stop_grace(spec(ctl, "old")), f"stop {old}")


async def run_beside(ctl: Executor, who: str) -> str:
    """`docker start` of the new container, followed to /health on its port while `docker inspect`
    says it runs; an exit fails the step with its code (the old server serves on: downtime 0)."""
    opt = ctl.fast._need("beside")
    new = ca.check_container(ctl.new_unit)
    (action,) = ctl.build("beside")
    *check, start = action.commands
    if check:
        try:
            r = await ctl._run(who, "beside", check[0])
        except Exception as exc:  # the controller's _Dropped: nothing was started
            raise StepRefused(f"port {opt.port} could not be checked ({exc}): nothing ran") from None
        if taken := port_free.port_verdict(int(opt.port or 0), r.text, "0.0.0.0"):
            raise StepRefused(f"{taken}: the beside path is refused, nothing was started; {ctl.old_unit} serves "
                              "on (restart, or free the port and plan again)")
    await container_steps.docker_command(ctl, "beside", who, new, start, running_after=True)
    first = await ctl.containers.state_of(new)
    restarts_before = int(first["restarts"]) if first else None

    async def died() -> str | None:
        return container_steps.why_gone(new, await ctl.containers.state_of(new), restarts_before)

    await wait_beside_ready(ctl, int(opt.port or 0), stops="the new container", died=died)
    return (f"ready on port {opt.port} (GPUs {opt.cuda_visible_devices}); "
            "the old server still serving")


def rollback_beside(ctl: Executor, *, approval: bool = False) -> act.Action:
    new = ca.check_container(ctl.new_unit)
    return act.Action("rollback", f"Roll back: stop {new} (the old server never stopped)", (
        ca.stop_command(new, ca.stop_grace(spec(ctl, "new")), f"stop {new}"),),
        waits_for="the new server's GPUs released; the old one serves on", needs_approval=approval)


async def run_rollback_beside(ctl: Executor, who: str) -> str:
    await ctl._approval("rollback", who)
    (action,) = ctl.build("rollback")
    r = await ctl._run(who, "rollback", action.commands[0])
    if not r.ok:
        raise StepFailed(f"docker stop {ctl.new_unit} exited {r.exit_status}: "
                         f"{(r.error_text or r.text).strip()[-200:]}")
    return f"{ctl.new_unit} stopped; {ctl.old_unit} kept serving throughout"


def rollback_action(ctl: Executor, *, approval: bool = False) -> act.Action | None:
    """The faster paths' rollback on containers (None: the restart path's own)."""
    if ctl.fast.chosen == "in-place":
        return rollback_in_place(ctl, approval=approval)
    if ctl.fast._beside_old_serving():
        return rollback_beside(ctl, approval=approval)
    return None


__all__ = ["adjust_options", "beside_misfit", "host_model_path", "rollback_in_place", "served_model_path",
           "server_dead"]
