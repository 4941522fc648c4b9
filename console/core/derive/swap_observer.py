"""The swap as the host lived it: the plan's steps and the downtime clock follow what happens on
the host, whoever did it (the console's plan, another terminal, a shell on the host, the demo's
story). The console's own steps stay the console's; a step it did not run is written in as
observed, with the times the host's facts give ("stopped 08:03:12 (outside the console)").

This module is the one writer of the swap's facts: the downtime clock (its start, its end and what
each was read from) is written here and nowhere else, for the console's own actions exactly as for
a host-side operator's (tests/core/test_architecture.py fails on a writer elsewhere). The facts it
reads: the units' and containers' states (the service reading), systemd's own lines about a unit
(journal lines of PID 1, console/host/parsers/systemd.py), the SGLang log (its served requests, its
ready line, the update's lines), GPU readings, the server's readiness, and the replies of the
commands the console ran (the audit: `systemctl stop` exited 0 at 08:03:12, the router's and the
update's HTTP replies). The executor (controller, fastpath, container plan) records only intent
and who.

`SwapObserver.see(event)` is pure over the events it is shown: it returns the swap events to
apply (steps, downtime) and keeps no clock of its own, only the readings' and the log's times. So
the live core (console/domain/swap/controller.py subscribes it) and the report (console/domain/swap/report.py
feeds it a recording) derive the same plan from the same events, and a recording made before
this module existed still gives a report with its swap.
"""

from __future__ import annotations

import asyncio
import calendar
import json
import shlex
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from console.domain.analysis.host_replies import reply_json, split_reply
from console.domain.analysis.service_report import (
    effective_environment,
    install_change,
    install_change_json,
    side_from_text,
)
from console.core.events import (
    AuditAppended,
    BenchChanged,
    DowntimeChanged,
    LogAppended,
    PathEvent,
    ReadingChanged,
    SwapStep,
    SwapStepChanged,
    VerifyChanged,
)
from console.core.derive import swap_plan as swap_plan
from console.core.derive.swap_view import (
    INSTALL_DIFF,
    MEMORY,
    PLAN_STEPS,
    ROUTER_GAP,
    STEP_TITLES,
    UNIT_BACKUP,
    freed_phrase,
    freed_rows,
)
from console.host.parsers.router import url_port
from console.host.parsers.sglang_log import line_time, stamp_s

OUTSIDE = "outside the console"
# Beside, seen on the host: the router's log says it took the new server in and the old one out (the
# switch is done then, whether or not the old server is ever stopped); the downtime clock's words.
BESIDE_MOVED = "beside: the router moved all traffic to the new server"
BESIDE_NONE = "beside: no request was refused"
BESIDE_CONSOLE = "beside: the router moved traffic before the old server stopped"  # the console's own switch
# The note of an audit entry read back from the console's audit log at a start (console/domain/swap/
# audit_log.py): a command of a console that ended (killed, its machine lost) while its swap went on.
READ_BACK = "read back from the console's audit log"
DRAINED_MIB = 1024  # a GPU holding less than this (the CUDA context of nothing) counts as drained
SERVED_PATHS = ("/v1/", "/generate")
ACTIVE = ("active", "activating", "reloading")
# The lines real SGLang writes around /update_weights_from_disk (console/domain/swap/fastpath.py reads the same).
# A node of rank >= 1 of a multi-node server (--nnodes N --node-rank R) serves no API and logs no ready
# line: once its ranks have ended distributed init it starts SGLang's dummy health server, which is
# its own "serving again" (tests/data/sglang_multinode_real.json).
RANK_UP = "Dummy health check server started"
UPDATE_BEGIN = "Update engine weights online from disk begin"
UPDATE_END = "Update weights end."
UPDATE_FAILED = "Failed to update weights"
IN_PLACE_LOG = "the server's log (Update engine weights … begin → Update weights end.)"
IN_PLACE_REPLY = "the request and its reply"
READ_SLACK_S = 20.0  # the service script's own timeout: how long before its time a reading may have been taken
# A step the console runs or has run is the console's; the observer writes only into these.
TOUCHABLE = ("pending", "skipped", "failed", "refused")


def verification(state: Any) -> Any:
    """The one verification state the plan, the gate and the report read (the Download pane's `v`
    and the plan's Verify step write the same one). The one place to change when the core keeps it
    elsewhere."""
    return state.verify


def log_time(ts: str | None) -> float | None:
    """A log line's own stamp ("2026-11-30 15:04:05[.123]", host local time) as epoch seconds. A
    fact dated by a line reads `line_time` (the host's time of the line, where its source gave one)."""
    return stamp_s(ts)


def boot_time(step: Any) -> float | None:
    """A boot step's time (console.domain.analysis.log_state.BootStep): the host's time of its line,
    else (a recording made before the host's time was kept) its own stamp."""
    at = getattr(step, "at_s", None)
    return at if at is not None else stamp_s(step.at)


def clock(at_s: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at_s)) if at_s else "?"


def freed_between(before: Any, after: Any) -> list[str]:
    """What each GPU freed: its memory in the reading before the stop minus the reading after
    ("GPU 0 91,204 MiB", `freed_phrase`), never the last sample seen on the way down. Empty when
    either reading is missing."""
    if before is None or after is None:
        return []
    then = {g.index: g.memory_used_mib for g in before.gpus if g.lost_at_s is None and g.memory_used_mib is not None}
    out = []
    for g in sorted(after.gpus, key=lambda d: d.index):
        was, now = then.get(g.index), g.memory_used_mib
        if was is None or now is None or g.lost_at_s is not None or was <= now:
            continue
        out.append(freed_phrase(g.index, was, now))
    return out


def last_served_at(log_lines: Iterable[Any], before_s: float, slack_s: float = 5.0) -> float | None:
    """The newest served request (a prefill/decode batch, or a POST to the API) in the log at or
    before `before_s` (+ slack: the log's clock and ours differ a little); None when the log has none
    within the hour."""
    for event in reversed(list(log_lines)):
        if event.ts is None and event.at_s is None:
            continue
        served = event.kind in ("decode", "prefill") or (
            event.kind == "access" and "POST" in event.text and any(p in event.text for p in SERVED_PATHS))
        if not served:
            continue
        at = line_time(event)
        if at is not None and at <= before_s + slack_s:
            return at if before_s - at < 3600 else None
    return None


def downtime_from(host: str, log_lines: Iterable[Any], stopped_at_s: float, how: str) -> DowntimeChanged:
    """The clock's start: the old server's last served request, else the stop itself."""
    last = last_served_at(log_lines, stopped_at_s)
    if last is not None and last > stopped_at_s:
        # the newest one was served while the server stopped (the host's time of its line is after the
        # stop's first fact): the clock starts at the last one served before the stop, if any
        last = last_served_at(log_lines, stopped_at_s, slack_s=0.0) or last
    if last is not None and last <= stopped_at_s:
        return DowntimeChanged(host, last, "the old server's last served request, in its log")
    if last is not None:  # stamped after the stop (a whole-second stamp, or a batch served while stopping)
        return DowntimeChanged(host, stopped_at_s, f"{how} (the log's last request is stamped after it)")
    return DowntimeChanged(host, stopped_at_s, f"{how} (no request in the log)")


def audited_verb(command: str) -> tuple[str, str] | None:
    """(verb, unit or container) of an audited `systemctl stop|start|restart -- UNIT` or
    `docker stop|start|restart … -- NAME` (inside the `timeout` that bounds it); None for anything
    else (a script, a curl, sftp)."""

    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for tool in ("systemctl", "docker"):
        if tool not in words:
            continue
        rest = words[words.index(tool) + 1:]
        verb = next((w for w in rest if w in ("stop", "start", "restart")), None)
        if verb is not None and rest and not rest[-1].startswith("-"):
            return verb, rest[-1]
    return None


def _stamp_time(stamp: str | None) -> float | None:
    """The UTC time an install wrote in its backup's name (%Y%m%dT%H%M%SZ); None: none or not one."""
    try:
        return float(calendar.timegm(time.strptime(stamp or "", "%Y%m%dT%H%M%SZ")))
    except ValueError:
        return None


def _side(report: Any, unit: str | None) -> Any:
    """The side of the service report that describes `unit` (by name: which side a view shows as
    old is a view's choice, never a host fact)."""
    if report is None or unit is None:
        return None
    for side in (report.old, report.new):
        if side is not None and side.name == unit:
            return side
    return None


def _port(side: Any) -> int | None:
    value = side.command.value("--port") if side is not None and side.command is not None else None
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _gpus(side: Any) -> str | None:
    return effective_environment(side).get("CUDA_VISIBLE_DEVICES") if side is not None else None


def _exited_at(side: Any) -> float | None:
    """When a container not running now last exited (`docker inspect`'s State.FinishedAt, Docker's
    time): None for a unit, a running container, or an exit before its last start (a FinishedAt
    Docker keeps from an earlier run)."""
    if side is None or side.active_state is None or side.active_state in ACTIVE:
        return None
    finished, started = getattr(side, "finished_at_s", None), getattr(side, "started_at_s", None)
    if finished is None or (started is not None and finished < started):
        return None
    return float(finished)


def _beside(old: Any, new: Any) -> bool:
    """Two servers at once: only beside one another (another port, or other GPUs); the same port
    and GPUs cannot both serve, so that is not a beside start (it is about to fail or replace)."""
    po, pn, go, gn = _port(old), _port(new), _gpus(old), _gpus(new)
    other_gpus = go is not None and gn is not None and not set(go.split(",")) & set(gn.split(","))
    return (po is not None and pn is not None and po != pn) or other_gpus


