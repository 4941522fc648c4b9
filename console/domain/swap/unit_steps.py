"""The steps of a swap on systemd units: install the drafted unit (written beside the old, kept as a
backup, daemon-reload), stop the old unit and wait for the GPUs to drain, start the new one and follow
it to ready, roll back (stop the new, start the old, follow it to ready). The step objects of
console/domain/swap/steps.py run these for the runtime "systemd"; the fast paths (in place, beside)
use the same unit commands and waits.

Every command goes through the executor's audited `_run` (console/domain/swap/executor_api.py); a
command whose connection dropped is re-read from the host. The words say what happened; the times
are the observer's (console/core/derive/swap_observer.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time

from console.domain.paths import host_named
from console.domain.swap import actions as act
from console.domain.swap.errors import StepFailed, _Dropped
from console.domain.swap.executor_api import Executor
from console.domain.swap.shared_steps import run_checked
from console.host.sources.server import ServerWatcher
from console.host.transport.errors import TransportError


def units_dir(ex: Executor) -> str:
    """Where the host's admin units live: the directory of the old (or already installed new)
    unit's file, as `systemctl cat` showed it, when that is an /etc/systemd/system."""
    report = ex.state.data("service")
    for side in ((report.new, report.old) if report is not None else ()):
        if side is not None and side.unit is not None and side.unit.sources:
            directory = os.path.dirname(side.unit.sources[0])
            return directory if directory.endswith("/etc/systemd/system") else act.UNITS_DIR
    raise act.ActionError("where the host's units live is not known yet (wait for the service pane)")


def as_host_names(ex: Executor, path: str) -> str:
    """A path on the host as the host names it, for the step's words: under the profile's
    `host_root` (the demo's simulated host keeps its files in a sandbox directory) the root is left
    out, "/etc/systemd/system/x.service"; the commands keep the path they act on."""
    return host_named(path, getattr(ex.profile, "host_root", None))


def draft_text(ex: Executor) -> str:
    return ex.fast.draft_text(ex._draft_text_raw())  # issue 24 hook: the beside unit's GPUs and port


def install_action(ex: Executor) -> act.Action:
    """Install on a unit: the drafted unit written beside the old, kept as a backup, daemon-reload."""
    return act.install_unit(act.check_unit(ex.new_unit), draft_text(ex),
                            time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()), units_dir(ex))


async def run_install(ex: Executor, who: str) -> str:
    (action,) = ex.build("install")
    w = action.write
    assert w is not None
    transport = ex.session.transport
    try:
        await asyncio.wait_for(transport.write_file(w.temp_path, w.text.encode()), 30)
    except (TransportError, OSError, asyncio.TimeoutError) as exc:
        ex._audit(who, "install", f"sftp put {w.temp_path}", None, str(exc), note="write failed")
        with contextlib.suppress(TransportError, OSError):
            await transport.run(act.bounded(["rm", "-f", "--", w.temp_path], 10), timeout=15)
        raise StepFailed(f"writing {w.temp_path} failed ({exc}): {w.path} is unchanged") from None
    ex._audit(who, "install", f"sftp put {w.temp_path}", 0, f"{len(w.text.encode())} bytes")
    result = await run_checked(ex, who, "install", action.commands[0],
                               lambda r: f"install failed (exit {r.exit_status})")
    if result is None:  # the connection dropped: is the new file in place?
        try:
            now = await transport.read_file(w.path, timeout=15)
        except (TransportError, OSError):
            raise StepFailed(f"after the drop, {w.path} cannot be read: outcome unknown") from None
        if now.decode("utf-8", "replace") != w.text:
            raise StepFailed(f"after the drop, {w.path} is not the new unit: the old file is in place") from None
        reload = act.RemoteCommand(act.bounded(["systemctl", "daemon-reload"], 60), 70, "daemon-reload")
        try:
            if not (await ex._run(who, "install", reload)).ok:
                raise StepFailed("daemon-reload failed after the drop")
        except _Dropped:
            raise StepFailed("the connection dropped again during daemon-reload") from None
    kept = [ln for ln in result.text.splitlines() if ln.startswith("kept ")] if result is not None else []
    ex.runner.repoll("service")
    kept_words = [f"kept {as_host_names(ex, k.removeprefix('kept '))}" for k in kept[:1]]
    return f"installed {as_host_names(ex, w.path)}" + "".join(f"; {k}" for k in kept_words) + "; daemon-reload done"


async def run_stop_old(ex: Executor, who: str) -> str:
    await ex.gate_then_approval(who, ex.old_unit)
    unit = act.check_unit(ex.old_unit)
    (action,) = ex.build("stop_old")
    issued = ex._clock()
    await unit_command(ex, "stop_old", who, unit, action.commands[0], running_after=False)
    # The downtime's start is the observer's (console/core/derive/swap_observer.py): the stop command's
    # reply, systemd's line and the log's last served request are its facts.
    drained = await ex.drain("stop_old", issued)
    return f"{unit} stopped; {drained}"


DROP_SETTLE_S = 15.0  # after a lost reply, how long a unit is read again for the command's effect


