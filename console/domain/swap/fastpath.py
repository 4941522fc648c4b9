"""The faster swap paths' plan (issue 24): the PathPlan the `paths` step chose and what it read of the
host (console/domain/swap/path_choice.py), and each path step's exact commands built from it. The
controller keeps the rules (read-only, one action at a time, confirmation, audit, a failed step stops
the plan); the steps' runs are console/domain/swap/path_steps.py's; which of the plan's steps a path
takes is the path x runtime table's (console/core/derive/swap_plan.py, applied by steps.py):

    prewarm         the shards into the page cache while the old model serves (console/domain/swap/prewarm.py)
    in_place        POST /update_weights_from_disk on the running server; the pause measured from
                    its log lines and its reply (num_paused_requests)
    beside          start the new unit on the free GPUs and another port; follow it to ready
    switch_traffic  router: add the new worker, remove the old, drain it, stop the old unit;
                    without a router the step says what the operator must switch
    rollback        in place: the previous unit file restarted; beside while the old serves: stop the new

Every host command is built here with quoted values and `timeout -k`, shown before it runs,
and audited by the controller's `_run`.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import replace
from typing import Any

from console.core.derive.downtime import PathEvent
from console.core.derive.swap_view import GateCheck
from console.domain.analysis import host_replies
from console.domain.analysis import unit_environment as ue
from console.domain.analysis.bench_view import is_result
from console.domain.swap import actions as act
from console.domain.swap import container_fastpath as cfp
from console.domain.swap import paths as P
from console.domain.swap import prediction as pred
from console.domain.swap import prewarm as pw
from console.domain.swap.executor_api import Executor
from console.domain.swap.port_free import port_check

KEYS = ("paths", "prewarm", "in_place", "beside", "switch_traffic")
# The steps that change the host: under the two-person rule (--require-approval) each waits for
# another person's approval, exactly like the stop (`paths` only reads).
APPROVAL_KEYS = ("prewarm", "in_place", "beside", "switch_traffic")
PORT_RE = re.compile(r"(--port[ =])(\d+)")


def curl_json(url: str, body: dict[str, Any] | None, timeout_s: int) -> str:
    """POST (or GET without a body) through curl on the host: the answer, then its HTTP code."""
    argv = ["curl", "-sS", "--max-time", str(timeout_s), "-w", "\\n%{http_code}"]
    if body is not None:
        argv += ["-X", "POST", "-H", "Content-Type: application/json", "--data-binary", json.dumps(body)]
    argv += ["--", url]
    return act.bounded(argv, timeout_s + 5)


clean = host_replies.clean_reply  # the host's answers cleaned at the source (issue 34, item 15)
split_reply = host_replies.split_reply


def beside_unit_text(text: str, gpus: tuple[int, ...], port: int) -> str:
    """The drafted unit for the beside path: its CUDA_VISIBLE_DEVICES set (every earlier assignment,
    whatever its form, removed; the new one last in [Service]: console/domain/analysis/unit_environment.py)
    and its port replaced, nothing else changed. A unit pinned to MIG instances is refused."""

    mig = ue.mig_problem(text)
    if mig:
        raise act.ActionError(mig)
    try:
        text = ue.set_visible_devices(text, ",".join(str(g) for g in gpus))
    except ValueError as exc:
        raise act.ActionError(f"the beside GPUs cannot be set in the drafted unit: {exc}") from None
    if not PORT_RE.search(text):
        raise act.ActionError("the drafted unit has no --port: the beside server needs its own")
    return PORT_RE.sub(lambda m: f"{m.group(1)}{port}", text)


class FastPaths:
    def __init__(self, ctl: Executor) -> None:
        self.ctl = ctl
        self.plan: P.PathPlan | None = None
        self.restart: pred.RestartPrediction | None = None
        self.residency: pred.Residency | None = None
        self.shards: list[tuple[str, int]] = []
        self.want: str | None = getattr(ctl.profile, "swap_path", None) or None
        self.router_url: str | None = getattr(ctl.profile, "router_url", None) or None
        self.recordings_dir: Any = None  # None: the default recordings dir (console.core.recording)
        self.prewarm_rate_mbps = pw.DEFAULT_RATE_MBPS
        self.prewarm_margin_gib = pw.DEFAULT_MARGIN_GIB
        self.old_model_path: str | None = None
        self.old_port = int(getattr(ctl.profile, "server_port", 30000))
        self.old_unit_pids: list[int] = []
        self.plan_error: str | None = None  # why the preflight could not plan (shown in the gate)
        self.planned_by: str | None = None  # "paths" (the step) or "preflight" (on its own)
        self.drafted_for: str | None = None  # the path the installed unit was drafted for (None: no plan yet)
        self.plan_skipped: set[str] = set()  # the plan steps the chosen path skipped (console/core/derive/swap_plan.py)
        self.env_checked = False  # the beside unit's environment was read on the host when planning
        self.unit_dirs: tuple[str, ...] | None = None  # None: systemd's (console/domain/analysis/unit_environment.py)

    # -- the controller's hooks ----------------------------------------------------------------
    @property
    def chosen(self) -> str | None:
        return self.plan.chosen if self.plan is not None else None

    def _beside_old_serving(self) -> bool:
        switch = self.ctl.state.swap.steps.get("switch_traffic")
        return self.chosen == "beside" and (switch is None or switch.state != "done")

    def rollback_actions(self) -> list[act.Action] | None:
        """The faster paths' rollback (None: the controller's own, stop the new and start the old)."""
        actions = self._rollback_actions()
        if actions is not None and getattr(self.ctl.profile, "require_approval", False):
            actions = [replace(a, needs_approval=True) for a in actions]
        return actions

    def _rollback_actions(self) -> list[act.Action] | None:
        if self.chosen == "in-place":
            unit = act.check_unit(self.ctl.old_unit)
            backup = self._backup()
            final = backup.rsplit(".bak-", 1)[0]
            restore = "\n".join([f"cp -p -- {shlex.quote(backup)} {shlex.quote(final)} || exit 1",
                                  act.bounded(["systemctl", "daemon-reload"], 60)])
            return [act.Action("rollback", f"Roll back {unit}: its previous unit file, restarted", (
                act.RemoteCommand(restore, 75, f"restore {final} from {backup}"),
                act.RemoteCommand(act.bounded(["systemctl", "restart", "--", unit], 120), 130, f"restart {unit}")),
                waits_for=f"{unit} ready again with the old weights")]
        if self._beside_old_serving():
            unit = act.check_unit(self.ctl.new_unit)
            return [act.Action("rollback", f"Roll back: stop {unit} (the old server never stopped)", (
                act.RemoteCommand(act.bounded(["systemctl", "stop", "--", unit], 120), 130, f"stop {unit}"),),
                waits_for="the new server's GPUs released; the old one serves on")]
        return None

    def _backup(self) -> str:
        """The previous unit file the install kept: that it kept one is the step's words (its command's
        output); where, exactly, is its command (the words name the file as the host names it)."""
        install = self.ctl.state.swap.steps.get("install")
        m = re.search(r"kept (/\S+)\.bak-([0-9TZ-]+)", install.detail if install is not None else "")
        if not m:
            raise act.ActionError("the previous unit file is not known (the install step kept no backup)")
        stamp = re.escape(m.group(2))
        for line in install.commands:  # type: ignore[union-attr]
            exact = re.search(rf"echo '?kept (/[^\s']+\.bak-{stamp})'?", line)
            if exact:
                return act.check_path(exact.group(1), "backup")
        path, root = f"{m.group(1)}.bak-{m.group(2)}", (getattr(self.ctl.profile, "host_root", None) or "").rstrip("/")
        return act.check_path(root + path if root and not path.startswith(root + "/") else path, "backup")

    def build(self, key: str) -> list[act.Action]:
        actions = self._build(key)
        if key in APPROVAL_KEYS and getattr(self.ctl.profile, "require_approval", False):
            # An action with no command (the operator switches the traffic) changes nothing from here.
            actions = [replace(a, needs_approval=bool(a.commands)) for a in actions]
        return actions

    def _build(self, key: str) -> list[act.Action]:
        p = self.ctl.profile
        if key == "prewarm":
            if not self.shards:
                raise act.ActionError("the shards are not known yet: choose the path first (it lists them)")
            return [pw.prewarm(p.model_dir or "", [n for n, _ in self.shards], sum(s for _, s in self.shards),
                               rate_mbps=self.prewarm_rate_mbps, margin_gib=self.prewarm_margin_gib)]
        if key == "in_place":
            self._need("in-place")
            model = cfp.served_model_path(self.ctl, act.check_path(p.model_dir, "model directory"))  # issue 26
            url = f"http://127.0.0.1:{self.old_port}/update_weights_from_disk"
            return [act.Action("in_place", "Update the weights in place", (
                act.RemoteCommand(curl_json(url, {"model_path": model, "weight_version": _version(model)}, 1800),
                                  1810, "POST /update_weights_from_disk"),),
                waits_for="the reply (success, message, num_paused_requests); the old weights serve if it fails")]
        if key == "beside":
            opt = self._need("beside")
            if cfp.active(self.ctl):  # issue 26 hook: `docker start` of the new container
                return [cfp.beside_action(self.ctl, opt)]
            unit = act.check_unit(self.ctl.new_unit)
            return [act.Action("beside", f"Start {unit} beside the old server", (
                act.RemoteCommand(port_check(int(opt.port or 0)), 15, f"port {opt.port} free on the host"),
                act.RemoteCommand(act.bounded(["systemctl", "start", "--", unit], 90), 100, f"start {unit}"),),
                waits_for=f"ready on port {opt.port} (GPUs {opt.cuda_visible_devices}), the old server serving")]
        if key == "switch_traffic":
            opt = self._need("beside")
            old = self.ctl.old_unit if cfp.active(self.ctl) else act.check_unit(self.ctl.old_unit)
            stop = cfp.stop_old_command(self.ctl) or act.RemoteCommand(  # issue 26 hook: `docker stop`
                act.bounded(["systemctl", "stop", "--", old], 120), 130, f"stop {old}")
            if not self.router_url:
                return [act.Action("switch_traffic", "Switch traffic (by the operator)", (),
                                   waits_for=f"no router in the profile: switch your clients from port "
                                             f"{self.old_port} to {opt.port}, then stop {old}")]
            new_url, old_url = f"http://127.0.0.1:{opt.port}", f"http://127.0.0.1:{self.old_port}"
            r = self.router_url.rstrip("/")
            return [act.Action("switch_traffic", "Move traffic through the router, stop the old server", (
                act.RemoteCommand(curl_json(f"{r}/add_worker?url={new_url}", {}, 60), 70, "add the new worker"),
                act.RemoteCommand(curl_json(f"{r}/remove_worker?url={old_url}", {}, 30), 40, "remove the old worker"),
                stop), waits_for="the old server drained (no running request) before it stops")]
        raise act.ActionError(f"no such action: {key}")

    def draft_text(self, text: str) -> str:
        self.drafted_for = self.chosen
        if self.chosen == "beside":
            opt = self.plan.chosen_option  # type: ignore[union-attr]
            return beside_unit_text(text, opt.gpus, int(opt.port or 0))
        return text

    def gate_checks(self) -> tuple[GateCheck, ...]:
        if self.plan is None:
            if self.plan_error is None:
                return ()
            return (GateCheck("swap path", None, f"not planned: {self.plan_error}", required=False),)
        lines = self.plan.lines()
        if self.plan_error is not None:  # the profile's path is not possible: the gate says so and blocks
            return (GateCheck("swap path", False, f"{self.plan_error} | " + " | ".join(lines)),)
        return (GateCheck("swap path", True, " | ".join(lines)),)

    def _need(self, path: str) -> P.PathOption:
        if self.plan is None:
            raise act.ActionError("choose the path first (the paths action)")
        opt = self.plan.option(path)
        if not opt.possible:
            raise act.ActionError(f"{path} is not possible: {opt.reason}")
        if self.plan.chosen != path:
            raise act.ActionError(f"the plan chose {self.plan.chosen}, not {path}")
        return opt

    def _emit(self, kind: str, data: dict[str, Any]) -> None:
        self.ctl.state.apply(PathEvent(self.ctl.host, kind, json.dumps(data, default=str), self.ctl._clock()))

    # -- beside -------------------------------------------------------------------------------------
    def bench_port(self) -> int | None:
        """Beside, before the traffic moves: the benchmark asks the new server on its own port."""
        switch = self.ctl.state.swap.steps.get("switch_traffic")
        if self.chosen == "beside" and (switch is None or switch.state != "done"):
            return int(self.plan.chosen_option.port or 0) or None  # type: ignore[union-attr]
        return None

    def bench_plan(self) -> list[tuple[int, int, int, int]] | None:
        """Beside: the before-benchmark's own workload (the old model's last result here), so the
        report compares like with like; None: the controller's plan."""
        if self.chosen != "beside":
            return None

        for run in reversed(self.ctl.state.bench.history):
            values = [run.get(k) for k in ("max_concurrency", "num_prompts", "random_input_len",
                                           "random_output_len")]
            if is_result(run) and all(isinstance(v, int) and v > 0 for v in values):
                return [tuple(values)]  # type: ignore[list-item]
        return None


def _version(model_dir: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model_dir.rstrip("/").rsplit("/", 1)[-1])[:64] or "new"


__all__ = ["KEYS", "FastPaths", "beside_unit_text", "curl_json", "split_reply"]