def path_summary(state: Any, now_s: float | None = None) -> tuple[str, float | None, bool] | None:
    """(path, downtime seconds or None when unknown, finished) of the host's swap, from the one
    state the console-driven paths and the observer both write (state.swap); None: no swap seen."""
    swap = state.swap
    plan = swap.paths.get("plan")
    path = ((plan.data().get("plan") or {}).get("chosen") if plan is not None else None)
    stop = swap.steps.get("stop_old")
    for key, name in (("in_place", "in-place"), ("beside", "beside")):
        step = swap.steps.get(key)
        if step is not None and step.state == "running":
            return name, None, False  # under way (again): its downtime is known once it is over
    if path is None and stop is not None and stop.state not in ("pending", "skipped"):
        path = "restart"
    if path is None:
        return None
    d = swap.downtime
    if path == "beside":
        outcome = swap.paths.get("outcome")
        done = outcome is not None or any(s.state == "done" for k, s in swap.steps.items() if k == "switch_traffic")
        if done and d is not None and d.started_at_s is not None and d.ended_at_s is not None:
            return path, max(0.0, d.ended_at_s - d.started_at_s), True  # an instant, or the router's gap
        return path, 0.0 if done else None, done
    if d is None or d.started_at_s is None:
        return path, None, False
    if d.ended_at_s is not None:
        return path, max(0.0, d.ended_at_s - d.started_at_s), True
    now = state.now() if now_s is None else now_s
    return path, max(0.0, now - d.started_at_s), False