async def unit_command(ex: Executor, key: str, who: str, unit: str, cmd: act.RemoteCommand, *,
                       running_after: bool) -> None:
    """`systemctl start` or `stop` of one unit, audited; its exit status respected; a drop re-read
    from the host (is the unit running or not?), never assumed."""
    verb = "start" if running_after else "stop"
    if await run_checked(ex, who, key, cmd, lambda r: f"systemctl {verb} {unit} exited {r.exit_status}") is None:
        # The reply was lost, not necessarily the command: it may still be on its way on the host (a
        # held shell, a slow ExecStop). The unit is read until it shows the command's effect, for
        # DROP_SETTLE_S, and while it is between states up to the command's own bound on the host.
        issued = time.monotonic()
        while True:
            now = (await ex._unit_state(unit)).get("ActiveState")
            took_effect = now in ("active", "activating") if running_after \
                else now not in ("active", "deactivating", "activating")
            waited = time.monotonic() - issued
            if took_effect or waited > cmd.timeout_s + 5 or (
                    waited > DROP_SETTLE_S and now not in ("deactivating", "activating")):
                break
            await asyncio.sleep(ex.poll_s)
        if running_after and now not in ("active", "activating"):
            raise StepFailed(f"after the drop, {unit} is {now or 'unknown'}: it is not running") from None
        if not running_after and now in ("active", "deactivating", "activating"):
            raise StepFailed(f"after the drop, {unit} is still {now}: the stop did not take effect") from None


async def run_start_new(ex: Executor, who: str) -> str:
    await ex._approval("start_new", who)
    unit = act.check_unit(ex.new_unit)
    (action,) = ex.build("start_new")
    await unit_command(ex, "start_new", who, unit, action.commands[0], running_after=True)
    # Readings from polls that may have begun before the unit was started say nothing of it. The
    # step's words carry no time of the executor's: its duration (the approval's wait in it) is the
    # observer's, the wait itself the approval's own times.
    return await follow_ready(ex, unit, ex._clock())


async def follow_ready(ex: Executor, unit: str, started: float) -> str:
    """Ready is the server's honest ready, from a reading taken after `started`, while the unit is
    active; a unit that failed (or dead twice in a row) fails the step with its cause."""
    timeout = float(getattr(ex.profile, "ready_timeout_s", 600.0))
    deadline = time.monotonic() + timeout
    dead_seen: set[float] = set()
    while True:
        ex.runner.repoll("server")
        reading = ex.state.reading("server")
        s = reading.data if reading is not None else None
        if s is not None and (reading.ok_at_s or 0) > started and s.unit == unit:  # type: ignore[union-attr]
            if s.status == "ready" and s.unit_state == "active":  # the clock's end: the observer's
                # no figure of its own: time to ready is the observer's (the report's timing)
                return f"ready after systemctl start: {s.reason}"
            if s.status == "dead":
                # A failed unit is final; otherwise dead twice in a row (a poll in flight while the
                # unit started may still say inactive).
                dead_seen.add(reading.ok_at_s or 0)  # type: ignore[union-attr]
                if s.unit_state == "failed" or s.unit_failing or len(dead_seen) >= 2:
                    cause = await ex.death_cause(s.reason)
                    raise StepFailed(f"the new server died while booting: {cause}")
            else:
                dead_seen.clear()
            ex._set("start_new", detail=f"{s.status}: {s.reason}")
        if time.monotonic() > deadline:
            raise StepFailed(f"not ready within {timeout:.0f}s (ready_timeout_s): "
                             f"{s.status + ': ' + s.reason if s else 'no server status'}")
        await asyncio.sleep(ex.poll_s)


async def run_rollback(ex: Executor, who: str) -> str:
    await ex._approval("rollback", who)
    new, old = act.check_unit(ex.new_unit), act.check_unit(ex.old_unit)
    (action,) = ex.build("rollback")
    stop, start = action.commands
    issued = ex._clock()
    await unit_command(ex, "rollback", who, new, stop, running_after=False)
    await ex.drain("rollback", issued)
    await unit_command(ex, "rollback", who, old, start, running_after=True)
    return await old_ready(ex, old)  # the clock's end: the observer's (the log's ready line)


async def old_ready(ex: Executor, unit: str) -> str:
    """The old unit serving again after a rollback (its own watcher: the server source follows the
    new one); a crash loop is named at once, never waited out."""
    watcher = ServerWatcher(ex.session.transport, unit, ex.profile.server_port, None)
    timeout = float(getattr(ex.profile, "ready_timeout_s", 600.0))
    deadline = time.monotonic() + timeout
    while True:
        try:
            s = await watcher.poll()
        except TransportError:
            s = None
        if s is not None:
            if s.status == "ready" and s.unit_state == "active":
                return f"{unit} ready again"
            if s.unit_state == "failed" or s.unit_failing:  # a crash loop is never `failed`
                raise StepFailed(f"{unit} failed to start again: {s.unit_failing or s.reason}"
                                 + (" — it will take the GPUs back" if "restart" in (s.unit_failing or "")
                                    else ""))
            ex._set("rollback", detail=f"{unit}: {s.status}: {s.reason}")
        if time.monotonic() > deadline:
            raise StepFailed(f"{unit} not ready within {timeout:.0f}s")
        await asyncio.sleep(max(ex.poll_s, 1.0))


__all__ = ["draft_text", "follow_ready", "install_action", "old_ready", "run_install", "run_rollback", "run_start_new",
           "run_stop_old", "unit_command", "units_dir"]
