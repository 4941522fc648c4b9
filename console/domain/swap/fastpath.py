"""The faster swap paths, run by the swap controller (issue 24). The controller keeps the rules
(read-only, one action at a time, confirmation, audit, a failed step stops the plan); this module
reads the host facts, plans the path, and builds its steps' exact commands (their runs are
console/domain/swap/path_steps.py's, but for `paths`, the planning itself):

    paths           read both config.json, the shards' sizes and page-cache residency (fincore),
                    this host's recorded boots, the GPU reading → the PathPlan and the prediction
    prewarm         the shards into the page cache while the old model serves (console/domain/swap/prewarm.py)
    in_place        POST /update_weights_from_disk on the running server; the pause measured from
                    its log lines and its reply (num_paused_requests)
    beside          start the new unit on the free GPUs and another port; follow it to ready
    switch_traffic  router: add the new worker, remove the old, drain it, stop the old unit;
                    without a router the step says what the operator must switch

Every host command is built here with quoted values and `timeout -k`, shown before it runs,
and audited by the controller's `_run`.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
from dataclasses import replace
from typing import Any

from console.core.derive import swap_plan as swap_plan
from console.core.derive.downtime import PathEvent
from console.core.derive.swap_view import GateChanged, GateCheck
from console.core.recording import default_dir
from console.domain.analysis import host_replies
from console.domain.analysis import unit_environment as ue
from console.domain.analysis.bench_view import is_result
from console.domain.analysis.fit import inputs_from_command
from console.domain.swap import actions as act
from console.domain.swap import container_fastpath as cfp
from console.domain.swap import paths as P
from console.domain.swap import prediction as pred
from console.domain.swap import prewarm as pw
from console.domain.swap.errors import StepFailed
from console.domain.swap.executor_api import Executor
from console.host.parsers import ParseError
from console.host.parsers.proc_net import conflicts, parse_listeners
from console.host.parsers.sglang_argv import NotSglang, normalize
from console.host.parsers.systemd import parse_unit, unit_is_failing
from console.host.transport.errors import TransportError

KEYS = ("paths", "prewarm", "in_place", "beside", "switch_traffic")
# The steps that change the host: under the two-person rule (--require-approval) each waits for
# another person's approval, exactly like the stop (`paths` only reads).
APPROVAL_KEYS = ("prewarm", "in_place", "beside", "switch_traffic")
# The steps before which the plan is made from the host's read-only facts when nobody ran `paths`:
# the gate shows the path and its predicted downtime before anything changed (not at install: the
# download may still be running, and a partial shard list predicts nothing).
PLAN_BEFORE = ("preflight", "stop_old")
PORT_RE = re.compile(r"(--port[ =])(\d+)")
UPDATE_BEGIN = "Update engine weights online from disk begin"
UPDATE_END = "Update weights end."


def curl_json(url: str, body: dict[str, Any] | None, timeout_s: int) -> str:
    """POST (or GET without a body) through curl on the host: the answer, then its HTTP code."""
    argv = ["curl", "-sS", "--max-time", str(timeout_s), "-w", "\\n%{http_code}"]
    if body is not None:
        argv += ["-X", "POST", "-H", "Content-Type: application/json", "--data-binary", json.dumps(body)]
    argv += ["--", url]
    return act.bounded(argv, timeout_s + 5)


clean = host_replies.clean_reply  # the host's answers cleaned at the source (issue 34, item 15)
split_reply = host_replies.split_reply


def port_check(port: int) -> str:
    """Every TCP listener on the host, on every address, as the kernel lists them (/proc/net/tcp and
    tcp6: a listener on 127.0.0.2 or [::1] only is seen too, which a connect to 127.0.0.1 missed:
    issue 34, item 10), bounded by `timeout -k` like every remote command; `port` is judged by
    port_verdict."""
    # Only the header and the rows naming the port (a busy host lists thousands of connections).
    return act.bounded(["grep", "-h", "-i", "-e", "local_address", "-e", f":{int(port):04X} ", "--",
                        "/proc/net/tcp", "/proc/net/tcp6"], 8) + '; echo "listeners_exit=$?"'


def port_verdict(port: int, text: str, bind: str = "127.0.0.1") -> str | None:
    """None when nothing listens where a server binding `bind`:`port` would (a wildcard on either
    side takes every address); else why the beside server cannot have it (one line)."""

    if re.search(r"listeners_exit=(124|137)\b", text):
        return f"port {port} could not be checked on the host (the check timed out)"
    try:
        listeners = parse_listeners(text)
    except ParseError:
        return f"port {port} could not be checked on the host (no listener table in the answer)"
    taken = sorted({ln.address for ln in listeners if conflicts(ln, bind, port)})
    if not taken:
        return None
    where = ", ".join(f"[{a}]:{port}" if ":" in a else f"{a}:{port}" for a in taken[:4])
    return f"port {port} is taken on the host (something listens on {where}; the server binds {clean(bind, 80)})"


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

    def runtime(self) -> str:
        containers = getattr(self.ctl, "containers", None)
        if containers is None or not containers.active:
            return "systemd"
        return "compose" if getattr(self.ctl.profile, "compose", None) else "container"

    def mark_skips(self) -> None:
        """The plan's steps the chosen path does not take, skipped with the table's reason
        (console/core/derive/swap_plan.py); a step an earlier plan skipped that this path runs is pending again."""
        ctl = self.ctl
        verify_sha = bool(getattr(ctl.profile, "verify_sha", False))
        skips = dict(swap_plan.skips(self.chosen, self.runtime(), verify_sha=verify_sha))
        steps = ctl.state.swap.steps
        for key in sorted(self.plan_skipped - set(skips)):
            step = steps.get(key)
            if step is not None and step.state == "skipped" and not step.observed:
                ctl._set(key, state="pending", detail="", who=None)
            self.plan_skipped.discard(key)
        for key, why in skips.items():
            step = steps.get(key)
            if step is None or step.state != "pending" or step.observed:
                continue
            ctl._set(key, state="skipped", detail=why, who=None, commands=())
            self.plan_skipped.add(key)

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
        install = self.ctl.state.swap.steps.get("install")
        m = re.search(r"kept (/\S+\.bak-[0-9TZ-]+)", install.detail if install is not None else "")
        if not m:
            raise act.ActionError("the previous unit file is not known (the install step kept no backup)")
        return act.check_path(m.group(1), "backup")

    def build(self, key: str) -> list[act.Action]:
        actions = self._build(key)
        if key in APPROVAL_KEYS and getattr(self.ctl.profile, "require_approval", False):
            # An action with no command (the operator switches the traffic) changes nothing from here.
            actions = [replace(a, needs_approval=bool(a.commands)) for a in actions]
        return actions

    def _build(self, key: str) -> list[act.Action]:
        p = self.ctl.profile
        if key == "paths":
            return [act.Action("paths", "Choose the path", (), waits_for=(
                "read both config.json, the shards' sizes, fincore, this host's recorded boots"))]
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

    def can_plan(self) -> bool:
        containers = getattr(self.ctl, "containers", None)
        return bool(getattr(self.ctl.profile, "model_dir", None) and self.ctl.old_unit) and not (
            containers is not None and containers.active)

    async def ensure_plan(self) -> None:
        """Plan from the host's read-only facts when nobody ran the `paths` step: the preflight
        (and the stop) then show the path and its predicted downtime before anything ran. Never
        fatal here: what kept it from planning is shown in the gate."""
        if self.plan is not None or not self.can_plan():
            self.mark_skips()
            return
        try:
            await self.plan_paths()
            self.planned_by = "preflight"
        except (act.ActionError, TransportError, OSError, ValueError, asyncio.TimeoutError) as exc:
            self.plan_error = clean(exc)
        except Exception as exc:  # the StepFailed of a path the profile asks for and cannot have

            if not isinstance(exc, StepFailed):
                raise
            self.plan_error = clean(exc)
        self.mark_skips()
        self.ctl.state.apply(_gate(self.ctl))

    def _need(self, path: str) -> P.PathOption:
        if self.plan is None:
            raise act.ActionError("choose the path first (the paths action)")
        opt = self.plan.option(path)
        if not opt.possible:
            raise act.ActionError(f"{path} is not possible: {opt.reason}")
        if self.plan.chosen != path:
            raise act.ActionError(f"the plan chose {self.plan.chosen}, not {path}")
        return opt

    async def beside_environment_problem(self, gpus: tuple[int, ...], port: int) -> str | None:
        """Why the beside unit would not get CUDA_VISIBLE_DEVICES=gpus once systemd applies its drop-ins,
        EnvironmentFile= files and UnsetEnvironment= (read on the host, nothing changed), or None."""

        transport = self.ctl.session.transport
        try:
            drafted = beside_unit_text(self.ctl._draft_text_raw(), gpus, port)
            unit = act.check_unit(self.ctl.new_unit)
        except (act.ActionError, OSError, UnicodeDecodeError) as exc:
            return clean(exc)
        bases = self.unit_dirs or ue.UNIT_DIRS
        listing = act.bounded(["find", "-H", *ue.dropin_dirs(unit, bases), "-maxdepth", "1", "-name", "*.conf",
                               "-print"], 15) + " 2>/dev/null"
        try:
            r = await self.ctl.session.transport.run(listing, timeout=25)
        except TransportError as exc:
            return f"the unit's drop-ins could not be listed ({clean(exc)})"
        if r.exit_status in (124, 137):
            return "the unit's drop-ins could not be listed (timed out)"
        found = ue.effective_dropins([ln for ln in r.text.splitlines() if ln.startswith("/")], unit, bases)
        if len(found) > ue.MAX_DROPINS:
            return f"{len(found)} drop-ins for {unit}: more than the console reads ({ue.MAX_DROPINS})"

        async def read(path: str) -> str | None:
            try:
                raw = await transport.read_file(path, max_bytes=ue.MAX_FILE_BYTES + 1, timeout=10)
            except (TransportError, OSError, asyncio.TimeoutError):
                return None
            return raw.decode("utf-8", "replace") if len(raw) <= ue.MAX_FILE_BYTES else None

        dropins: list[tuple[str, str]] = []
        for path in found:
            text = await read(path)
            if text is None:
                return f"the drop-in {clean(path, 120)} could not be read on the host"
            dropins.append((path, text))
        try:
            files = ue.environment_file_paths(drafted, dropins)
        except ValueError as exc:
            return clean(exc)
        read_files: dict[str, str | None] = {}
        if files:
            exist = act.bounded(["find", *files, "-maxdepth", "0", "-print"], 10) + " 2>/dev/null"
            try:
                present = set((await transport.run(exist, timeout=20)).text.splitlines())
            except TransportError as exc:
                return f"the unit's EnvironmentFile= could not be checked ({clean(exc)})"
            for path in files:
                if path not in present:
                    read_files[path] = None
                elif (text := await read(path)) is not None:
                    read_files[path] = text
        why = ue.visible_devices_problem(drafted, dropins, read_files, ",".join(str(g) for g in gpus))
        return clean(why, 300) if why else None

    def _bind_host(self) -> str:
        """The address the beside server binds: its drafted unit's --host (SGLang's default 127.0.0.1)."""
        try:
            _, new = self._commands()
        except Exception:  # noqa: BLE001 - no draft, no report: SGLang's default, and the check says it
            new = None
        value = new.value("--host") if new is not None else None
        return value if isinstance(value, str) and value else "127.0.0.1"

    # -- the host facts ---------------------------------------------------------------------------
    async def _read_config(self, model_dir: str | None) -> dict[str, Any] | None:
        if not model_dir:
            return None
        try:
            raw = await self.ctl.session.transport.read_file(f"{model_dir.rstrip('/')}/config.json", timeout=15)
            value = json.loads(raw.decode("utf-8", "replace"))
        except (TransportError, OSError, ValueError, asyncio.TimeoutError):
            return None
        return value if isinstance(value, dict) else None

    async def _list_shards(self, model_dir: str) -> list[tuple[str, int]]:
        d = act.check_path(model_dir, "model directory")
        cmd = act.bounded(["find", d, "-maxdepth", "1", "-type", "f", "-name", "*.safetensors", "-printf",
                           "%s %f\\n"], 30)
        r = await self.ctl.session.transport.run(cmd, timeout=40)
        out = []
        for line in r.text.splitlines():
            size, _, name = line.partition(" ")
            if size.isdigit() and name and "/" not in name:
                out.append((name, int(size)))
        return sorted(out)

    async def _residency(self, model_dir: str) -> pred.Residency:
        files = pw.shard_paths(model_dir, [n for n, _ in self.shards])
        total = sum(s for _, s in self.shards)
        try:
            r = await self.ctl.session.transport.run(pw.fincore_command(files), timeout=70)
        except TransportError as exc:
            return pred.Residency(None, total, 0, f"fincore did not answer: {exc}")
        return pred.parse_fincore(r.text, total, r.exit_status or 0)

    async def _cache_probe(self) -> float | None:
        """The page cache's read rate on this host: dd over (up to 1 GiB of) a wholly cached shard."""
        files = self.residency.cached_files if self.residency is not None else ()
        if not files:
            return None
        shard = act.check_path(files[0], "shard")
        cmd = act.bounded(["dd", f"if={shard}", "of=/dev/null", "bs=1M", "count=1024"], 60)
        try:
            r = await self.ctl.session.transport.run(cmd, timeout=70)
        except TransportError:
            return None
        return pred.parse_dd_rate(r.text + "\n" + (r.error_text or ""))

    def _samples(self) -> tuple[list[pred.BootSample], list[str]]:
        directory = self.recordings_dir or default_dir()
        samples, problems = pred.samples_from_recordings(directory)
        # This session's own boots too (the recording being written may not be flushed yet).
        live = pred.boots_from_events(list(self.ctl.state.log_lines))
        known = {s.at for s in samples}
        return samples + [s for s in live if s.at not in known], problems

    def _commands(self) -> tuple[Any, Any]:
        report = self.ctl.state.data("service")
        old = report.old.command if report is not None and report.old is not None else None
        new = None
        try:
            text = self.ctl._draft_text_raw()
            main = parse_unit(text, self.ctl.new_unit or "new.service").main_command
            new = normalize(list(main.argv)) if main is not None else None
        except (act.ActionError, OSError, NotSglang, ValueError):
            new = report.new.command if report is not None else None
        return old, new

    async def _paths(self, who: str) -> str:
        said = await self.plan_paths()
        self.planned_by = "paths"
        return said

    async def plan_paths(self) -> str:
        """Read the host's facts (nothing changes there) and choose the path: the PathPlan, the
        restart's prediction, a PathEvent for the report, the gate re-evaluated."""

        ctl = self.ctl
        p = ctl.profile
        model_dir = act.check_path(p.model_dir, "model directory")
        old_cmd, new_cmd = self._commands()
        old_path = old_cmd.value("--model-path") if old_cmd is not None else None
        self.old_model_path = cfp.host_model_path(ctl, old_path if isinstance(old_path, str) else None)  # issue 26
        old_cfg = await self._read_config(self.old_model_path)
        new_cfg = await self._read_config(model_dir)
        self.shards = await self._list_shards(model_dir)
        total = sum(s for _, s in self.shards)
        self.residency = await self._residency(model_dir) if self.shards else pred.Residency(None, 0, 0, "no shards")
        samples, problems = self._samples()
        cache_gbps = await self._cache_probe()
        gpu = ctl.state.data("gpu")
        self.old_unit_pids = [pr.pid for g in (gpu.gpus if gpu else ()) for pr in g.processes or ()]
        pause, pause_text = pred.predict_in_place(samples, total, self.residency, cache_gbps=cache_gbps)
        server = ctl.state.data("server")
        in_place = P.in_place_option(old_cfg, new_cfg, P.flag_changes(old_cmd, new_cmd), pause_s=pause,
                                     pause_detail=pause_text,
                                     server_ready=server is not None and server.status == "ready")
        fit_in = None
        if new_cfg is not None and new_cmd is not None and gpu is not None and gpu.gpus:
            mem = min((g.memory_total_mib or 0) for g in gpu.gpus) / 1024
            fit_in = inputs_from_command(new_cmd, new_cfg, total or None, len(gpu.gpus), mem, model=model_dir)
        beside = P.beside_option(fit_in, gpu, old_pids=self.old_unit_pids, old_port=self.old_port,
                                 router=self.router_url)
        in_place, beside = cfp.adjust_options(ctl, in_place, beside, model_dir)  # issue 26 hook: containers
        install = ctl.state.swap.steps.get("install")
        if (not cfp.active(ctl) and beside.possible and install is not None and install.state == "done"
                and self.drafted_for != "beside"):
            # The unit on the host was drafted without the beside GPUs and port: it would boot on the old ones.
            beside = P.PathOption("beside", False, None, "the new unit was installed before the path was planned "
                                  "(plan the paths, then install again for the beside GPUs and port)")
        if not cfp.active(ctl) and beside.possible:  # issue 34, item 6: the unit's whole environment
            why = await self.beside_environment_problem(beside.gpus, int(beside.port or 0))
            self.env_checked = True
            if why:
                beside = P.PathOption("beside", False, None, f"{why}: the new server would not boot on GPUs "
                                      f"{beside.cuda_visible_devices} (restart, or fix the unit and plan again)")
        self.restart = pred.predict_restart(samples, total, self.residency, cache_gbps=cache_gbps)
        restart = P.restart_option(self.restart.total_s, self.restart.text)
        self.plan_error = None
        try:
            self.plan = P.choose(in_place, beside, restart, want=self.want)
        except ValueError as exc:
            self.plan_error = f"{exc}; the plan would choose {P.choose(in_place, beside, restart).chosen}"
            self.plan = P.choose(in_place, beside, restart)
            raise _fail(f"{exc}; the plan would choose {self.plan.chosen}") from None
        finally:
            self._emit("plan", {"plan": self.plan.to_json() if self.plan else None,
                                "restart": self.restart.to_json(), "residency": _residency_json(self.residency),
                                "shards": len(self.shards), "weights_bytes": total, "problems": problems[:5]})
        self.mark_skips()
        ctl.state.apply(_gate(ctl))
        return " | ".join(self.plan.lines())

    def _emit(self, kind: str, data: dict[str, Any]) -> None:
        self.ctl.state.apply(PathEvent(self.ctl.host, kind, json.dumps(data, default=str), self.ctl._clock()))

    # -- pre-warm -----------------------------------------------------------------------------------

    # -- in place -----------------------------------------------------------------------------------

    async def _server_dead(self) -> bool:
        if cfp.active(self.ctl):  # issue 26 hook: the container's state, not a unit's
            return await cfp.server_dead(self.ctl)
        unit = act.check_unit(self.ctl.old_unit)
        for _ in range(10):
            try:
                now = await self.ctl._unit_state(unit)
            except Exception:  # noqa: BLE001 - cannot read: not proof of death
                return False
            if now.get("ActiveState") in ("failed", "inactive") or unit_is_failing(now):
                return True
            await asyncio.sleep(self.ctl.poll_s)
        return False

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



def _fail(message: str) -> Exception:
    """The controller's StepFailed (imported late: the controller imports this module)."""

    return StepFailed(message)


def _gauge(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            try:
                return float(line.rsplit(" ", 1)[1])
            except (ValueError, IndexError):
                return None
    return None


def _version(model_dir: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model_dir.rstrip("/").rsplit("/", 1)[-1])[:64] or "new"


def _residency_json(r: pred.Residency | None) -> dict[str, Any] | None:
    if r is None:
        return None
    return {"resident_bytes": r.resident_bytes, "total_bytes": r.total_bytes, "files": r.files,
            "fraction": r.fraction, "text": r.text()}


def _gate(ctl: Executor) -> Any:
    return GateChanged(ctl.host, ctl.evaluate_gate(), ctl._clock())


__all__ = ["KEYS", "FastPaths", "beside_unit_text", "curl_json", "split_reply"]