class SwapObserver:
    """Derives the plan's observed steps and the downtime clock from the host's facts."""

    def __init__(self, state: Any, *, wake: Callable[[str], None] | None = None) -> None:
        self.state = state
        self.host = state.host
        self.wake = wake or (lambda source: None)  # ask a source for a fresh reading (the live core)
        self._units: tuple[str | None, str | None] | None = None
        self._old_active: bool | None = None
        self._old_active_at: float | None = None  # last reading that saw the old unit serving
        self._gpu_drop_at: float | None = None
        self._drained_seen_at: float | None = None  # the first drained sample after the drop
        self._drained_mib: tuple[int, int] = (0, 0)
        self._last_gpu_mib: int | None = None
        self.stopped_at: float | None = None
        self.drained_at: float | None = None
        self.started_at: float | None = None
        self.ready_at: float | None = None
        self._sent: dict[str, SwapStep] = {}
        self._downtime_sent: DowntimeChanged | None = None
        self._ready_ended_downtime = False
        # issue 24: the path the host took, from its facts alone (the update's log lines; a new
        # server started while the old one served)
        self._update_begin_at: float | None = None
        self.path: str | None = None
        self._beside_at: float | None = None  # the new unit seen active while the old one served
        self._beside_port: int | None = None
        self._old_port: int | None = None
        self._beside_done_at: float | None = None
        self._beside_added_at: float | None = None  # the router added the new server (its record's time)
        self._boot_seen: tuple[Any, ...] | None = None  # the log's boot as last seen (its start, ready)
        self._new_active: bool | None = None  # the new unit or container as the service reading saw it
        self._rollback_at: float | None = None  # the old service started again by a rollback (its command)
        self._log_ready_at: float | None = None  # the new server's ready line in its log (after its start)
        self.memory = MemoryFacts(self.host)  # GPU memory before, after the stop, after, freed
        # the console's own steps, per key, for their current run: when its intent reached the state,
        # its first audited command's issue, when its outcome reached the state
        self._run_began: dict[str, float] = {}
        self._first_command: dict[str, float] = {}
        self._outcome_at: dict[str, float] = {}
        self._stopped_line_at: float | None = None  # systemd's "Stopped" line of the old unit (journald's time)
        self._update_end_at: float | None = None  # the update's "Update weights end." line
        self._console_ended: dict[str, str] = {}  # a console run's own last words, once the host finished it
        self._traffic_moved_at: float | None = None  # the router's 200 to the console's remove_worker
        self._beside_ready_at: float | None = None  # the new server's ready line after the console's beside began
        self._switch_stopped_at: float | None = None  # systemd's "Stopped" line of the old unit after the switch began
        self._read_back: dict[str, list[Any]] = {}  # per step: the commands of a console that ended (its audit log)
        self._read_back_stop: float | None = None  # that console's stop of the old service (its issue)
        # In place on one unit: the unit as the last reading saw it, and as it stood when the install
        # began (the diff's old side once the install has rewritten its file); the install it was written for
        self._unit_seen: tuple[Any, float] | None = None
        self._before_install: tuple[Any, float] | None = None
        self._install_diff_for: float | None = None
        self._read_back_switch_stop: float | None = None  # that console's stop at the end of its traffic switch
        self._router_seen: Any = None  # the router's last reading (its worker list, its log's moves)
        self._router_moves: tuple[Any, Any] | None = None  # (the new worker's add, the old one's remove or None)
        self._moved_at: float | None = None  # an operator's router moves took all traffic off the old server

    # -- what the swap is -----------------------------------------------------------------------
    def units(self) -> tuple[str | None, str | None]:
        setup = self.state.swap.setup
        if setup is not None and (setup.old_unit or setup.new_unit):
            return setup.old_unit, setup.new_unit
        if self._units is None:  # a recording without its setup: the first reading's units, latched
            report = self.state.data("service")
            if report is not None:
                self._units = (report.old.name if report.old is not None else None, report.new.name)
        return self._units or (None, None)

    # -- the steps --------------------------------------------------------------------------------
    def _step(self, key: str) -> SwapStep:
        """The step as it stands: the console's own, else what this observer wrote last (its events
        may not be applied yet)."""
        step = self.state.swap.steps.get(key) or SwapStep(key, STEP_TITLES[key])
        sent = self._sent.get(key)
        if sent is None or (not step.observed and step.state not in TOUCHABLE):
            return step
        return sent

    def _touchable(self, key: str) -> bool:
        step = self._step(key)
        return step.observed or step.state in TOUCHABLE

    def _write(self, out: list[Any], key: str, **changes: Any) -> None:
        if not self._touchable(key):
            return
        current = self._step(key)
        if self._console_sent(key, current):
            # The console's own run whose command reached the host, ended before the host was done
            # (the console closed under it, or its answer was lost): the host's outcome is written
            # as the console's (its author, its commands, its start), never as an action outside
            # the console; only a "done" overrides the console's own failure, in the host's words.
            if changes.get("state") not in ("done", None) or (current.state != "done" and changes.get("state") is None):
                return
            ended = self._console_ended.setdefault(key, current.detail)
            changes.pop("started_at_s", None)
            if "detail" in changes:
                changes["detail"] = (changes["detail"].replace(f" ({OUTSIDE})", "").replace(f"({OUTSIDE})", "")
                                     + f" — {current.who}'s command from the console, which ended first "
                                       f"({ended}); the host's outcome")
            step = replace(current, observed=True, **changes)
        else:
            step = replace(current, observed=True, who=None, commands=(), **changes)
            step = self._credited(step)
        if self._step(key) == step:
            return
        self._sent[key] = step
        out.append(SwapStepChanged(self.host, step))

    def _credited(self, step: SwapStep) -> SwapStep:
        """A step seen on the host whose commands a console that ended had run (its audit log, read
        back at this console's start): that console's author and commands, not "outside the console"."""
        entries = self._read_back.get(step.key)
        if not entries:
            return step
        who = ", ".join(dict.fromkeys(e.who for e in entries))
        detail = step.detail.replace(f"({OUTSIDE})", f"(by {who} from a console that ended: its audit log)")
        return replace(step, who=who, commands=tuple(e.command for e in entries), detail=detail)

    def _console_sent(self, key: str, step: SwapStep) -> bool:
        """`step` is (or was) the console's run of `key` whose first command went out to the host."""
        return step.who is not None and key in self._first_command and step.state != "pending"

    def still_valid(self, event: Any) -> bool:
        """At the moment a derived event is applied (the live core applies them a moment later):
        a step the console has taken over since is the console's, and so is the clock then."""
        if isinstance(event, SwapStepChanged) and not event.step.observed:
            return self._still_the_intent(event.step)  # the times of a console step: its intent unchanged
        if isinstance(event, SwapStepChanged):
            now = self.state.swap.steps.get(event.step.key)
            return now is None or now.observed or now.state in TOUCHABLE
        # the console's own plan is the console's; the host's facts (memory, the unit's change) the observer's
        if isinstance(event, PathEvent) and event.kind not in (MEMORY, INSTALL_DIFF, UNIT_BACKUP):
            plan = self.state.swap.paths.get("plan")
            return plan is None or bool(plan.data().get("observed"))
        return True  # the downtime clock is this observer's alone, whoever acted

    # -- the console's own steps: their times -------------------------------------------------------
    def _console_step_times(self, out: list[Any], step: SwapStep) -> None:
        """The times of a step the console runs are written here, never by the executor (it records
        the intent and who: tests/core/test_architecture.py), from the host's own records where it
        has them: a run begins at its first audited command's issue (else when its intent reached
        the state: a gate, an approval wait with no command yet); `stop_old` ends at the drained
        reading (GPU memory back to the floor, else systemd's "Stopped" line at journald's time),
        `start_new` and `beside` at the new server's ready line, `in_place` at the update's "Update
        weights end." line, `switch_traffic` (the router's moves, the drain, the old server's stop)
        at systemd's "Stopped" line of the old unit (journald's time; a container's stop has no line
        of the host's: its outcome then); any other end, or one the host has not told yet, when the outcome reached the
        state. A fact that comes after the outcome (a log batch, a late reading) dates it again, so
        an executor whose reply came late changes nothing. The recording keeps what was written, so
        a replay, a late attach and the report read the same times. A step the plan skips was never
        run: it has no time."""
        if step.observed:
            self._run_began.pop(step.key, None)
            return
        key, at = step.key, self.state.now()
        if step.state == "running" and step.started_at_s is None:  # a run begins (again)
            self._run_began[key] = at
            self._first_command.pop(key, None)
            self._outcome_at.pop(key, None)
            if key == "beside":
                self._beside_ready_at = None
            elif key == "switch_traffic":
                self._switch_stopped_at = None
        elif step.state in ("done", "failed", "refused") or (step.state == "skipped" and step.who is not None):
            if step.started_at_s is None and step.ended_at_s is None:  # ended before it ran: dated once
                self._run_began[key] = at
                self._first_command.pop(key, None)
                self._outcome_at[key] = at
            elif step.ended_at_s is None:
                self._outcome_at.setdefault(key, at)
        elif step.state not in ("running",):
            return
        if key not in self._run_began and step.started_at_s is not None:
            self._run_began[key] = step.started_at_s  # an intent written with its time (an older recording)
        self._console_time(out, key, step)

    def _console_time(self, out: list[Any], key: str, step: SwapStep | None = None) -> None:
        """(Re)date a console step of the current run from what is known now (see above)."""
        step = step or self.state.swap.steps.get(key)
        if step is None or step.observed or key not in self._run_began:
            return
        started = self._first_command.get(key, self._run_began[key])
        if step.state == "running":
            ended = None
        elif step.state in ("done", "failed", "refused") or (step.state == "skipped" and step.who is not None):
            ended = self._outcome_at.get(key, step.ended_at_s)
            host = self._host_end(key, started) if step.state == "done" else None
            ended = host if host is not None else ended
            if ended is not None and ended < started:
                started = ended  # a host stamp of whole seconds before the command's issue
        else:
            return
        timed = replace(step, started_at_s=started, ended_at_s=ended)
        if timed != step:
            out.append(SwapStepChanged(self.host, timed))

    def _console_began(self, key: str, at: float) -> bool:
        """The console's current run of `key` had begun by `at` (its first command's issue, else its
        intent; a stamp of whole seconds)."""
        began = self._first_command.get(key, self._run_began.get(key))
        return began is not None and at >= began - 1.0

    def _host_end(self, key: str, started: float) -> float | None:
        """The host's own record of the end of the console's `key`, for the run begun at `started`."""
        if key == "stop_old":
            at = self.drained_at if self.drained_at is not None else self._stopped_line_at
        elif key == "start_new":
            at = self._log_ready_at
        elif key == "in_place":
            at = self._update_end_at
        elif key == "beside":
            at = self._beside_ready_at
        elif key == "switch_traffic":
            at = self._switch_stopped_at
        else:
            return None
        return at if at is not None and at >= started - 1.0 else None  # a stamp of whole seconds

    def _still_the_intent(self, timed: SwapStep) -> bool:
        """A console step's times apply while the step is still the intent they date."""
        now = self.state.swap.steps.get(timed.key)
        return now is not None and not now.observed and \
            replace(now, started_at_s=timed.started_at_s, ended_at_s=timed.ended_at_s) == timed

    # -- events -----------------------------------------------------------------------------------
    def see(self, event: Any) -> list[Any]:
        """The swap events this host event implies (empty for most)."""
        out: list[Any] = []
        if isinstance(event, LogAppended):
            self._update_lines(out, event.events)
            self._unit_lines(out, event.events)
            self._ready_lines(out, event.events)
            return out
        if isinstance(event, AuditAppended):
            self._audited(out, event.entry)
            return out
        if isinstance(event, SwapStepChanged):
            if event.step.key == "install" and event.step.state == "running":
                self._before_install = self._unit_seen  # the last reading before the install's intent
            self._console_step_times(out, event.step)
            if event.step.key == "rollback" and event.step.state == "done":
                # the rollback's own end (its command waited for the old server's ready): the plan's
                # steps after the start are skipped now, not only once a server reading says so
                self._rolled_back(out, event.step.ended_at_s or self.state.now(), self.units()[0])
            if event.step.ended_at_s is not None:  # the swap may be over now (a rollback's end): "after" again
                self.memory.update(out, self.state.swap, self.stopped_at)
            return out
        if isinstance(event, ReadingChanged) and event.reading.data is not None and event.reading.error is None:
            at = event.reading.ok_at_s
            if at is None:
                return out
            data = event.reading.data
            if event.source == "service":
                self._service(out, data, at)
            elif event.source == "gpu":
                self._gpu(out, data, at)
            elif event.source == "server":
                self._server(out, data, at)
            elif event.source == "download":
                self._download(out, data, at)
            elif event.source == "log":
                self._log(data)
            elif event.source == "router":
                self._router_seen = data
                self._router(out)
        elif isinstance(event, VerifyChanged) and event.progress is not None:
            self._verify(out, event.progress)
        elif isinstance(event, BenchChanged) and event.kind == "result" and event.record is not None:
            self._bench(out, event.record)
        return out

    def _service(self, out: list[Any], report: Any, at: float) -> None:
        old_unit, new_unit = self.units()
        old, new = _side(report, old_unit), _side(report, new_unit)
        if new_unit is not None and old_unit == new_unit:
            self._install_diff(out, report, new, at)
            self._unit_backup(out, report, new, at)
        # In place the new unit is the old one, serving since before the swap: its being there is
        # not the install (the console's install then kept the observer's flag: "observed").
        if new is not None and new is not old and new.error is None and new.unit is not None \
                and self._step("install").state != "done":
            self._write(out, "install", state="done", started_at_s=at, ended_at_s=at,
                        detail=f"{new_unit} found installed {clock(at)} ({OUTSIDE})")
        exited = _exited_at(old)
        if exited is not None:
            self._old_stopped_record(out, exited)
        if old is not None and old.active_state is not None:
            active = old.active_state in ACTIVE
            if not active and self._old_active is None and self.stopped_at is None and self._beside_done_at is None \
                    and self._read_back_switch_stop is not None and self._read_back_switch_stop <= at \
                    and new is not None and new is not old and new.active_state in ACTIVE:
                # the first reading finds the old server stopped and the new one serving, as the traffic
                # switch of a console that ended says (its audit log): the beside path, done, no downtime
                self._read_back_beside(out, old, new, exited)
            if not active and self._old_active is None and self.stopped_at is None \
                    and self._read_back_stop is not None and self._read_back_stop <= at:
                # the first reading finds it stopped, as the read-back stop command says
                self._stopped(out, self._read_back_stop, "the stop command of a console that ended (its audit log)")
            if active:
                if self._gpu_drop_at is not None and self._gpu_drop_at < at - READ_SLACK_S:
                    self._gpu_drop_at = None  # memory fell long before a reading that still saw it serving
                self._old_active_at = at
            elif self._old_active and self.stopped_at is None and self._console_moved_traffic():
                # The console's own "Move traffic …, stop the old one" stopped it: that step is the
                # stop (its author is the console's), not a stop and a start seen outside it.
                self._moved_then_stopped(out, exited if exited is not None and exited <= at else at)
                self._beside_done_at = self._beside_done_at or at
            elif self._old_active and self.stopped_at is None and self._beside_at is not None \
                    and self._beside_done_at is None and self._touchable("beside"):
                self._beside_done(out, at)
            elif self._old_active and self.stopped_at is None and not self._beside_done_at:
                # The GPUs' memory falling since the last reading that saw it serving dates the stop
                # better than this reading (the service is read every 15 s, and a reading's time is
                # when its script ended, up to READ_SLACK_S after `systemctl show` ran).
                # A container's exit (Docker's FinishedAt) dates it too: the earliest of the two.
                drop = self._gpu_drop_at
                since = (self._old_active_at or 0) - READ_SLACK_S
                facts = [t for t in (drop, exited) if t is not None and since < t <= at]
                self._stopped(out, min(facts) if facts else at)
            if active and new is not None and new is not old and new.active_state in ACTIVE \
                    and self._beside_at is None and self.stopped_at is None and _beside(old, new):
                self._beside_started(out, old, new, at)
            self._old_active = active
        if new is not None and new.active_state is not None:
            self._new_active = new.active_state in ACTIVE
        if new is not None and new.active_state in ACTIVE and self.stopped_at is not None:
            self._new_started(out, at)
        if self._router_seen is not None:
            self._router(out)

    def _install_diff(self, out: list[Any], report: Any, unit: Any, at: float) -> None:
        """In place on one unit the install rewrites the file of the unit that serves, and every
        reading after it compares that file with itself: the install's change is the unit as it stood
        before the install (the last reading before its intent) against the first reading after it."""
        if unit is None or unit.error is not None or unit.command is None:
            return
        install = self._step("install")
        before = self._before_install
        if install.state == "done" and install.ended_at_s is not None and at >= install.ended_at_s \
                and before is not None and self._install_diff_for != install.ended_at_s:
            self._install_diff_for = install.ended_at_s
            fact = {"unit": unit.name, "from": "reading", "before_at": before[1], "at": at,
                    "installed_at": install.ended_at_s, "by": install.who or None,
                    **install_change_json(install_change(before[0], report))}
            out.append(PathEvent(self.host, INSTALL_DIFF, json.dumps(fact), at))
        if install.state != "running":
            self._unit_seen = (unit, at)

    def _unit_backup(self, out: list[Any], report: Any, unit: Any, at: float) -> None:
        """In place on one unit, the backup the last install kept (`UNIT.bak-STAMP`, read by the
        service source): the swap's `unit_backup` fact, and the install's change from it where this
        console did not see the unit before the install (it started or reconnected after it), or the
        backup is of a later install than the change it saw."""
        backup = getattr(report, "unit_backup", None)
        if backup is None or unit is None or unit.error is not None:
            return  # not read (an older recording): nothing known either way
        installed_at = _stamp_time(backup.stamp)
        fact = {"unit": unit.name, "found": backup.path is not None, "path": backup.path, "stamp": backup.stamp,
                "installed_at": installed_at, "readable": backup.text is not None, "truncated": backup.truncated,
                "by": self._installed_by(backup.stamp)}
        seen = self.state.swap.paths.get(UNIT_BACKUP)
        if seen is None or {k: v for k, v in seen.data().items() if k != "read_at"} != fact:
            out.append(PathEvent(self.host, UNIT_BACKUP, json.dumps({**fact, "read_at": at}), at))
        if backup.path is None or backup.text is None or unit.command is None:
            return
        written = [e for e in out if isinstance(e, PathEvent) and e.kind == INSTALL_DIFF]  # this reading's
        current = written[-1] if written else self.state.swap.paths.get(INSTALL_DIFF)
        now = current.data() if current is not None else {}
        if now.get("unit") == unit.name and (now.get("backup") == backup.path or (
                now.get("from") != "backup" and installed_at is not None
                and installed_at <= (now.get("installed_at") or now.get("at") or 0))):
            return  # this backup's change is written, or the change seen live is of this install or a later one
        before = replace(side_from_text(unit.name, backup.text),
                         secret_fingerprints=dict(getattr(backup, "secret_fingerprints", None) or {}))
        change = {"unit": unit.name, "from": "backup", "backup": backup.path, "before_at": None, "at": at,
                  "installed_at": installed_at, "by": fact["by"],
                  **install_change_json(install_change(before, report))}
        out.append(PathEvent(self.host, INSTALL_DIFF, json.dumps(change), at))

    def _installed_by(self, stamp: str | None) -> str | None:
        """Who ran the install that kept this backup: its audited command names the file (this
        console's audit, or a console's that ended, read back); None: unknown."""
        if not stamp:
            return None
        for entry in reversed(self.state.swap.audit):
            if entry.action == "install" and f".bak-{stamp}" in entry.command:
                return str(entry.who)
        return None

    def _console_moved_traffic(self) -> bool:
        """The console's "Move traffic …" is under way or done, or its router moves went out (the
        router said 200 to removing the old worker) though the step ended before its stop."""
        step = self.state.swap.steps.get("switch_traffic")
        if step is None:
            return False
        if not step.observed and step.state in ("running", "done"):
            return True
        return self._traffic_moved_at is not None and self._console_sent("switch_traffic", step)

    def _moved_then_stopped(self, out: list[Any], at: float) -> None:
        """The old server stopped after the console's router moves, its step ended before its own
        stop (the console closed, the answer lost): no downtime, the move the console's."""
        step = self._step("switch_traffic")
        if self._traffic_moved_at is None or not self._console_sent("switch_traffic", step) \
                or self._beside_done_at is not None or (not step.observed and step.state in ("running", "done")):
            return  # the console's step under way writes its own stop (its audited reply)
        self._beside_done_at = at
        d = DowntimeChanged(self.host, at, "beside: the router moved traffic before the old server stopped", at,
                            "beside: no request was refused")
        if self._downtime_sent != d and self.state.swap.downtime != d:
            self._downtime_sent = d
            out.append(d)
        old_unit, new_unit = self.units()
        self._write(out, "switch_traffic", state="done", ended_at_s=at,
                    detail=f"the router moved traffic to {new_unit}; {old_unit} stopped {clock(at)}: downtime 0")

    # -- issue 24: the faster paths as the host lived them ------------------------------------------
    def _path(self, out: list[Any], path: str, reason: str, at: float, outcome: dict[str, Any] | None = None) -> None:
        """The path into the same field the console-driven paths set (state.swap.paths): the
        report's "Path and downtime" and its JSON `swap_path` read it. Never over the console's plan."""

        self.path = path
        plan = self.state.swap.paths.get("plan")
        if plan is not None and not plan.data().get("observed"):
            return
        option = {"path": path, "possible": True, "reason": reason, "predicted_downtime_s": None, "details": []}
        data = {"observed": True, "plan": {"chosen": path, "forced": False, "observed": True, "options": [option]}}
        if plan is None or plan.data() != data:
            out.append(PathEvent(self.host, "plan", json.dumps(data), at))
        if outcome is not None:
            out.append(PathEvent(self.host, "outcome", json.dumps({"path": path, "observed": True, **outcome}), at))

    def _update_lines(self, out: list[Any], events: Iterable[Any]) -> None:
        """SGLang's own lines around /update_weights_from_disk (every TP rank writes them): the
        pause is from the first "begin" to the last "end" of one update."""
        for e in events:
            text = e.text or ""
            if UPDATE_BEGIN in text:
                at = line_time(e)
                # the other ranks' lines of the same begin are not a new update
                if at is not None and (self._update_begin_at is None or self._step("in_place").state != "running"
                                       and at > (self._step("in_place").ended_at_s or 0)):
                    self._update_begin_at = at
                    self._began(out, "in-place", at)
                    if self._touchable("in_place"):
                        self._write(out, "in_place", state="running", started_at_s=at, ended_at_s=None,
                                    detail=f"weights updating in place since {clock(at)} ({OUTSIDE}): "
                                           "requests paused")
            elif UPDATE_FAILED in text and self._update_begin_at is not None and self._touchable("in_place"):
                self._write(out, "in_place", state="failed", ended_at_s=line_time(e),
                            detail=f"the update failed ({OUTSIDE}): the server's log says {text[:160]!r}")
            elif UPDATE_END in text and self._update_begin_at is not None:
                begin, end = self._update_begin_at, line_time(e)
                if end is None or end < begin:
                    continue
                pause = end - begin
                self._update_end_at = end
                self._console_time(out, "in_place")
                self._write(out, "in_place", state="done", started_at_s=begin, ended_at_s=end,
                            detail=f"weights updated in place {clock(begin)}–{clock(end)} ({OUTSIDE}): "
                                   f"paused {pause:.1f}s (the server's log)")
                source = IN_PLACE_LOG
                self._paused(out, begin, end, source)
                self._path(out, "in-place", "seen on the host: the server updated its weights in place "
                           "(/update_weights_from_disk), no restart", end,
                           {"pause_s": round(pause, 3), "pause_source": source, "num_paused_requests": None})

    def _began(self, out: list[Any], path: str, at: float) -> None:
        """The swap began on the host along `path`: the plan's steps that path does not take (Verify
        when the profile did not ask for it) are skipped with the table's reason, never left
        pending (console/core/derive/swap_plan.py, the one table the executor reads too)."""
        setup = self.state.swap.setup
        if setup is None:
            return  # a recording without its setup: what the profile asked is not known
        old_unit, new_unit = self.units()
        runtime = "systemd" if (new_unit or "").endswith(".service") else "container"
        for key, why in swap_plan.skips(path, runtime, verify_sha=setup.verify_sha):
            step = self._step(key)
            if step.state == "pending" and self._touchable(key):
                self._write(out, key, state="skipped", ended_at_s=at, detail=why)

    def _paused(self, out: list[Any], begin: float, end: float, source: str) -> None:
        """In place: the running server held its requests from `begin` to `end` (the update's pause,
        named as one: no server stopped or booted)."""
        d = self.state.swap.downtime
        if source == IN_PLACE_REPLY and d is not None and d.start_source == f"in place: {IN_PLACE_LOG}" \
                and d.started_at_s is not None and d.started_at_s >= begin - 5:
            return  # the log's own lines of this update say it better than the request's times
        d = DowntimeChanged(self.host, begin, f"in place: {source}", end,
                            "in place: weights updated (requests resumed)")
        if self._downtime_sent != d and self.state.swap.downtime != d:
            self._downtime_sent = d
            out.append(d)

    def _audited(self, out: list[Any], entry: Any) -> None:
        """A command the console ran, and what the host answered (its exit status, its reply): the
        host's fact of a stop, a start or an update, dated by the command itself."""
        issued = entry.at_s - (entry.duration_s or 0.0)
        if entry.note == READ_BACK:
            # A command of a console that ended: it credits the step the host's facts show to its
            # author. Its stop is a fact only once a reading agrees (the old service not running):
            # a swap long over, or undone since, is not dated by it.
            self._read_back.setdefault(entry.action, []).append(entry)
            current = self._sent.get(entry.action)
            if current is not None and current.observed:  # written before its command was read back
                self._write(out, entry.action)
            said = audited_verb(entry.command) if entry.exit_status == 0 else None
            if said is not None and said[0] == "stop" and said[1] == self.units()[0] \
                    and entry.action == "switch_traffic":  # beside: the switch's last act, no downtime
                self._read_back_switch_stop = issued if self._read_back_switch_stop is None else \
                    min(issued, self._read_back_switch_stop)
            elif said is not None and said[0] == "stop" and said[1] == self.units()[0] and entry.action != "rollback":
                self._read_back_stop = issued if self._read_back_stop is None else min(issued, self._read_back_stop)
            return
        began = self._run_began.get(entry.action)
        if began is not None and entry.action not in self._first_command and issued >= began - 1.0:
            # the run's first command (whatever its answer: it was sent) dates the step's start
            self._first_command[entry.action] = max(issued, began)
            self._console_time(out, entry.action)
        if entry.exit_status != 0:
            return  # no answer (a drop: the next readings say what happened), or it failed: nothing changed
        old_unit, new_unit = self.units()
        if entry.action == "in_place" and "update_weights_from_disk" in entry.command:

            code, body = split_reply(entry.output_tail)
            if code == 200 and reply_json(body).get("success") is True:
                self._paused(out, issued, entry.at_s, IN_PLACE_REPLY)
            return
        if entry.action == "switch_traffic" and "remove_worker" in entry.command:
            code, _ = split_reply(entry.output_tail)
            if code == 200:
                self._traffic_moved_at = entry.at_s
        said = audited_verb(entry.command)
        if said is None:
            return
        verb, target = said
        if verb == "stop" and target == old_unit and entry.action == "switch_traffic" \
                and self._downtime_sent is not None and self._downtime_sent.start_source.startswith("beside"):
            pass  # the host told it first (the console's step had ended before its stop's answer)
        elif verb == "stop" and target == old_unit and entry.action == "switch_traffic":
            # Beside: the router moved the traffic (its replies said 200) before this stop. Its instant:
            # the host's record of the stop (systemd's Stopped line, the container's FinishedAt) when
            # known, else the stop's reply; a container's exit is read now, not at the next poll.
            at = self._switch_stopped_at if self._switch_stopped_at is not None else entry.at_s
            if self._switch_stopped_at is None:
                self.wake("service")
            d = DowntimeChanged(self.host, at, "beside: the router moved traffic before the old server "
                                "stopped", at, "beside: no request was refused")
            self._beside_done_at = self._beside_done_at or at
            if self._downtime_sent != d and self.state.swap.downtime != d:
                self._downtime_sent = d
                out.append(d)
        elif verb == "stop" and target == old_unit and entry.action != "rollback":
            self._stopped(out, issued, "the stop command")
            self.wake("service")  # a container's exit time (Docker's FinishedAt) is in its next reading
        elif verb in ("start", "restart") and target == old_unit and entry.action == "rollback":
            self._rollback_at = issued

    def _unit_lines(self, out: list[Any], events: Iterable[Any]) -> None:
        """systemd's own lines about a unit (PID 1's "Stopping X…", "Started X."): the old unit's
        stop, the new one's start, at journald's time."""
        old_unit, new_unit = self.units()
        for e in events:
            if e.kind != "unit":
                continue
            at = line_time(e)
            unit, kind = e.fields.get("unit"), e.fields.get("transition")
            if at is None or unit is None:
                continue
            if unit == old_unit and kind == "stopped":
                self._old_stopped_record(out, at)
            if unit == old_unit and kind == "stopped" and self._old_active and self.stopped_at is None \
                    and self._beside_at is not None and self._beside_done_at is None \
                    and not self._console_moved_traffic() and self._touchable("beside"):
                self._beside_done(out, at)  # an operator's beside path: the old one stopped (journald's time)
            if unit == old_unit and kind in ("stopping", "stopped") and self._old_active \
                    and self.stopped_at is None and self._console_moved_traffic():
                self._moved_then_stopped(out, at)
            elif unit == old_unit and kind in ("stopping", "stopped") and self._old_active \
                    and self._beside_at is None and not self._console_moved_traffic() and self._rollback_at is None:
                self._stopped(out, at, f"systemd stopping {unit} {clock(at)}")
            elif unit == old_unit and kind in ("starting", "started") and self._rollback_at is not None:
                self._rollback_at = min(self._rollback_at, at)

    def _old_stopped_record(self, out: list[Any], at: float) -> None:
        """The host's own record of the old server's end: systemd's "Stopped" line of the old unit
        (journald's time), or the old container's exit (`docker inspect`'s State.FinishedAt, Docker's
        time). It ends the console's "Move traffic …, stop the old one" (its last act) and dates the
        beside path's instant of no downtime; it ends the console's stop when no drained GPU reading
        came."""
        if self._switch_stopped_at is None and self._console_began("switch_traffic", at):
            self._switch_stopped_at = at
            self._console_time(out, "switch_traffic")
            self._beside_instant(out, at)
        if self._rollback_at is None and self.stopped_at is not None \
                and at >= self.stopped_at - 1.0 and self._stopped_line_at is None:
            self._stopped_line_at = at
            self._console_time(out, "stop_old")

    def _beside_instant(self, out: list[Any], at: float) -> None:
        """Beside, the downtime is an instant (none): the old server's stop after the router's moves,
        dated by the host's record of it once known (the stop's reply came after it)."""
        d = self._downtime_sent
        if d is None or not d.start_source.startswith("beside: the router moved") or d.started_at_s == at \
                or self.state.swap.downtime not in (d, None):
            return
        d = replace(d, started_at_s=at, ended_at_s=at)
        self._downtime_sent = d
        out.append(d)

    def _ready_lines(self, out: list[Any], events: Iterable[Any]) -> None:
        """SGLang's own ready line ("The server is fired up and ready to roll!") after the new
        server's start (or the rollback's): the service serves again."""
        old_unit, new_unit = self.units()
        for e in events:
            if RANK_UP in e.text and (rank := self._node_rank()) is not None:
                self._rank_up(out, e, rank)
                continue
            if e.kind != "boot" or e.phase != "ready":
                continue
            at = line_time(e)
            if at is None:
                continue
            said_by = e.fields.get("container")  # a container's line says which one wrote it
            if self._beside_ready_at is None and (said_by is None or said_by == new_unit) \
                    and self._console_began("beside", at):
                self._beside_ready_at = at  # the new server booted beside the old one: the console's step ends
                self._console_time(out, "beside")
            beside = self._step("beside")
            if (said_by is None or said_by == new_unit) and beside.observed and beside.state == "running" \
                    and self._beside_at is not None and at >= self._beside_at - 1.0 and self.stopped_at is None:
                # an operator's new server, started beside the old one, wrote its ready line: the same
                # fact that ends the console's own beside step
                self._write(out, "beside", state="done", ended_at_s=at,
                            detail=f"{new_unit} started {clock(beside.started_at_s)} beside the old one, ready "
                                   f"{clock(at)}: its ready line in the log ({OUTSIDE})")
            if self._rollback_at is not None and at >= self._rollback_at - 1:
                self._ended(out, at, f"{old_unit} ready again (rollback)")
            elif self.stopped_at is not None:
                launch = self.started_at if self.started_at is not None else self._launch_at()
                if launch is not None and launch >= self.stopped_at - 1 and at >= launch - 1:
                    self._log_ready_at = at if self._log_ready_at is None else min(at, self._log_ready_at)
                    self._ended(out, at, f"{new_unit} ready")
                    self._console_time(out, "start_new")
                    self._ready_seen_late(out)

    def _node_rank(self) -> int | None:
        """This host's --node-rank when it is a node of rank >= 1 of a multi-node server (its units'
        command line, as the service source read it); None otherwise."""
        report = self.state.data("service")
        for side in ((report.new, report.old) if report is not None else ()):
            cmd = getattr(side, "command", None)
            rank = cmd.value("--node-rank") if cmd is not None else None
            if isinstance(rank, str) and rank.strip().isdigit():
                return int(rank) if int(rank) >= 1 else None
        return None

    def _rank_up(self, out: list[Any], e: Any, rank: int) -> None:
        """A node of rank >= 1: its dummy health server after the stop (or the rollback's start) ends
        its downtime; rank 0's API is the deployment's, not this node's."""
        at = line_time(e)
        if at is None:
            return
        old_unit, new_unit = self.units()
        said = f"node rank {rank}: its ranks up (SGLang's dummy health server started; rank 0 serves the API)"
        if self._rollback_at is not None and at >= self._rollback_at - 1:
            self._ended(out, at, f"{old_unit} again, {said}")
        elif self.stopped_at is not None and at >= self.stopped_at:
            self._ended(out, at, f"{new_unit}, {said}")

    def _ready_seen_late(self, out: list[Any]) -> None:
        """An operator's start seen done by a server reading before the log brought the ready line:
        the line (the server's own stamp) dates the end, not the poll that happened to see it."""
        step, at = self._step("start_new"), self._log_ready_at
        if not step.observed or step.state != "done" or at is None or step.ended_at_s is None \
                or step.ended_at_s <= at:
            return
        started = step.started_at_s if step.started_at_s is not None else at
        if at < started - 1.0:
            return
        self.ready_at = at
        _, new_unit = self.units()
        self._write(out, "start_new", ended_at_s=at,
                    detail=f"{new_unit} started {clock(started)} ({OUTSIDE}); ready {clock(at)}, "
                           f"{at - started:.0f}s after the start: its ready line in the log")

    def _router(self, out: list[Any]) -> None:
        """The router's moves as the router recorded them (its log's "Added worker"/"Removed worker"
        lines at its own time, its worker list): the new server's worker added, the old one's
        removed. Written into the traffic switch when it is not the console's own run: a console that
        ended mid-switch (its author credited from its audit log), or an operator's moves. The
        console's own run is timed by its own commands and the old server's stop (see above)."""
        r = self._router_seen
        old_unit, new_unit = self.units()
        report = self.state.data("service")
        old_port, new_port = _port(_side(report, old_unit)), _port(_side(report, new_unit))
        if r is None or old_port is None or new_port is None or old_port == new_port:
            return
        adds = [m for m in r.moves if m.verb == "added" and url_port(m.url) == new_port]
        if not adds:
            return
        added = adds[-1]
        removed = next((m for m in r.moves if m.verb == "removed" and url_port(m.url) == old_port
                        and m.at_s >= added.at_s - 1.0), None)
        if r.workers is not None and new_port not in {url_port(u) for u in r.workers}:
            return  # the new worker is not in the router's list now: taken out again since (a rollback)
        if r.workers is not None and removed is not None and old_port in {url_port(u) for u in r.workers}:
            removed = None  # the old worker is back in the router's list
        earlier = [m for m in r.moves if m.verb == "removed" and url_port(m.url) == old_port
                   and m.at_s < added.at_s - 1.0] if removed is None else []
        gap = earlier[-1] if earlier and (r.workers is None or old_port not in {url_port(u) for u in r.workers}) \
            else None  # the old worker removed before the new one was added (and not back since)
        others = None if r.workers is None else sorted(u for u in r.workers if url_port(u) != new_port)
        self._router_moves = (added, removed)
        self._beside_added(out, added.at_s, _side(report, new_unit))
        step = self._step("switch_traffic")
        if step.observed and step.state == "done" and self._beside_done_at is not None \
                and step.ended_at_s == self._beside_done_at:  # the old server's stop wrote it done: the moves in it
            start, words = self._switch_done_words(self._beside_done_at)
            self._write(out, "switch_traffic", started_at_s=start, detail=words)
            return
        if (not step.observed and step.state in ("running", "done")) or step.state == "done":
            return  # the console's own run, or done already
        if removed is not None and not self._read_back.get("switch_traffic") and self._beside_done_at is None:
            self._traffic_moved(out, added, removed)  # an operator's: the router's moves are the whole switch
            return
        if gap is not None and others == [] and not self._read_back.get("switch_traffic") \
                and self._beside_done_at is None:
            self._router_gap(out, added, gap)  # an operator's, the old worker out first: no worker between
            return
        moves = f"the router added {added.url} {clock(added.at_s)}"
        if gap is not None:  # whether another worker served between the two is not known (or it did)
            between = ("no other worker was in its list, so requests through it were refused" if others == []
                       else f"{', '.join(others[:3])} in its list now" if others
                       else "whether another worker served between is not known (its list was not read)")
            detail = (f"the router removed {gap.url} {clock(gap.at_s)} before it added {added.url} "
                      f"{clock(added.at_s)} ({OUTSIDE}): {between}; {old_unit} not stopped yet")
        elif removed is None:
            detail = (f"{moves} ({OUTSIDE}); the old worker not removed: the router still sends "
                      f"{old_unit} traffic")
        else:
            detail = f"{moves} and removed {removed.url} {clock(removed.at_s)} ({OUTSIDE}); {old_unit} not stopped yet"
        self._write(out, "switch_traffic", state="running", started_at_s=added.at_s, ended_at_s=None, detail=detail)

    def _beside_added(self, out: list[Any], at: float, new: Any) -> None:
        """The router took the new server in (its "Added worker" line, at its time): it answered then,
        so the beside step (start it beside the old one, wait for ready) was done by then. A console
        started after it read both serving and showed the step running from its own first reading."""
        step = self._step("beside")
        if step.observed and step.state == "done" and step.ended_at_s is not None and step.ended_at_s <= at:
            self._beside_added_at = at  # done at its ready line, before the router's add
        if step.state == "done" or self.stopped_at is not None or self._beside_done_at is not None \
                or (not step.observed and step.state == "running"):
            return  # done already, the old one stopped first (another path), or the console's own run
        began = [e.at_s - (e.duration_s or 0.0) for e in self._read_back.get("beside", ())]
        began += [t for t in (getattr(new, "started_at_s", None), self._beside_at) if t is not None]
        start = min((t for t in began if t <= at), default=None)  # the host's, never after the add
        if self._beside_at is None or (start is not None and start < self._beside_at):
            self._beside_at = start if start is not None else at
            self._began(out, "beside", self._beside_at)
        self._beside_added_at = at
        _, new_unit = self.units()
        started = f"started {clock(start)}, " if start is not None else ""
        self._write(out, "beside", state="done", started_at_s=start, ended_at_s=at,
                    detail=f"{new_unit} {started}ready beside the old one: the router added it {clock(at)} ({OUTSIDE})")

    def _beside_started(self, out: list[Any], old: Any, new: Any, at: float) -> None:
        self._beside_at, self._beside_port, self._old_port = at, _port(new), _port(old)
        self._began(out, "beside", at)
        where = ", ".join(x for x in (f"GPUs {_gpus(new)}" if _gpus(new) else "",
                                      f"port {_port(new)}" if _port(new) else "") if x)
        self._write(out, "beside", state="running", started_at_s=at, ended_at_s=None,
                    detail=f"{new.name} started {clock(at)} beside {old.name} ({where}) while it serves ({OUTSIDE})")
        self.wake("gpu")

    def _read_back_beside(self, out: list[Any], old: Any, new: Any, exited: float | None) -> None:
        """A console that ended after its traffic switch's stop: the new server's start beside the old
        one from its commands' issue, the old server's stop at the host's record of it (a container's
        FinishedAt) else that stop command's issue."""
        stop = self._read_back_switch_stop
        assert stop is not None
        began = [e.at_s - (e.duration_s or 0.0) for e in self._read_back.get("beside", ())]
        self._beside_at = min(began) if began else stop
        self._beside_port, self._old_port = _port(new), _port(old)
        self._began(out, "beside", self._beside_at)
        self._beside_done(out, exited if exited is not None and exited >= stop - 1.0 else stop)

    def _switch_done_words(self, at: float) -> tuple[float, str]:
        """(start, words) of the traffic switch seen done on the host at `at` (the old server's stop):
        the router's moves first when its record has them."""
        old_unit, new_unit = self.units()
        moved = self._router_moves
        moves = "" if moved is None else f"the router added {moved[0].url} {clock(moved[0].at_s)}" + (
            f" and removed {moved[1].url} {clock(moved[1].at_s)}; " if moved[1] is not None else "; ")
        start = moved[0].at_s if moved is not None and moved[0].at_s <= at else at
        return start, (f"{moves}{old_unit} stopped {clock(at)} after {new_unit} started beside it ({OUTSIDE}): "
                       "no downtime")

    def _beside_done(self, out: list[Any], at: float) -> None:
        self._beside_done_at = at
        old_unit, new_unit = self.units()
        switch = self._step("switch_traffic")
        if self._moved_at is not None and switch.observed and switch.state == "done":
            # the router had moved all traffic (the switch done then): the old server's stop after it
            # is said in its words, and the downtime's, never a later end of either
            self._write(out, "switch_traffic", detail=switch.detail.replace(
                f"{old_unit} still running (warm for a rollback)", f"{old_unit} stopped {clock(at)}"))
            d = self._downtime_sent
            if d is not None and d.start_source.startswith(BESIDE_MOVED) and self.state.swap.downtime in (d, None):
                self._beside_clock(out, d.started_at_s or at, d.start_source.replace(
                    f"{old_unit} kept running", f"{old_unit} stopped {clock(at)}"))
            return
        if self._beside_added_at is None and self._step("beside").state != "done":
            # else done at its ready line or the router's add, which it was by then
            self._write(out, "beside", state="done",
                        started_at_s=self._step("beside").started_at_s or self._beside_at, ended_at_s=at,
                        detail=f"{new_unit} started {clock(self._beside_at)} beside the old one ({OUTSIDE})")
        start, words = self._switch_done_words(at)
        self._write(out, "switch_traffic", state="done", started_at_s=start, ended_at_s=at, detail=words)
        if self._downtime_sent is None or not self._downtime_sent.start_source.startswith("beside"):
            by = self._read_back.get("switch_traffic")
            if by:  # a console that ended ran the switch (its audit log): its moves, then its stop
                who = ", ".join(dict.fromkeys(e.who for e in by))
                self._beside_clock(out, at, f"{BESIDE_CONSOLE} (by {who} from a console that ended: its audit log)")
            else:
                self._beside_clock(out, at, f"beside: {old_unit} stopped {clock(at)} after {new_unit} served "
                                            f"beside it ({OUTSIDE})")
        self._path(out, "beside", "seen on the host: a new server started beside the old one (other GPUs or "
                   "port), then the old one stopped", at, {"downtime_s": 0.0})
        self._endpoint(out, at)

    def _traffic_moved(self, out: list[Any], added: Any, removed: Any) -> None:
        """An operator's beside path: the router's log says it added the new server and then removed
        the old one. All traffic is on the new server from the removal: the switch is done, and the
        downtime an instant (none), whether the old server is stopped later or kept warm for a
        rollback (it is then named as still running)."""
        at = max(added.at_s, removed.at_s)
        self._moved_at = at
        old_unit, new_unit = self.units()
        self._write(out, "switch_traffic", state="done", started_at_s=added.at_s, ended_at_s=at,
                    detail=f"the router added {added.url} {clock(added.at_s)} and removed {removed.url} "
                           f"{clock(removed.at_s)} ({OUTSIDE}): all traffic on {new_unit}; "
                           f"{old_unit} still running (warm for a rollback)")
        self._beside_clock(out, at, f"{BESIDE_MOVED} {clock(at)} (the router's log), {old_unit} kept running "
                                    f"({OUTSIDE})")
        self._path(out, "beside", "seen on the host: a new server started beside the old one (other GPUs or "
                   "port), then the router moved all traffic to it", at, {"downtime_s": 0.0})
        self._endpoint(out, at)

    def _router_gap(self, out: list[Any], added: Any, removed: Any) -> None:
        """An operator's beside switch in the wrong order: the router's log says it removed the old
        server's worker, then (seconds later) added the new one, with no other worker in its list. From
        the removal to the add the router had no worker: that gap is the downtime, measured by the
        router's own stamps; the switch is done at the add (all traffic on the new server)."""
        at = added.at_s
        self._moved_at = at
        old_unit, new_unit = self.units()
        gap_s = max(0.0, at - removed.at_s)
        self._write(out, "switch_traffic", state="done", started_at_s=removed.at_s, ended_at_s=at,
                    detail=f"the router removed {removed.url} {clock(removed.at_s)} before it added {added.url} "
                           f"{clock(at)} ({OUTSIDE}): no worker in the router for {gap_s:.0f}s; all traffic on "
                           f"{new_unit}; {old_unit} still running (warm for a rollback)")
        d = DowntimeChanged(self.host, removed.at_s, f"{ROUTER_GAP} {removed.url} {clock(removed.at_s)} ({OUTSIDE})",
                            at, f"the router added {added.url} {clock(at)}")
        if self._downtime_sent != d and self.state.swap.downtime != d:
            self._downtime_sent = d
            out.append(d)
        self._path(out, "beside", "seen on the host: a new server started beside the old one (other GPUs or "
                   "port), then the router removed the old worker before it added the new one", at,
                   {"downtime_s": gap_s})
        self._endpoint(out, at)

    def _beside_clock(self, out: list[Any], at: float, source: str) -> None:
        """The beside path's downtime seen on the host: an instant (none), as for the console's own."""
        d = DowntimeChanged(self.host, at, source, at, BESIDE_NONE)
        if self._downtime_sent == d or self.state.swap.downtime == d:
            return
        self._downtime_sent = d
        out.append(d)

    def _endpoint(self, out: list[Any], at: float) -> None:
        _, new_unit = self.units()
        if self._beside_port is not None and self._old_port is not None and self._beside_port != self._old_port:
            out.append(PathEvent(self.host, "endpoint", json.dumps(
                {"from_port": self._old_port, "to_port": self._beside_port, "unit": new_unit, "observed": True}), at))

    def _stopped(self, out: list[Any], at: float, how: str | None = None) -> None:
        """The old service stopped at `at` (the earliest fact of it wins: the stop command's issue,
        systemd's "Stopping" line, the GPUs' memory falling, the reading that saw it inactive)."""
        if self.stopped_at is not None:
            if at >= self.stopped_at:
                return
            d = self.state.swap.downtime
            self.stopped_at = at
            if d is not None and d.ended_at_s is None and d == self._downtime_sent:  # ours, still open: dated back
                how = how or f"the stop seen {clock(at)}"
                self._downtime(out, downtime_from(self.host, self.state.log_lines, at, how))
            if self._step("stop_old").observed and self._step("stop_old").started_at_s is not None:
                self._write(out, "stop_old", started_at_s=at)
            self.memory.update(out, self.state.swap, at)  # "before" and "stopped" dated again with it
            return
        self.stopped_at = at
        self.memory.update(out, self.state.swap, at)  # a drained reading may have come before the stop's reply
        self.wake("gpu")
        self._began(out, "restart", at)
        if self._touchable("preflight") and self._step("preflight").state == "pending":
            stopped_by = self._credited(SwapStep("stop_old", "", detail=f"({OUTSIDE})"))
            self._write(out, "preflight", state="skipped", ended_at_s=at,
                        detail=f"not run: the old service was stopped {OUTSIDE}" if stopped_by.who is None else
                        f"not known: the old service was stopped by {stopped_by.who}'s console, which ended "
                        "(a gate runs no command: its audit log cannot say)")
        self._write(out, "stop_old", state="running", started_at_s=at, ended_at_s=None,
                    detail=f"stopped {clock(at)} ({OUTSIDE}); draining GPU memory")
        if self._drained_seen_at is not None and self._drained_seen_at >= at:  # seen before the stop was
            self._drained(out, self._drained_seen_at, *self._drained_mib)
        d = self.state.swap.downtime
        if d is None or d.ended_at_s is not None:
            self._downtime(out, downtime_from(self.host, self.state.log_lines, at, how or f"the stop seen {clock(at)}"))

    def _downtime(self, out: list[Any], d: DowntimeChanged) -> None:
        if self._downtime_sent == d or self.state.swap.downtime == d:
            return
        moved = self.state.swap.steps.get("switch_traffic")
        if moved is not None and moved.state in ("running", "done"):
            return  # the beside path: traffic moved before the old server stopped, so no downtime (issue 24)
        self._downtime_sent = d
        out.append(d)

    def _gpu(self, out: list[Any], status: Any, at: float) -> None:
        gpus = [g for g in status.gpus if g.lost_at_s is None]
        if not gpus:
            return
        sampled = status.sampled_at_s or at
        self.memory.see(out, self.state.swap, status, sampled, self.stopped_at)
        total = sum(g.memory_used_mib or 0 for g in gpus)
        if self._last_gpu_mib is not None and self._old_active and self.stopped_at is None \
                and total < self._last_gpu_mib * 0.97 and self._gpu_drop_at is None:
            self._gpu_drop_at = sampled
            self.wake("service")  # memory is going: is the old unit still running?
        if self._last_gpu_mib is not None and self._old_active and self.stopped_at is None \
                and self._beside_at is None and total > self._last_gpu_mib + DRAINED_MIB:
            self.wake("service")  # memory is filling while the old one serves: a server starting beside it?
        self._last_gpu_mib = total
        drained = all((g.memory_used_mib or 0) <= DRAINED_MIB for g in gpus)
        if drained and self._gpu_drop_at is not None and self._drained_seen_at is None:
            self._drained_seen_at, self._drained_mib = sampled, (total, len(gpus))
        if self.stopped_at is not None and self.drained_at is None and sampled >= self.stopped_at and drained:
            self._drained(out, sampled, total, len(gpus))

    def _drained(self, out: list[Any], at: float, total: int, count: int) -> None:
        self.drained_at = at
        self._console_time(out, "stop_old")
        self._write(out, "stop_old", state="done", ended_at_s=at,
                    detail=f"stopped {clock(self.stopped_at)} ({OUTSIDE}); GPU memory drained "
                           f"{clock(at)} ({total:,} MiB in use on {count} GPUs)")

    def _new_started(self, out: list[Any], at: float) -> None:
        if self.started_at is not None:
            return
        launch = self._launch_at()
        self.started_at = launch if launch is not None and self.stopped_at is not None \
            and launch >= self.stopped_at - 1 and launch <= at else at
        if self.drained_at is None and self._step("stop_old").observed:
            self._write(out, "stop_old", state="done", ended_at_s=self.started_at,
                        detail=f"stopped {clock(self.stopped_at)} ({OUTSIDE}); the new unit started "
                               f"{clock(self.started_at)} before the drain was seen")
        _, new_unit = self.units()
        self._write(out, "start_new", state="running", started_at_s=self.started_at, ended_at_s=None,
                    detail=f"{new_unit} started {clock(self.started_at)} ({OUTSIDE}); booting")
        self.wake("server")

    def _launch_at(self) -> float | None:
        summary = self.state.data("log")
        for b in reversed(summary.boot if summary is not None else ()):
            if b.phase == "launch":
                return boot_time(b)
        return None

    def _log(self, summary: Any) -> None:
        # A new boot or its ready line in the log: the units' state is read now, not at its next
        # 15 s poll (the diff pane said "inactive" while the log beside it showed the server serving).
        boot = summary.boot
        seen = (boot[0].at, boot[0].phase, any(b.phase == "ready" for b in boot)) if boot else None
        if seen != self._boot_seen:
            if seen is not None:
                self.wake("service")
            self._boot_seen = seen
        # The ready line in the log: read the server now rather than at its next 5 s poll.
        if self.started_at is not None and self.ready_at is None and summary.boot \
                and summary.boot[-1].phase == "ready":
            self.wake("server")

    def _server(self, out: list[Any], s: Any, at: float) -> None:
        old_unit, new_unit = self.units()
        if self._rollback_at is not None and at > self._rollback_at and s.status == "ready" \
                and (s.unit is None or s.unit == old_unit):
            self._ended(out, at, f"{old_unit} ready again (rollback)")
            self._rolled_back(out, at, old_unit)
            return
        # A unit's state is read with the server (systemctl show); a container's is the service
        # reading's (docker inspect): the server source follows no unit then.
        if s.unit is None:
            if new_unit is None or self._new_active is not True or self.stopped_at is None:
                return
        elif new_unit is None or s.unit != new_unit or s.unit_state not in ACTIVE:
            return
        if self.stopped_at is None:
            return  # the old server still serves on the port: nothing of the swap yet
        self._new_started(out, at)
        if self.ready_at is not None or s.status != "ready" or s.unit_state not in ("active", None):
            return
        # The log's ready line dates it better than this reading (taken up to a poll later).
        if self._log_ready_at is not None and (self.started_at or 0) - 1 <= self._log_ready_at <= at:
            at = self._log_ready_at
        self.ready_at = at
        started = self.started_at or at
        self._write(out, "start_new", state="done", ended_at_s=at,
                    detail=f"{new_unit} started {clock(started)} ({OUTSIDE}); ready {clock(at)}, "
                           f"{at - started:.0f}s after the start: {s.reason}")
        self._ended(out, at, f"{new_unit} ready")

    def _rolled_back(self, out: list[Any], at: float, old_unit: str | None) -> None:
        """The old service serves again after a rollback: the plan's steps after the start that
        never ran (the benchmark of the new model) are skipped, with why, never left pending."""
        keys = [k for k, _ in PLAN_STEPS]
        # the plan's steps after the start, and beside's traffic move (its server never served)
        for key in (*keys[keys.index("start_new") + 1:], "switch_traffic"):
            if key not in self.state.swap.steps:
                continue
            if self._step(key).state == "pending" and self._touchable(key):
                self._write(out, key, state="skipped", ended_at_s=at,
                            detail=f"not run: the swap was rolled back ({old_unit or 'the old service'} serves again)")

    def _ended(self, out: list[Any], at: float, source: str) -> None:
        """The service serves again: the open downtime ends at `at` (the first fact of it)."""
        d = self.state.swap.downtime
        if self._downtime_sent is not None and self._downtime_sent.started_at_s == (d.started_at_s if d else None):
            d = self._downtime_sent  # ours, maybe not applied yet
        if d is None or d.started_at_s is None or d.start_source.startswith(("in place", "beside")):
            return
        if d.ended_at_s is not None and d.ended_at_s <= at:
            return
        if at < d.started_at_s:
            return
        self._downtime(out, replace(d, ended_at_s=at, end_source=source))

    def _download(self, out: list[Any], d: Any, at: float) -> None:
        step = self._step("download")
        if d.complete is True and not d.partial_files:
            if step.state != "done":
                self._write(out, "download", state="done", started_at_s=step.started_at_s or at, ended_at_s=at,
                            detail=f"complete: {d.shards_done}/{d.shards_total} shards, sizes match "
                                   f"(seen {clock(at)}, {OUTSIDE})")
        elif d.partial_files and (step.state == "pending" or step.observed):
            # Files arriving that the console did not ask for: another terminal's `hf download`.
            if step.observed and step.state == "running" and step.detail.startswith(f"{d.shards_done}/"):
                return  # one event per finished shard, not per poll
            self._write(out, "download", state="running", started_at_s=step.started_at_s or at, ended_at_s=None,
                        detail=f"{d.shards_done}/{d.shards_total if d.shards_total is not None else '?'} shards, "
                               f"files arriving ({OUTSIDE})")

    def _verify(self, out: list[Any], v: Any) -> None:
        at = getattr(v, "at_s", None) or self.state.now()
        if v.error:
            self._write(out, "verify", state="failed", ended_at_s=at, detail=f"verification failed: {v.error}")
        elif not v.finished:
            step = self._step("verify")
            if not (step.observed and step.state == "running"):
                self._write(out, "verify", state="running", started_at_s=at, ended_at_s=None,
                            detail=f"sha256 running: {v.done_files}/{v.total_files} files (started outside the plan)")
        elif v.mismatched:
            self._write(out, "verify", state="failed", ended_at_s=at,
                        detail=f"{len(v.mismatched)} file(s) differ from the listing's sha256: "
                               f"{', '.join(v.mismatched[:3])}")
        else:
            step = self._step("verify")
            self._write(out, "verify", state="done", started_at_s=step.started_at_s or at, ended_at_s=at,
                        detail=f"{v.matched}/{v.total_files} files match their sha256 (verified outside the plan)")

    def _bench(self, out: list[Any], record: dict[str, Any]) -> None:
        if self.ready_at is None and self._step("start_new").state != "done":
            return  # a run of the old model: the comparison's "before"
        ready = self.ready_at or self._step("start_new").ended_at_s or 0.0
        stamp = float(record.get("timestamp") or 0) or self.state.now()
        if stamp < ready:
            return
        tput = record.get("output_throughput")
        step = self._step("benchmark")
        runs = 1 + (int(step.detail.split(" ", 1)[0]) if step.observed and step.detail[:1].isdigit() else 0)
        self._write(out, "benchmark", state="done", started_at_s=step.started_at_s or stamp, ended_at_s=stamp,
                    detail=f"{runs} run(s) of the new model outside the plan; last: "
                           + (f"{tput:.0f} output tok/s" if isinstance(tput, (int, float)) else "no throughput"))


