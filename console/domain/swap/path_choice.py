"""The planning step `paths` (issue 24): read the host's facts, nothing changed there, and choose the
path. Its body, like the other steps' bodies (shared_steps, unit_steps, container_steps, path_steps):

    read    both config.json (the old one through the old container's mount), the shards' sizes and
            their page-cache residency (fincore), the page cache's read rate (dd), this host's
            recorded boots, the GPU reading, the beside unit's whole environment as systemd applies it
    choose  the PathPlan (console/domain/swap/paths.py) and the restart's prediction, written into the
            path plan (`ex.fast`, console/domain/swap/fastpath.py, which builds the paths' exact
            commands from it) and emitted as a PathEvent for the report

Which of the plan's steps the chosen path then runs or skips is the path × runtime table's
(console/core/derive/swap_plan.py), applied by console/domain/swap/steps.py once this step has chosen.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from console.core.recording import default_dir
from console.domain.analysis import unit_environment as ue
from console.domain.analysis.fit import inputs_from_command
from console.domain.swap import actions as act
from console.domain.swap import container_fastpath as cfp
from console.domain.swap import paths as P
from console.domain.swap import prediction as pred
from console.domain.swap import prewarm as pw
from console.domain.swap.errors import StepFailed
from console.domain.swap.executor_api import Executor
from console.domain.swap.fastpath import beside_unit_text, clean
from console.host.parsers.sglang_argv import NotSglang, normalize
from console.host.parsers.systemd import parse_unit
from console.host.transport.errors import TransportError

# The steps before which the plan is made from the host's read-only facts when nobody ran `paths`:
# the gate shows the path and its predicted downtime before anything changed (not at install: the
# download may still be running, and a partial shard list predicts nothing).
PLAN_BEFORE = ("preflight", "stop_old")


def preview(ex: Executor) -> list[act.Action]:
    """The step's preview: it runs nothing that changes the host."""
    return [act.Action("paths", "Choose the path", (), waits_for=(
        "read both config.json, the shards' sizes, fincore, this host's recorded boots"))]


def can_plan(ex: Executor) -> bool:
    """The preflight plans on its own only for a unit with a model directory (a container's path is
    chosen by the `paths` step, its launch read first)."""
    containers = getattr(ex, "containers", None)
    return bool(getattr(ex.profile, "model_dir", None) and ex.old_unit) and not (
        containers is not None and containers.active)


async def run_paths(ex: Executor, who: str) -> str:
    """The `paths` step: the plan's lines ("in-place: predicted downtime 9s: … | beside: …")."""
    said = await plan_paths(ex)
    ex.fast.planned_by = "paths"
    return said


async def plan_before(ex: Executor) -> bool:
    """Plan from the host's read-only facts when nobody ran the `paths` step: the preflight (and the
    stop) then show the path and its predicted downtime before anything ran. Never fatal here: what
    kept it from planning is the plan's error, shown in the gate. True: it planned (or tried) now."""
    fast = ex.fast
    if fast.plan is not None or not can_plan(ex):
        return False
    try:
        await plan_paths(ex)
        fast.planned_by = "preflight"
    except (act.ActionError, TransportError, OSError, ValueError, asyncio.TimeoutError, StepFailed) as exc:
        fast.plan_error = clean(exc)
    return True


