"""The steps of the faster swap paths (issue 24): pre-warm the shards into the page cache; in place,
POST /update_weights_from_disk on the running server (its pause is the observer's, from the reply and
the log); beside, start the new unit on the free GPUs and another port and follow it to /health while
the old one serves; switch the traffic (the router: add the new worker, remove the old, drain it, stop
the old service; without a router, what the operator must switch); and the paths' rollbacks (in place:
the previous unit file restarted; beside while the old server serves: stop the new one).

The path plan (console/domain/swap/fastpath.py: `ex.fast`) holds the path the `paths` step chose and
what it read of the host (console/domain/swap/path_choice.py: the shards, the ports, the plan) and builds
each step's exact commands; these are the runs of the step objects (console/domain/swap/steps.py),
through the executor's audited `_run`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from console.domain.analysis import host_replies
from console.domain.swap import actions as act
from console.domain.swap import container_fastpath as cfp
from console.domain.swap import fastpath as fp
from console.domain.swap import path_choice, unit_steps
from console.domain.swap import prewarm as pw
from console.domain.swap.errors import StepFailed, StepRefused
from console.domain.swap.executor_api import Executor
from console.domain.swap.port_free import port_verdict
from console.domain.swap.ready_wait import wait_beside_ready
from console.host.parsers.systemd import unit_is_failing
from console.host.transport.errors import TransportError
from console.units import counted

clean, split_reply = fp.clean, fp.split_reply


async def run_rollback_in_place(ex: Executor, who: str) -> str:
    await ex._approval("rollback", who)
    (action,) = ex.build("rollback")
    restore, restart = action.commands
    r = await ex._run(who, "rollback", restore)
    if not r.ok:
        raise StepFailed(f"restoring the previous unit file failed (exit {r.exit_status}): {r.text.strip()[-200:]}")
    await unit_steps.unit_command(ex, "rollback", who, act.check_unit(ex.old_unit), restart, running_after=True)
    said = await unit_steps.old_ready(ex, act.check_unit(ex.old_unit))
    return said + " (the previous unit file, the old weights)"


async def run_rollback_beside(ex: Executor, who: str) -> str:
    await ex._approval("rollback", who)
    (action,) = ex.build("rollback")
    r = await ex._run(who, "rollback", action.commands[0])
    if not r.ok:
        raise StepFailed(f"systemctl stop {ex.new_unit} exited {r.exit_status}")
    return f"{ex.new_unit} stopped; {ex.old_unit} kept serving throughout"


async def run_prewarm(ex: Executor, who: str) -> str:
    await ex._approval("prewarm", who)
    (action,) = ex.fast.build("prewarm")
    total = sum(s for _, s in ex.fast.shards)
    result = await ex._run(who, "prewarm", action.commands[0])
    if not result.ok:
        raise StepFailed(f"the pre-warm did not start (exit {result.exit_status}): "
                             f"{(result.error_text or result.text).strip()[-200:]}")
    check = pw.progress_check(ex.profile.model_dir or "")
    started = time.monotonic()
    while True:
        await asyncio.sleep(ex.poll_s)
        try:
            r = await ex.session.transport.run(check, timeout=20)
        except TransportError:
            continue
        prog = pw.parse_progress(r.text, total)
        ex.fast._emit("prewarm", {"done_bytes": prog.done_bytes, "total_bytes": total, "finished": prog.finished,
                               "stopped": prog.stopped_reason, "text": prog.text(),
                               "seconds": round(time.monotonic() - started, 1)})
        ex._set("prewarm", detail=prog.text())
        if prog.finished:
            return prog.text()
        if prog.stopped_reason and (not prog.running or time.monotonic() - started > 5):
            raise StepFailed(prog.text() + " — nothing after it runs; the old model is unaffected")


async def run_in_place(ex: Executor, who: str) -> str:
    await ex._approval("in_place", who)
    (action,) = ex.fast.build("in_place")
    issued = ex._clock()
    try:
        result = await ex._run(who, "in_place", action.commands[0])
    except Exception as exc:  # the controller's _Dropped: the outcome is unknown
        raise StepFailed(f"the update's answer did not come back ({exc}): re-read /server_info before "
                             "anything else") from None
    code, body = split_reply(result.text)
    reply: dict[str, Any] = host_replies.reply_json(body)
    await asyncio.sleep(max(ex.poll_s, 0.5) * 2)  # the log's lines of the update may trail the reply
    paused = reply.get("num_paused_requests")
    # The pause is the observer's (console/core/derive/swap_observer.py: the update's reply, then its log lines):
    # this step reads it from the state, never times it itself.
    d = ex.state.swap.downtime
    own = d is not None and d.start_source.startswith("in place") and d.started_at_s is not None \
        and d.ended_at_s is not None and d.started_at_s >= issued - 5
    pause = round(d.ended_at_s - d.started_at_s, 3) if own else None  # type: ignore[union-attr,operator]
    source = (d.start_source.removeprefix("in place: ")  # type: ignore[union-attr]
              if own else "not measured (no reply or log line said it)")
    outcome = {"path": "in-place", "reply": reply, "http_status": code, "curl_exit": result.exit_status,
               "pause_s": pause, "pause_source": source,
               "num_paused_requests": paused, "predicted_s": ex.fast.plan.option("in-place").predicted_downtime_s
               if ex.fast.plan else None}
    if code is None or result.exit_status not in (0, None):
        dead = await server_dead(ex)
        outcome["server_died"] = dead
        ex.fast._emit("outcome", outcome)
        if dead:
            raise StepFailed("the server died during the update (no reply): rollback by restart of "
                                 f"{ex.old_unit} is offered; nothing after this step runs")
        raise StepFailed(f"no reply from /update_weights_from_disk (curl exit {result.exit_status}): "
                             "the outcome is unknown; re-read /server_info")
    if reply.get("success") is not True:
        ex.fast._emit("outcome", outcome)
        raise StepFailed(f"the reply says it failed (HTTP {code}): {clean(reply.get('message'))} — the "
                             "old weights keep serving (SGLang rolled back); nothing after this step runs")
    # The pause (the downtime) is the observer's: the update's reply and the log's lines are its facts.
    ex.fast._emit("outcome", outcome)
    return f"weights updated in place: {counted(paused, 'request')} paused, {clean(reply.get('message'))}"


async def server_dead(ex: Executor) -> bool:
    """Did the old server die during an in-place update with no reply? Its unit failed, inactive or
    crash-looping (a container: `docker inspect` says exited or dead); a unit that cannot be read is
    not proof of death."""
    if cfp.active(ex):  # issue 26 hook: the container's state, not a unit's
        return await cfp.server_dead(ex)
    unit = act.check_unit(ex.old_unit)
    for _ in range(10):
        try:
            now = await ex._unit_state(unit)
        except Exception:  # noqa: BLE001 - cannot read: not proof of death
            return False
        if now.get("ActiveState") in ("failed", "inactive") or unit_is_failing(now):
            return True
        await asyncio.sleep(ex.poll_s)
    return False


async def run_beside(ex: Executor, who: str) -> str:
    opt = ex.fast._need("beside")
    unit = act.check_unit(ex.new_unit)
    await ex._approval("beside", who)
    (action,) = ex.fast.build("beside")
    check, start = action.commands
    try:
        r = await ex._run(who, "beside", check)
    except Exception as exc:  # the controller's _Dropped: nothing was started
        raise StepRefused(f"port {opt.port} could not be checked ({exc}): nothing ran") from None
    taken = port_verdict(int(opt.port or 0), r.text, path_choice.bind_host(ex))
    if not taken and ex.fast.env_checked:  # the host may have changed since the plan (a drop-in added)
        why = await path_choice.beside_environment_problem(ex, opt.gpus, int(opt.port or 0))
        taken = f"the new server would not boot on GPUs {opt.cuda_visible_devices}: {why}" if why else None
    if taken:
        raise StepRefused(f"{taken}: the beside path is refused, nothing was started; {ex.old_unit} serves on "
                       "(restart, or free the port and plan again)")
    await unit_steps.unit_command(ex, "beside", who, unit, start, running_after=True)

    async def died() -> str | None:
        failing = unit_is_failing(await ex._unit_state(unit))  # a crash loop is never `failed`
        return f"{unit} failed while booting beside the old server: {failing}" if failing else None

    def booting() -> None:
        log = ex.state.data("log")
        if log is not None and log.phase:
            ex._set("beside", detail=f"booting on GPUs {opt.cuda_visible_devices}: {log.phase}")

    await wait_beside_ready(ex, int(opt.port or 0), stops="the new unit", died=died, on_tick=booting)
    return f"ready on port {opt.port} (GPUs {opt.cuda_visible_devices}); " \
           "the old server still serving"


async def run_switch(ex: Executor, who: str) -> str:
    opt = ex.fast._need("beside")
    (action,) = ex.fast.build("switch_traffic")
    if not action.commands:  # no router: what the operator must switch, said exactly
        move_endpoint(ex, int(opt.port or 0))
        return f"no router in the profile: switch your clients from port {ex.fast.old_port} to {opt.port}, " \
               f"then stop {ex.old_unit} (the stop action); the console now polls port {opt.port}"
    await ex._approval("switch_traffic", who)
    add, remove, stop = action.commands
    r = await ex._run(who, "switch_traffic", add)
    code, body = split_reply(r.text)
    if code != 200:
        raise StepFailed(f"the router refused the new worker (HTTP {code}): {clean(body, 200)} — the old "
                             "server keeps serving through the router; nothing after this step runs")
    r = await ex._run(who, "switch_traffic", remove)
    code, body = split_reply(r.text)
    if code != 200:
        raise StepFailed(f"the router did not remove the old worker (HTTP {code}): {clean(body, 200)}")
    ex._set("switch_traffic", detail="draining the old server (its running requests finish)")
    drained = await drain_old(ex)
    result = await ex._run(who, "switch_traffic", stop)
    if not result.ok:
        raise StepFailed(f"systemctl stop {ex.old_unit} exited {result.exit_status}")
    move_endpoint(ex, int(opt.port or 0))
    # No downtime (the observer writes it from the router's replies and the stop's).
    ex.fast._emit("outcome", {"path": "beside", "downtime_s": 0.0, "drained": drained, "port": opt.port,
                           "gpus": list(opt.gpus), "predicted_s": 0.0})
    return f"the router sends traffic to port {opt.port}; the old worker removed, {drained}, {ex.old_unit} " \
           "stopped: downtime 0"


def move_endpoint(ex: Executor, port: int) -> None:
    """The server the console follows answers on the beside port now: the state says so (the
    report, the panes and the fleet row read it) and the server source polls there."""
    session = ex.session
    if hasattr(session, "move_server"):
        session.move_server(port)
    ex.fast._emit("endpoint", {"from_port": ex.fast.old_port, "to_port": port, "unit": ex.new_unit})
    ex.runner.repoll("server")


async def drain_old(ex: Executor, timeout_s: float = 120.0) -> str:
    metrics = act.bounded(["curl", "-s", "--max-time", "3", "--", f"http://127.0.0.1:{ex.fast.old_port}/metrics"],
                          8)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            r = await ex.session.transport.run(metrics, timeout=15)
        except TransportError:
            await asyncio.sleep(ex.poll_s)
            continue
        running = _gauge(r.text, "sglang:num_running_reqs")
        if running is None or running <= 0:
            return "drained (no running request)" if running is not None else "drained (no metrics)"
        await asyncio.sleep(ex.poll_s)
    return f"not drained within {timeout_s:.0f}s (stopped anyway)"


def _gauge(text: str, name: str) -> float | None:
    """One gauge's value from a Prometheus /metrics text (None: absent or not a number)."""
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            try:
                return float(line.rsplit(" ", 1)[1])
            except (ValueError, IndexError):
                return None
    return None


__all__ = ["drain_old", "move_endpoint", "run_beside", "run_in_place", "run_prewarm", "run_rollback_beside",
           "run_rollback_in_place", "run_switch", "server_dead"]