# -- GPU memory before, after the stop, after, and what was freed -----------------------------------
AFTER_SETTLE_S = 60.0  # "after" follows the GPU readings this long after the swap was over, while they change
GPU_SEEN = 240  # the GPU readings kept to find "before" once the swap's start is known (2 min at 0.5 s)


def used_mib(status: Any) -> int:
    return sum(g.memory_used_mib or 0 for g in getattr(status, "gpus", ()) or () if g.lost_at_s is None)


def before_the_drain(samples: list[Any]) -> Any:
    """The GPUs as they were before the stop: the last sample before its start, stepped back over
    samples already falling (a stop seen late, by a poll, begins after the drain it caused)."""
    i = len(samples) - 1
    while i > 0 and used_mib(samples[i - 1]) > used_mib(samples[i]) + DRAINED_MIB:
        i -= 1
    return samples[i]


def gpu_rows(status: Any) -> list[dict[str, Any]]:
    """One GPU reading as the swap's memory fact keeps it (plain data: it goes into the recording)."""
    return [{"gpu": g.index, "used_mib": g.memory_used_mib, "total_mib": g.memory_total_mib,
             "processes": [f"{p.pid} {p.name or ''}".strip() for p in g.processes or ()]}
            for g in status.gpus if g.lost_at_s is None]


