"""The swap driven from the console (scenario "drive"): nothing happens on its own. `systemctl
start/stop` move the units, `systemd-run` starts a detached transient unit, `hf download` fetches
the simulated repo in the foreground; the GPUs follow the units that really ran.

State files under $GPUSIM_ROOT/.sim (stdlib only: the host's python3 runs these tools):
    drive.json       the wanted windows per unit: {"windows": {unit: [[start_t, stop_t|null], ...]}}
    units.json       what the unit runner observed (active/failed, pids, failed_at_t)
    transient.json   systemd-run's transient units: {name: {"pid": N, "log": PATH}}
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from console.demo.hostsim import placement, story
from console.demo.hostsim.downloader import DownloadPlan, LocalDirDownloader
from console.demo.hostsim.fake_sglang import lifecycle

DRAIN_S = 3.0  # scenario seconds for a stopped server's memory to be released
OLD_BOOT_S = 14.0  # the old model, started again by a rollback, loads its weights in this long


def _root() -> Path:
    return Path(os.environ["GPUSIM_ROOT"])


def _read(name: str) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((_root() / ".sim" / name).read_text())
        return data
    except (OSError, ValueError):
        return {}


def _write(name: str, data: dict[str, Any], root: Path | None = None) -> None:
    path = (root or _root()) / ".sim" / name
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def is_driven(root: Path | None = None) -> bool:
    return ((root or _root()) / ".sim" / "drive.json").exists()


def init(root: Path, old_unit: str, new_unit: str) -> None:
    """The old unit has been serving for hours; the new one has not run."""
    _write("drive.json", {"old": old_unit, "new": new_unit, "windows": {old_unit: [[-1e9, None]], new_unit: []}},
           root)


def windows(root: Path | None = None) -> dict[str, list[list[float | None]]]:
    path = (root or _root()) / ".sim" / "drive.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    w: dict[str, list[list[float | None]]] = data.get("windows", {})
    return w


def wanted(root: Path, t: float) -> dict[str, bool]:
    """Per unit: should it run now (its last window is open)?"""
    return {u: bool(ws) and ws[-1][1] is None and float(ws[-1][0] or 0) <= t for u, ws in windows(root).items()}


def _set_window(unit: str, start: bool, t: float) -> bool:
    data = _read("drive.json")
    ws = data.setdefault("windows", {}).setdefault(unit, [])
    is_open = bool(ws) and ws[-1][1] is None
    if start and not is_open:
        ws.append([t, None])
    elif not start and is_open:
        ws[-1][1] = t
    else:
        return False
    _write("drive.json", data)
    return True


# -- systemctl start/stop/daemon-reload, for the driven scenario ---------------------------------
def systemctl(cmd: str, names: list[str], t: float, unit_file: Any) -> int | None:
    """None: not a command this module handles."""
    if cmd == "daemon-reload":
        stamp = _root() / ".sim" / "daemon-reload"
        stamp.write_text(str(time.time()))
        return 0
    if cmd == "reset-failed":
        return 0
    if cmd not in ("start", "stop", "restart"):
        return None
    if not names:
        print(f"Too few arguments for systemctl {cmd}.", file=sys.stderr)
        return 1
    transient = _read("transient.json")
    status = 0
    for name in names:
        if name in transient:
            if cmd == "stop":
                _stop_transient(name, transient)
            continue
        if not unit_file(name).exists():
            print(f"Failed to {cmd} {name}: Unit {name} not found.", file=sys.stderr)
            status = 5
            continue
        if cmd in ("stop", "restart"):
            _set_window(name, False, t)
            if not _wait_unit(name, active=False, timeout_s=20):
                print(f"Job for {name} timed out.", file=sys.stderr)
                status = 1
        if cmd in ("start", "restart"):
            _set_window(name, True, t)
            if not _wait_unit(name, active=True, timeout_s=10):
                print(f"Job for {name} failed because the control process exited with error code.\n"
                      f"See \"systemctl status {name}\" and \"journalctl -xeu {name}\" for details.",
                      file=sys.stderr)
                status = 1
    return status


def _wait_unit(name: str, *, active: bool, timeout_s: float) -> bool:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        u = _read("units.json").get(name, {})
        if active and u.get("active") == "active":
            return True
        if not active and u.get("active") != "active":
            return True
        if active and u.get("active") == "failed" and float(u.get("failed_at", 0) or 0) > time.time() - 1:
            return False
        time.sleep(0.1)
    return False


def transient_state(name: str) -> dict[str, object] | None:
    info = _read("transient.json").get(name)
    if info is None:
        return None
    pid = int(info.get("pid", 0))
    alive = _alive(pid)
    code = info.get("exit")
    return {"active": "active" if alive else "failed" if code not in (None, 0) else "inactive",
            "sub": "running" if alive else "dead", "pid": pid if alive else 0, "since": info.get("since", 0)}


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][:1] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _stop_transient(name: str, transient: dict[str, Any]) -> None:
    pid = int(transient[name].get("pid", 0))
    if _alive(pid):
        try:
            os.killpg(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
        deadline = time.time() + 5
        while _alive(pid) and time.time() < deadline:
            time.sleep(0.05)


def systemd_run(args: list[str]) -> int:
    """`systemd-run --unit=NAME --collect [--property=...] [--] CMD ARGS...`: CMD detached, in its own
    session, as a transient unit `systemctl` can show and stop."""
    unit, i = None, 0
    while i < len(args):
        a = args[i]
        if a == "--":
            i += 1
            break
        if a.startswith("--unit="):
            unit = a.split("=", 1)[1]
        elif a == "--unit" and i + 1 < len(args):
            unit = args[i + 1]
            i += 1
        elif not a.startswith("-"):
            break
        i += 1
    argv = args[i:]
    if not argv:
        print("systemd-run: command line to execute required.", file=sys.stderr)
        return 1
    unit = unit or f"run-u{os.getpid()}"
    name = unit if unit.endswith(".service") else unit + ".service"
    transient = _read("transient.json")
    if name in transient and _alive(int(transient[name].get("pid", 0))):
        print(f"Failed to start transient service unit: Unit {name} was already loaded or has a fragment "
              "file.", file=sys.stderr)
        return 1
    log = _root() / ".sim" / "journal" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    transient[name] = {"pid": proc.pid, "log": str(log), "since": time.time()}
    _write("transient.json", transient)
    print(f"Running as unit: {name}; invocation ID: {os.urandom(16).hex()}", file=sys.stderr)
    return 0


# -- hf download ---------------------------------------------------------------------------------
def hf(args: list[str]) -> int:
    """`hf download REPO --local-dir DIR`: the simulated repo, from whatever is already on disk
    (a resumed download continues its partial files), in the foreground until complete."""
    if not args or args[0] != "download":
        print("usage: hf download REPO_ID --local-dir DIR", file=sys.stderr)
        return 2
    rest = [a for a in args[1:] if a != "--"]
    local_dir = None
    repo = None
    i = 0
    while i < len(rest):
        if rest[i] == "--local-dir" and i + 1 < len(rest):
            local_dir = rest[i + 1]
            i += 2
            continue
        if rest[i].startswith("--local-dir="):
            local_dir = rest[i].split("=", 1)[1]
        elif not rest[i].startswith("-") and repo is None:
            repo = rest[i]
        i += 1
    if repo is None or local_dir is None:
        print("hf download: REPO_ID and --local-dir are required", file=sys.stderr)
        return 2
    if repo != "Qwen/Qwen3.5-122B-A10B":
        print(f"Repository Not Found for url: https://huggingface.co/api/models/{repo}/revision/main.",
              file=sys.stderr)
        return 1
    state = json.loads((_root() / ".sim" / "state.json").read_text())
    speed = float(state.get("speed", 1.0))
    target = Path(local_dir)
    target.mkdir(parents=True, exist_ok=True)
    have = 0
    for dirpath, _dirs, files in os.walk(target):
        for f in files:
            if f.endswith((".safetensors", ".incomplete")):
                have += os.lstat(os.path.join(dirpath, f)).st_size
    plan = DownloadPlan(start_bytes=have)
    started = time.time()
    downloader = LocalDirDownloader(target, plan, lambda: (time.time() - started) * speed,
                                    lfs_manifest=_root() / ".sim" / "lfs.json")
    downloader.prepare()
    print(f"Downloading {repo} to {target}", flush=True)
    big = [f for f in plan.files if f.content is None]
    while True:
        try:
            downloader.step()
        except OSError as exc:
            print(f"hf download: {exc}", file=sys.stderr)
            return 1
        if all((target / f.path).exists() for f in big):
            print(str(target), flush=True)
            return 0
        time.sleep(0.2)


# -- the GPUs, from the units that really ran ----------------------------------------------------
def _unit_memory(role: str, start: float, stop: float | None, t: float, booted: bool) -> int:
    """MiB one unit holds on each GPU at t (before the per-GPU jitter)."""
    if t < start:
        return 0
    if stop is not None and t >= stop:
        held = _unit_memory(role, start, None, stop, booted)
        return int(held * max(0.0, 1 - (t - stop) / DRAIN_S))
    if role == "old":
        if booted:
            return story.OLD_USED_MIB
        s = t - start
        return int(story._ramp(s, 4.0, OLD_BOOT_S, story.CONTEXT_MIB, story.OLD_USED_MIB))
    # the new model's own story, shifted to its start
    s = story.T_NEW_START + (t - start)
    if s < story.T_WEIGHTS_BEGIN:
        return story.CONTEXT_MIB
    if s < story.T_WEIGHTS_END:
        return int(story._ramp(s, story.T_WEIGHTS_BEGIN, story.T_WEIGHTS_END, story.CONTEXT_MIB,
                               story.CONTEXT_MIB + story.WEIGHTS_MIB))
    if s < story.T_KV_ALLOC:
        return story.CONTEXT_MIB + story.WEIGHTS_MIB
    if s < story.T_GRAPH_BEGIN:
        return story.AFTER_KV_MIB
    return int(story._ramp(s, story.T_GRAPH_BEGIN, story.T_GRAPH_END, story.AFTER_KV_MIB, story.AFTER_GRAPHS_MIB))


def _lived_memory(life: dict[str, Any], role: str, start: float, stop: float | None, t: float) -> int:
    """MiB from the server's own lifecycle (fake_sglang/lifecycle.py); after the console's stop the
    memory drains as the processes exit (DRAIN_S), as `_unit_memory` does."""
    if t < start:
        return 0
    if stop is not None and t >= stop:
        at_stop = lifecycle.memory_mib({**life, "ended_at_t": None}, role, stop)
        return int(at_stop * max(0.0, 1 - (t - stop) / DRAIN_S))
    return lifecycle.memory_mib(life, role, t)


def gpu_states(t: float) -> tuple[story.SimGpu, ...]:
    """As `story.gpu_states`, but from the windows the console's commands opened and closed, and
    from the failures the unit runner saw (an OOM'd server releases its memory)."""
    data = _read("drive.json")
    units = _read("units.json")
    ws = data.get("windows", {})
    roles = {data.get("old"): ("old", story.OLD_PID_BASE), data.get("new"): ("new", story.NEW_PID_BASE)}
    held: list[tuple[int, int, str]] = []  # (MiB, pid base, role)
    # issue 24 hook: how many GPUs, and which ones each unit's server uses (console/demo/hostsim/placement.py)
    count = placement.gpu_count(_root(), story.GPU_COUNT)
    on: list[tuple[int, ...]] = []
    for unit, windows_ in ws.items():
        role, pid_base = roles.get(unit, ("new", story.NEW_PID_BASE))
        failed_at = units.get(unit, {}).get("failed_at_t")
        life = lifecycle.read(_root(), unit)
        for start, stop in windows_:
            start = float(start)
            if stop is None and failed_at is not None and float(failed_at) >= start:
                stop = float(failed_at)
            gpus_of = placement.unit_gpus(_root(), unit)
            born = float(life.get("started_at_t") or -1e18) if life is not None else None
            if life is not None and born is not None and born >= start - 1.0 and (stop is None or born <= stop) \
                    and bool(life.get("booted")) == (start < -1e8):
                # issue 24: this window's server wrote its own lifecycle: its GPUs, its phases, its end
                mib = _lived_memory(life, role, start, None if stop is None else float(stop), t)
                gpus_of = tuple(int(g) for g in life.get("gpus") or gpus_of)
            else:
                mib = _unit_memory(role, start, None if stop is None else float(stop), t, booted=start < -1e8)
            if mib > 0:
                held.append((mib, pid_base, role))
                on.append(gpus_of)
    gpus = []
    for i in range(count):
        jitter = (i * 37) % 11
        here = [(h, g.index(i)) for h, g in zip(held, on, strict=True) if i in g]
        used = sum(m for (m, _, _), _ in here)
        procs = tuple((base + rank, f"sglang::scheduler_TP{rank}", max(0, m + jitter - 520))
                      for (m, base, _), rank in here)
        serving = any(r for (m, _, r), _ in here if m >= story.OLD_USED_MIB - 1 or m >= story.AFTER_GRAPHS_MIB - 1)
        util = int(100 * max(0.0, min(1.0, story.traffic(t + i)))) if serving else (5 if here else 0)
        used = used + jitter if here else 0
        temp = int(36 + util * 0.34 + i)
        power = round(88.0 + util * 4.6 + i * 1.7, 2)
        uuid = f"GPU-5f0c{i:04x}-9d4e-43b1-a7c2-1b8e3f6d{i:04x}"
        gpus.append(story.SimGpu(i, uuid, used, util, temp, power, procs))
    return tuple(gpus)


def gpu_states_now(t: float) -> tuple[story.SimGpu, ...]:
    """What the simulated GPU tools show: the driven scenario's, else the story's timeline."""
    if os.environ.get("GPUSIM_ROOT") and is_driven():
        return gpu_states(t)
    return story.gpu_states(t)