async def plan_paths(ex: Executor) -> str:
    """Read the host's facts (nothing changes there) and choose the path: the PathPlan and the
    restart's prediction in the path plan, a PathEvent for the report. StepFailed when the profile
    asks for a path that is not possible (the plan then holds the one it would choose)."""

    fast = ex.fast
    p = ex.profile
    model_dir = act.check_path(p.model_dir, "model directory")
    old_cmd, new_cmd = commands(ex)
    old_path = old_cmd.value("--model-path") if old_cmd is not None else None
    fast.old_model_path = cfp.host_model_path(ex, old_path if isinstance(old_path, str) else None)  # issue 26
    old_cfg = await read_config(ex, fast.old_model_path)
    new_cfg = await read_config(ex, model_dir)
    fast.shards = await list_shards(ex, model_dir)
    total = sum(s for _, s in fast.shards)
    fast.residency = await residency(ex, model_dir) if fast.shards else pred.Residency(None, 0, 0, "no shards")
    samples, problems = boot_samples(ex)
    cache_gbps = await cache_probe(ex)
    gpu = ex.state.data("gpu")
    fast.old_unit_pids = [pr.pid for g in (gpu.gpus if gpu else ()) for pr in g.processes or ()]
    pause, pause_text = pred.predict_in_place(samples, total, fast.residency, cache_gbps=cache_gbps)
    server = ex.state.data("server")
    container = cfp.active(ex)  # issue 26: the words name what a container gets (its launch), not a unit's
    in_place = P.in_place_option(old_cfg, new_cfg, P.flag_changes(old_cmd, new_cmd), pause_s=pause,
                                 pause_detail=pause_text, container=container,
                                 server_ready=server is not None and server.status == "ready")
    fit_in = None
    if new_cfg is not None and new_cmd is not None and gpu is not None and gpu.gpus:
        mem = min((g.memory_total_mib or 0) for g in gpu.gpus) / 1024
        # the weights the gate's fit (and the report's Fit) counts: the download's true total, so the
        # plan and the gate say one KV figure (the shards' sum alone made them 256 tokens apart)
        download = ex.state.data("download")
        weights = download.bytes_total if download is not None and download.bytes_total else total or None
        fit_in = inputs_from_command(new_cmd, new_cfg, weights, len(gpu.gpus), mem, model=model_dir)
    beside = P.beside_option(fit_in, gpu, old_pids=fast.old_unit_pids, old_port=fast.old_port,
                             router=fast.router_url, container=container,
                             compose=container and bool(getattr(p, "compose", None)))
    in_place, beside = cfp.adjust_options(ex, in_place, beside, model_dir)  # issue 26 hook: containers
    install = ex.state.swap.steps.get("install")
    if (not cfp.active(ex) and beside.possible and install is not None and install.state == "done"
            and fast.drafted_for != "beside"):
        # The unit on the host was drafted without the beside GPUs and port: it would boot on the old ones.
        beside = P.PathOption("beside", False, None, "the new unit was installed before the path was planned "
                              "(plan the paths, then install again for the beside GPUs and port)")
    if not cfp.active(ex) and beside.possible:  # issue 34, item 6: the unit's whole environment
        why = await beside_environment_problem(ex, beside.gpus, int(beside.port or 0))
        fast.env_checked = True
        if why:
            beside = P.PathOption("beside", False, None, f"{why}: the new server would not boot on GPUs "
                                  f"{beside.cuda_visible_devices} (restart, or fix the unit and plan again)")
    fast.restart = pred.predict_restart(samples, total, fast.residency, cache_gbps=cache_gbps, container=container)
    restart = P.restart_option(fast.restart.total_s, fast.restart.text)
    fast.plan_error = None
    try:
        fast.plan = P.choose(in_place, beside, restart, want=fast.want)
    except ValueError as exc:
        fast.plan_error = f"{exc}; the plan would choose {P.choose(in_place, beside, restart).chosen}"
        fast.plan = P.choose(in_place, beside, restart)
        raise StepFailed(f"{exc}; the plan would choose {fast.plan.chosen}") from None
    finally:
        fast._emit("plan", {"plan": fast.plan.to_json() if fast.plan else None,
                            "restart": fast.restart.to_json(), "residency": _residency_json(fast.residency),
                            "shards": len(fast.shards), "weights_bytes": total, "problems": problems[:5]})
    return " | ".join(fast.plan.lines())


# -- the host's facts -------------------------------------------------------------------------------
async def beside_environment_problem(ex: Executor, gpus: tuple[int, ...], port: int) -> str | None:
    """Why the beside unit would not get CUDA_VISIBLE_DEVICES=gpus once systemd applies its drop-ins,
    EnvironmentFile= files and UnsetEnvironment= (read on the host, nothing changed), or None."""

    transport = ex.session.transport
    try:
        drafted = beside_unit_text(ex._draft_text_raw(), gpus, port)
        unit = act.check_unit(ex.new_unit)
    except (act.ActionError, OSError, UnicodeDecodeError) as exc:
        return clean(exc)
    bases = ex.fast.unit_dirs or ue.UNIT_DIRS
    listing = act.bounded(["find", "-H", *ue.dropin_dirs(unit, bases), "-maxdepth", "1", "-name", "*.conf",
                           "-print"], 15) + " 2>/dev/null"
    try:
        r = await transport.run(listing, timeout=25)
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