def swap_ended(swap: Any) -> tuple[float, str] | None:
    """(when, what) the swap was over, by the facts already in the swap state: the rollback's end,
    beside the old server's stop after the traffic moved, else the service serving again (the
    downtime's end: the new server's ready, the update's end)."""
    rollback = swap.steps.get("rollback")
    if rollback is not None and rollback.state in ("done", "failed") and rollback.ended_at_s is not None:
        return rollback.ended_at_s, "after the rollback"
    moved = swap.steps.get("switch_traffic")
    if swap.path() == "beside":
        d = swap.downtime
        if moved is not None and moved.state == "done" and moved.ended_at_s is not None \
                and d is not None and d.start_source.startswith(BESIDE_MOVED):
            return moved.ended_at_s, "after the router moved all traffic to the new server"
        if moved is not None and moved.state == "done" and moved.ended_at_s is not None:
            return moved.ended_at_s, "after the old server stopped (traffic on the new one)"
        return None
    d = swap.downtime
    if d is not None and d.ended_at_s is not None and d.started_at_s is not None:
        return d.ended_at_s, ("after the update (the new weights serving)" if d.start_source.startswith("in place")
                              else "after the new server was ready")
    for key, what in (("in_place", "after the update (the new weights serving)"),
                      ("start_new", "after the new server was ready")):
        step = swap.steps.get(key)
        if step is not None and step.state == "done" and step.ended_at_s is not None:
            return step.ended_at_s, what
    return None


