"""The console's CPU once the demo's story is steady (download done, new model serving).

The simulated host runs in its own process (its SSH server and tools are the "host"), the
console connects to it over SSH like to a real host and runs headless at 120x40; its CPU is read
from /proc/PID/stat between `--from` and `--to` seconds. Target (issue #2): <= 2 % of one core.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SIM = r"""
import asyncio, json, logging, sys
logging.getLogger("asyncio").setLevel(logging.ERROR)
sys.path.insert(0, sys.argv[2])
from console.hostsim import HostSimulator
from console.hostsim.scenario import start_scenario, demo_profile
async def main():
    sim = HostSimulator()
    await sim.start()
    await start_scenario(sim)
    p = demo_profile(sim)
    print(json.dumps({"port": p.port, "identity": p.identity, "known_hosts": p.known_hosts, "model_dir": p.model_dir,
                      "server_port": p.server_port, "forbidden": p.forbidden_prefixes[0]}), flush=True)
    try:
        # Until the benchmark closes our stdin (or the time is up), then stop cleanly.
        await asyncio.wait_for(asyncio.to_thread(sys.stdin.read), float(sys.argv[1]))
    except asyncio.TimeoutError:
        pass
    await sim.stop()
asyncio.run(main())
"""


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(start: float, end: float) -> dict[str, object]:
    sim = subprocess.Popen([sys.executable, "-c", SIM, str(end + 30), str(ROOT)], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    assert sim.stdout is not None
    p = json.loads(sim.stdout.readline())
    shot = Path(tempfile.mkdtemp()) / "steady.svg"
    env = {**os.environ, "XDG_DATA_HOME": tempfile.mkdtemp(), "GPUCONSOLE_CONFIG": ""}
    env.pop("GPUCONSOLE_CONFIG")
    console = subprocess.Popen(
        [sys.executable, "-m", "console", "--host", "127.0.0.1", "--port", str(p["port"]), "--user", "root",
         "--identity", p["identity"], "--known-hosts", p["known_hosts"], "--model-dir", p["model_dir"],
         "--repo", "Qwen/Qwen3.5-122B-A10B", "--unit", "sglang-qwen122b.service",
         "--compare-unit", "sglang-qwen397b.service", "--server-port", str(p["server_port"]),
         "--screenshot", str(shot), "--screenshot-after", str(end + 2)], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t0 = time.time()
    time.sleep(start)
    c0, w0 = cpu_s(console.pid), time.time()
    if os.environ.get("PYSPY"):
        subprocess.run([os.environ["PYSPY"], "record", "-p", str(console.pid), "-d", str(int(end - start) - 2),
                        "-f", "raw", "-o", "/tmp/pyspy.txt", "-r", "100", "--gil"], capture_output=True)
    else:
        time.sleep(end - start)
    c1, w1 = cpu_s(console.pid), time.time()
    console.wait(60)
    assert sim.stdin is not None
    sim.stdin.close()  # the simulator stops its services and exits
    sim.wait(30)
    return {"window_s": [start, end], "cpu_pct_of_one_core": round(100 * (c1 - c0) / (w1 - w0), 2),
            "console_exit": console.returncode, "elapsed_s": round(time.time() - t0, 1), "screenshot": str(shot)}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="start", type=float, default=85.0, help="seconds after start (story steady at ~80)")
    ap.add_argument("--to", dest="end", type=float, default=115.0)
    a = ap.parse_args()
    print(json.dumps(main(a.start, a.end), indent=2))