def bind_host(ex: Executor) -> str:
    """The address the beside server binds: its drafted unit's --host (SGLang's default 127.0.0.1)."""
    try:
        _, new = commands(ex)
    except Exception:  # noqa: BLE001 - no draft, no report: SGLang's default, and the check says it
        new = None
    value = new.value("--host") if new is not None else None
    return value if isinstance(value, str) and value else "127.0.0.1"


async def read_config(ex: Executor, model_dir: str | None) -> dict[str, Any] | None:
    if not model_dir:
        return None
    try:
        raw = await ex.session.transport.read_file(f"{model_dir.rstrip('/')}/config.json", timeout=15)
        value = json.loads(raw.decode("utf-8", "replace"))
    except (TransportError, OSError, ValueError, asyncio.TimeoutError):
        return None
    return value if isinstance(value, dict) else None


async def list_shards(ex: Executor, model_dir: str) -> list[tuple[str, int]]:
    d = act.check_path(model_dir, "model directory")
    cmd = act.bounded(["find", d, "-maxdepth", "1", "-type", "f", "-name", "*.safetensors", "-printf",
                       "%s %f\\n"], 30)
    r = await ex.session.transport.run(cmd, timeout=40)
    out = []
    for line in r.text.splitlines():
        size, _, name = line.partition(" ")
        if size.isdigit() and name and "/" not in name:
            out.append((name, int(size)))
    return sorted(out)


async def residency(ex: Executor, model_dir: str) -> pred.Residency:
    shards = ex.fast.shards
    files = pw.shard_paths(model_dir, [n for n, _ in shards])
    total = sum(s for _, s in shards)
    try:
        r = await ex.session.transport.run(pw.fincore_command(files), timeout=70)
    except TransportError as exc:
        return pred.Residency(None, total, 0, f"fincore did not answer: {exc}")
    return pred.parse_fincore(r.text, total, r.exit_status or 0)


async def cache_probe(ex: Executor) -> float | None:
    """The page cache's read rate on this host: dd over (up to 1 GiB of) a wholly cached shard."""
    found = ex.fast.residency
    files = found.cached_files if found is not None else ()
    if not files:
        return None
    shard = act.check_path(files[0], "shard")
    cmd = act.bounded(["dd", f"if={shard}", "of=/dev/null", "bs=1M", "count=1024"], 60)
    try:
        r = await ex.session.transport.run(cmd, timeout=70)
    except TransportError:
        return None
    return pred.parse_dd_rate(r.text + "\n" + (r.error_text or ""))


def boot_samples(ex: Executor) -> tuple[list[pred.BootSample], list[str]]:
    """This host's recorded boots (the recordings, then this session's own not flushed yet)."""
    directory = ex.fast.recordings_dir or default_dir()
    samples, problems = pred.samples_from_recordings(directory)
    live = pred.boots_from_events(list(ex.state.log_lines))
    known = {s.at for s in samples}
    return samples + [s for s in live if s.at not in known], problems


def commands(ex: Executor) -> tuple[Any, Any]:
    """The old server's normalized SGLang command (the service reading) and the new one's (the
    drafted unit, else the reading)."""
    report = ex.state.data("service")
    old = report.old.command if report is not None and report.old is not None else None
    new = None
    try:
        text = ex._draft_text_raw()
        main = parse_unit(text, ex.new_unit or "new.service").main_command
        new = normalize(list(main.argv)) if main is not None else None
    except (act.ActionError, OSError, NotSglang, ValueError):
        new = report.new.command if report is not None else None
    return old, new


def _residency_json(r: pred.Residency | None) -> dict[str, Any] | None:
    if r is None:
        return None
    return {"resident_bytes": r.resident_bytes, "total_bytes": r.total_bytes, "files": r.files,
            "fraction": r.fraction, "text": r.text()}


__all__ = ["PLAN_BEFORE", "beside_environment_problem", "bind_host", "can_plan", "plan_before", "plan_paths",
           "preview", "run_paths"]
