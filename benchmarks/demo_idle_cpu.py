"""The console's CPU once the demo's story is steady (download done, new model serving).

Runs what users run, `gpuconsole --demo` (headless at 120x40 through --screenshot): the console
starts the simulated host in its own process (console.demo.hostsim.process) and connects to it over
SSH like to a real host. The console's CPU (utime + stime from /proc/PID/stat, every thread) is
read between `--from` and `--to` seconds, the simulator's separately; `--runs` runs, median.
Target (issue 16): <= 2 % of one core for the console itself.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def simulator_pid(console: int) -> int | None:
    """The demo's simulator: the console's child running console.demo.hostsim.process."""
    for child in children(console):
        try:
            if b"console.demo.hostsim.process" in Path(f"/proc/{child}/cmdline").read_bytes():
                return child
        except FileNotFoundError:
            continue
    return None


def run_once(start: float, end: float, root: Path = ROOT) -> dict[str, object]:
    shot = Path(tempfile.mkdtemp()) / "steady.svg"
    env = {**os.environ, "XDG_DATA_HOME": tempfile.mkdtemp(), "TERM": "xterm-256color"}
    env.pop("GPUCONSOLE_CONFIG", None)
    # What users run: `gpuconsole --demo` (headless at 120x40 here, through --screenshot).
    console = subprocess.Popen(
        [sys.executable, "-m", "console", "--demo", "--screenshot", str(shot), "--screenshot-after", str(end + 2)],
        cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # `-m console`: the tree at cwd
    t0 = time.time()
    time.sleep(start)
    sim = simulator_pid(console.pid)
    c0, s0, w0 = cpu_s(console.pid), cpu_s(sim) if sim else 0.0, time.time()
    if os.environ.get("PYSPY"):
        subprocess.run([os.environ["PYSPY"], "record", "-p", str(console.pid), "-d", str(int(end - start) - 2),
                        "-f", "raw", "-o", "/tmp/pyspy.txt", "-r", "100", "--nonblocking"], capture_output=True)
        time.sleep(max(0.0, end - start - (time.time() - w0)))
    else:
        time.sleep(end - start)
    c1, s1, w1 = cpu_s(console.pid), cpu_s(sim) if sim else 0.0, time.time()
    console.wait(60)
    return {"console_cpu_pct": round(100 * (c1 - c0) / (w1 - w0), 2), "load_1m_at_end": round(os.getloadavg()[0], 2),
            "simulator_cpu_pct": round(100 * (s1 - s0) / (w1 - w0), 2) if sim else None,
            "simulator_in_own_process": sim is not None, "console_exit": console.returncode,
            "elapsed_s": round(time.time() - t0, 1), "screenshot": str(shot)}


def main(start: float, end: float, runs: int, base: Path | None = None) -> dict[str, object]:
    results, before = [], []
    for _ in range(runs):  # with a base: base, now, base, now ... (the load falls on both)
        if base is not None:
            before.append(run_once(start, end, base.resolve()))
        results.append(run_once(start, end))
    cpu = [r["console_cpu_pct"] for r in results]
    out: dict[str, object] = {
        "window_s": [start, end], "runs": runs, "console_cpu_pct_median": statistics.median(cpu),
        "console_cpu_pct_runs": cpu, "simulator_cpu_pct_runs": [r["simulator_cpu_pct"] for r in results],
        "load_1m_at_ends": [r["load_1m_at_end"] for r in results], "results": results}
    if base is not None:
        out["base"] = {"tree": str(base), "console_cpu_pct_median": statistics.median(r["console_cpu_pct"] for r in before),
                       "console_cpu_pct_runs": [r["console_cpu_pct"] for r in before],
                       "load_1m_at_ends": [r["load_1m_at_end"] for r in before]}
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="start", type=float, default=85.0, help="seconds after start (story steady at ~80)")
    ap.add_argument("--to", dest="end", type=float, default=115.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--base", type=Path, metavar="DIR",
                    help="a base checkout whose console is measured interleaved with this one's, run for run")
    a = ap.parse_args()
    print(json.dumps(main(a.start, a.end, a.runs, a.base), indent=2))
