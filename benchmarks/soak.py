"""A soak: the demo for hours with a shared core and two attached consoles; is anything growing?

Starts what users run, each its own process with its own temporary XDG dirs: the shared core
(`gpuconsole serve --demo --socket S`, recording on, the simulated host in its own process) and
two consoles attached to it (`gpuconsole attach S`, each in its own tmux session of 120x40).
Every `--sample-s` (60) it writes one JSON line: each process's RSS (VmRSS) and CPU % over the
interval (utime + stime from /proc/PID/stat), the simulator's, the recording's bytes on disk, the
load average. At the end: memory flat means every process's RSS at the end is at most +10 % of
its RSS at `--settle-min` (10) minutes. `--hours` (4) or `--minutes` for a shorter run.

Not in it yet: the story is played once (the demo's swap, then steady), not looped with more
swaps and benchmarks; the core's state sizes are not read from outside the process.

    nice .venv/bin/python benchmarks/soak.py --minutes 60 --out /tmp/soak.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return found


def simulator_pid(core: int) -> int | None:
    for child in children(core):
        try:
            if b"console.demo.hostsim.process" in Path(f"/proc/{child}/cmdline").read_bytes():
                return child
        except OSError:
            continue
    return None


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=4.0)
    ap.add_argument("--minutes", type=float, help="instead of --hours")
    ap.add_argument("--sample-s", type=float, default=60.0)
    ap.add_argument("--settle-min", type=float, default=10.0, help="the memory baseline's minute")
    ap.add_argument("--out", type=Path, help="append the JSON lines here too")
    args = ap.parse_args()
    total_s = (args.minutes if args.minutes is not None else args.hours * 60) * 60
    if total_s <= 0 or args.sample_s <= 0:
        print("soak: the run and the sample interval must be positive", file=sys.stderr)
        return 2
    base = Path(tempfile.mkdtemp(prefix="gc-soak-"))
    env = {**os.environ, "TERM": "xterm-256color", "HOME": str(base / "home"),
           "XDG_DATA_HOME": str(base / "data"), "XDG_STATE_HOME": str(base / "state"),
           "XDG_CONFIG_HOME": str(base / "config"), "XDG_CACHE_HOME": str(base / "cache"),
           "XDG_RUNTIME_DIR": str(base / "run")}
    for key in ("HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR"):
        Path(env[key]).mkdir(parents=True, exist_ok=True, mode=0o700)
    env.pop("GPUCONSOLE_CONFIG", None)
    sock = base / "run" / "core.sock"
    procs: dict[str, subprocess.Popen[bytes]] = {}
    pids: dict[str, int] = {}
    tmux = [f"gc-soak-{os.getpid()}-{name}" for name in ("ana", "ben")]
    out = args.out.open("a") if args.out else None

    def emit(record: dict) -> None:
        line = json.dumps(record)
        print(line, flush=True)
        if out is not None:
            out.write(line + "\n")
            out.flush()

    try:
        with (base / "core.err").open("wb") as err:
            procs["core"] = subprocess.Popen(
                [sys.executable, "-m", "console", "serve", "--demo", "--socket", str(sock)],
                cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        pids["core"] = procs["core"].pid
        deadline = time.time() + 120
        while not sock.exists() and time.time() < deadline and procs["core"].poll() is None:
            time.sleep(0.5)
        if not sock.exists():
            print(f"soak: the core did not serve within 120 s (see {base / 'core.err'})", file=sys.stderr)
            return 1
        for name, session in zip(("ana", "ben"), tmux, strict=True):
            # A console needs a terminal: each in its own tmux session (the environment passed
            # with -e, the command exec'd so the pane's pid is the console's).
            command = " ".join(shlex.quote(x) for x in [
                "exec", sys.executable, "-m", "console", "attach", str(sock), "--name", name])
            subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40", "-c", str(ROOT),
                            *[f"-e{k}={env[k]}" for k in ("TERM", "HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
                                                          "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR")],
                            command], check=True, env=env)
            pane = subprocess.run(["tmux", "list-panes", "-t", session, "-F", "#{pane_pid}"],
                                  capture_output=True, text=True, check=True)
            pids[name] = int(pane.stdout.split()[0])
        started = time.time()
        sim = None
        last = {k: (cpu_s(pid), time.time()) for k, pid in pids.items()}
        samples: list[dict] = []
        while time.time() - started < total_s:
            time.sleep(args.sample_s)
            sim = sim or simulator_pid(procs["core"].pid)
            now = time.time()
            record: dict = {"minute": round((now - started) / 60, 2),
                            "load": os.getloadavg()[0], "recording_bytes": dir_bytes(base / "data" / "gpuconsole"),
                            "alive": {k: Path(f"/proc/{pid}").exists() for k, pid in pids.items()}}
            if sim:
                pids["simulator"] = sim
                last.setdefault("simulator", (cpu_s(sim), started))
            for name, pid in pids.items():
                cpu, at = cpu_s(pid), now
                before, t0 = last.get(name, (None, now))
                record[f"{name}_rss_mib"] = None if rss_mib(pid) is None else round(rss_mib(pid) or 0, 1)
                record[f"{name}_cpu_pct"] = (None if cpu is None or before is None or at <= t0
                                             else round(100 * (cpu - before) / (at - t0), 2))
                last[name] = (cpu, at)
            samples.append(record)
            emit(record)
        settle = next((s for s in samples if s["minute"] >= args.settle_min), None)
        end = samples[-1] if samples else None
        verdict: dict = {"summary": True, "minutes": round((time.time() - started) / 60, 1),
                         "settle_minute": settle["minute"] if settle else None, "dir": str(base)}
        if settle and end and settle is not end:
            growth = {}
            for name in ("core", "ana", "ben", "simulator"):
                a, b = settle.get(f"{name}_rss_mib"), end.get(f"{name}_rss_mib")
                if a and b:
                    growth[name] = round(100 * (b - a) / a, 1)
            verdict["rss_growth_pct_after_settle"] = growth
            verdict["memory_flat"] = all(g <= 10 for g in growth.values())
            verdict["all_alive"] = all(end["alive"].values())
            for name in ("core", "ana", "ben", "simulator"):
                cpus = [s.get(f"{name}_cpu_pct") for s in samples if s["minute"] >= args.settle_min]
                cpus = [c for c in cpus if c is not None]
                if cpus:
                    verdict[f"{name}_cpu_pct_after_settle"] = [min(cpus), round(sum(cpus) / len(cpus), 2), max(cpus)]
            verdict["recording_bytes"] = [settle["recording_bytes"], end["recording_bytes"]]
        else:
            verdict["memory_flat"] = None
            verdict["note"] = f"shorter than the settle time ({args.settle_min:g} min): no memory verdict"
        emit(verdict)
        return 0
    finally:
        for session in tmux:
            subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, check=False)
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if out is not None:
            out.close()
        if not os.environ.get("SOAK_KEEP"):
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