class MemoryFacts:
    """The swap's GPU memory, from the GPU readings alone, for the console's own swap and an
    operator's alike: "before" (the reading before the host began to change, as dated by the host's
    facts, stepped back over a drain already under way), "stopped" (the first drained reading after
    the old server's stop), "after" (the reading once the swap was over, followed for a minute while
    it changes: the processes column is read less often than the memory) and "freed" (before
    minus stopped, or minus after where nothing was stopped), per GPU. Written into the swap state
    as one PathEvent of kind "memory" (the report and the stop step's text read it there)."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.seen: deque[tuple[float, Any]] = deque(maxlen=GPU_SEEN)
        self.before_since: float | None = None  # the swap's start "before" was chosen by
        self.fact: dict[str, Any] = {}

    def see(self, out: list[Any], swap: Any, status: Any, sampled: float, stopped_at: float | None) -> None:
        self.seen.append((sampled, status))
        self.update(out, swap, stopped_at)

    def update(self, out: list[Any], swap: Any, stopped_at: float | None) -> None:
        """The facts from the readings seen so far: on every reading, and when the stop is known
        or dated again (a drained reading can come before the stop's own reply: `docker stop` and
        `systemctl stop` return once the server has gone)."""
        fact = dict(self.fact)
        began = swap.began_at_s()
        if stopped_at is not None:
            began = stopped_at if began is None else min(began, stopped_at)
        if began is not None and (fact.get("before") is None or (
                self.before_since is not None and began < self.before_since)):
            earlier = [s for at, s in self.seen if at < began]
            if earlier:
                before = before_the_drain(earlier)
                fact["before"] = {"at": before.sampled_at_s or began, "gpus": gpu_rows(before)}
                self.before_since = began
        if stopped_at is not None and fact.get("stopped") is None:
            drained = next(((at, s) for at, s in self.seen if at >= stopped_at and _drained(s)), None)
            if drained is not None:
                fact["stopped"] = {"at": drained[0], "gpus": gpu_rows(drained[1])}
        ended = swap_ended(swap) if began is not None else None
        if ended is not None:
            since = [(at, s) for at, s in self.seen if at >= ended[0]]
            # the first reading once the swap was over, followed while it still changes (the
            # processes column is read less often than the memory) for AFTER_SETTLE_S
            settled = [(at, s) for at, s in since if at - ended[0] <= AFTER_SETTLE_S] or since[:1]
            if not settled and self.seen and (fact.get("after") or {}).get("since") != ended[0]:
                # over before a reading came after it (the rollback's ready is known between two GPU
                # readings): the latest reading, at its own time, until one comes after the end
                settled = [self.seen[-1]]
            after = fact.get("after") or {}
            if settled and (after.get("since") != ended[0] or after.get("gpus") != gpu_rows(settled[-1][1])):
                at, status = settled[-1] if after.get("since") == ended[0] else settled[0]
                fact["after"] = {"at": at, "gpus": gpu_rows(status), "since": ended[0], "what": ended[1]}
        if fact.get("before") is not None:
            then = fact.get("stopped") or fact.get("after")
            if then is not None:
                fact["freed"] = freed_rows(fact["before"]["gpus"], then["gpus"])
                fact["freed_by"] = "the stop" if fact.get("stopped") is not None else "the swap"
        if fact != self.fact:
            self.fact = fact
            out.append(PathEvent(self.host, MEMORY, json.dumps(fact), max((at for at, _ in self.seen), default=0.0)))


def _drained(status: Any) -> bool:
    gpus = [g for g in status.gpus if g.lost_at_s is None]
    return bool(gpus) and all((g.memory_used_mib or 0) <= DRAINED_MIB for g in gpus)


def observe(state: Any, *, wake: Callable[[str], None] | None = None,
            move_server: Callable[[int], None] | None = None) -> SwapObserver:
    """A host's observer without a swap controller (the fleet's hosts): its derived events are
    applied after the event that implied them, as the controller does; a beside swap seen on the
    host points the server poll at the new server's port (`move_server`, the session's)."""

    observer = SwapObserver(state, wake=wake)

    def on_event(event: object) -> None:
        derived = observer.see(event)
        if not derived:
            return

        def apply() -> None:
            for e in derived:
                if observer.still_valid(e):
                    state.apply(e)
                    if move_server is not None and isinstance(e, PathEvent) and e.kind == "endpoint":
                        port = e.data().get("to_port")
                        if isinstance(port, int):
                            move_server(port)

        try:
            asyncio.get_running_loop().call_soon(apply)
        except RuntimeError:
            apply()

    state.subscribe(on_event)
    return observer


__all__ = ["SwapObserver", "MemoryFacts", "observe", "path_summary", "freed_between", "before_the_drain", "gpu_rows",
           "verification", "last_served_at", "downtime_from", "log_time", "boot_time", "OUTSIDE", "READ_BACK"]
