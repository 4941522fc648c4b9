"""(On a GPU host) where the GPU sampler process's CPU goes, part by part.

Stand-ins that each add one part of a sample to the one before (`sleep`: a Python loop that wakes
at the interval and does nothing; `write`: + one write(2) of a line the size of the sampler's;
`json`: + that line encoded from a dict; `nvml`: + pynvml imported and NVML started; `mem`: + the
memory call; `three`: + utilization and power, the three calls a 1 Hz sample needs; `power1`,
`util1`: one call other than memory, to tell the first ioctl of a wake-up from the call itself;
`clock`, `encode`, `fstr`: the json stand-in's clock reads alone, its encoding alone, the line
formatted by hand; `mem_v1`: NVML's v1 memory struct; `mem2`: the memory call twice)
run side by side with the samplers given (`--sampler LABEL=PATH`), each started as the console
starts the sampler (`python3 -u -c SOURCE INTERVAL`), started a fraction of the interval apart.
Each process's CPU comes from /proc/PID/schedstat after `--warmup` seconds and again `--seconds`
later, divided by the samples in that time (wall / interval): the steady cost per sample. The
start (python3's own, the imports, nvmlInit, a sampler's first line) is measured apart as the
CPU of each child (getrusage), and so is one-shot nvidia-smi. A torch process holding 2 GiB on
GPU 0 (when torch is there) gives the samplers a process to name. Stdlib only.

    python3 benchmarks/gpu_sampler_profile.py OUT --sampler before=OLD.py \
        --sampler now=console/host/sources/nvml_sampler.py
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

QUERY = ("nvidia-smi --query-gpu=index,name,uuid,memory.used,memory.total,utilization.gpu,"
         "temperature.gpu,power.draw,power.limit --format=csv,noheader,nounits")
HOLDER = """
import sys, torch
x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda:0"); x.fill_(1); torch.cuda.synchronize()
print("ready", flush=True); sys.stdin.read()
"""
# One source for every stand-in: MODE picks how much of a sample it does.
STAND_IN = """
import json, os, sys, time
MODE, interval = {mode!r}, float(sys.argv[1])
STEPS = ["sleep", "write", "json", "nvml", "mem", "three"]
level = STEPS.index(MODE) if MODE in STEPS else 1 if MODE in ("clock", "encode", "fstr") else STEPS.index("nvml")
if level >= 3:
    import pynvml
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
encode = json.JSONEncoder(separators=(",", ":")).encode
T0 = time.time()
LINE = (encode({{"t": T0, "gpus": [{{"utilization_pct": 0, "power_w": 118.776, "index": 0, "delta": 1}}],
               "delta": 1, "cost_us": 123.4}}) + "\\n").encode()
os.write(1, b'{{"gpus":[],"start":1}}\\n')
while True:
    started = time.perf_counter()
    power, util, used = 118776, 0, 0
    if level >= 4:
        used = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2).used
    if level >= 5:
        util = pynvml.nvmlDeviceGetUtilizationRates(h).gpu
        power = pynvml.nvmlDeviceGetPowerUsage(h)
    if MODE == "power1":
        power = pynvml.nvmlDeviceGetPowerUsage(h)
    if MODE == "util1":
        util = pynvml.nvmlDeviceGetUtilizationRates(h).gpu
    if MODE == "mem_v1":
        used = pynvml.nvmlDeviceGetMemoryInfo(h).used
    if MODE == "mem2":
        used = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2).used
        used = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2).used
    if level >= 2:
        os.write(1, (encode({{"t": time.time(), "gpus": [{{"utilization_pct": util, "power_w": power / 1000.0,
                                                        "index": 0, "delta": 1}}], "delta": 1,
                             "cost_us": round((time.perf_counter() - started) * 1e6, 1)}}) + "\\n").encode())
    elif MODE == "clock":  # the clock reads and the rounding of the json stand-in, the line ready-made
        t, cost = time.time(), round((time.perf_counter() - started) * 1e6, 1)
        os.write(1, LINE)
    elif MODE == "encode":  # the json stand-in's encoding, no clock read
        os.write(1, (encode({{"t": T0, "gpus": [{{"utilization_pct": util, "power_w": power / 1000.0,
                                                "index": 0, "delta": 1}}], "delta": 1,
                             "cost_us": 123.4}}) + "\\n").encode())
    elif MODE == "fstr":  # the same line formatted by hand
        os.write(1, ('{{"t":%r,"gpus":[{{"utilization_pct":%d,"power_w":%r,"index":0,"delta":1}}],"delta":1,'
                     '"cost_us":123.4}}\\n' % (T0, util, power / 1000.0)).encode())
    elif level == 1:
        os.write(1, LINE)
    time.sleep(max(0.0, interval - (time.perf_counter() - started)))
"""
STAND_INS = ["sleep", "write", "clock", "encode", "fstr", "json", "nvml", "mem", "mem_v1", "mem2", "three",
             "power1", "util1"]


def cpu_ns(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int((int(fields[11]) + int(fields[12])) * 1e9 / os.sysconf("SC_CLK_TCK"))


def status(pid: int) -> dict:
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
                out[key] = int(value)
        io = dict(x.split(": ") for x in Path(f"/proc/{pid}/io").read_text().splitlines())
        out["syscw"], out["syscr"] = int(io["syscw"]), int(io["syscr"])
    except (OSError, KeyError, ValueError):
        pass
    return out


class Stream:
    """One process whose stdout lines are read (and counted) on a thread."""

    def __init__(self, label: str, cmd: list[str]) -> None:
        self.label, self.lines, self.kept = label, 0, []
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines += 1
            if len(self.kept) < 30:
                self.kept.append(line.decode(errors="replace"))

    def mark(self) -> dict:
        return {"cpu_ns": cpu_ns(self.proc.pid), "t": time.perf_counter(), "lines": self.lines,
                **status(self.proc.pid)}

    def stop(self) -> str:
        self.proc.kill()
        self.proc.wait()
        return self.proc.stderr.read().decode(errors="replace")[-400:] if self.proc.stderr else ""


def side_by_side(commands: dict[str, list[str]], interval: float, warmup: float, seconds: float) -> dict:
    streams = {}
    for label, cmd in commands.items():
        try:
            streams[label] = Stream(label, cmd)
        except OSError as exc:  # no nvidia-smi here
            print(label, exc, flush=True)
            continue
        time.sleep(min(interval, 1.0) / len(commands))  # their wake-ups spread over the interval
    time.sleep(warmup)
    first = {label: s.mark() for label, s in streams.items()}
    time.sleep(seconds)
    last = {label: s.mark() for label, s in streams.items()}
    out = {}
    for label, s in streams.items():
        a, b = first[label], last[label]
        samples = max(1, round((b["t"] - a["t"]) / interval))
        row = {"samples": samples, "lines": b["lines"] - a["lines"],
               "cpu_us_per_sample": round((b["cpu_ns"] - a["cpu_ns"]) / 1e3 / samples, 1)}
        for key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches", "syscw", "syscr"):
            if key in a and key in b:
                row[key + "_per_sample"] = round((b[key] - a[key]) / samples, 2)
        row["stderr"] = s.stop()
        row["first_lines"] = s.kept[:12]
        out[label] = row
    return out


def child_cpu_us(cmd: list[str], lines: int = 0) -> float:
    """CPU of one child: run to its end, or (lines > 0) until it printed that many lines."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    if lines:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert p.stdout is not None
        for _ in range(lines):
            p.stdout.readline()
        p.kill()
        p.wait()
    else:
        subprocess.run(cmd, capture_output=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--sampler", action="append", default=[], help="LABEL=PATH of a sampler file (repeat)")
    ap.add_argument("--interval", type=float, action="append", default=[])
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--seconds", type=float, default=120.0, help="the steady part at 1 Hz (scaled by interval)")
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--oneshot", type=int, default=20)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    samplers = {label: Path(path).read_text() for label, path in (s.split("=", 1) for s in args.sampler)}
    py = sys.executable
    report: dict = {"python": sys.version.split()[0], "nproc": os.cpu_count(),
                    "loadavg_before": Path("/proc/loadavg").read_text().split()[:3], "runs": {}}
    holder = None
    try:
        import torch  # noqa: F401

        holder = subprocess.Popen([py, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        report["holder"] = holder.stdout.readline().strip() if holder.stdout else None
    except ImportError:
        report["holder"] = "no torch: no process on the GPU"
    try:
        for interval in args.interval or [1.0]:
            commands = {label: [py, "-u", "-c", src, f"{interval:g}"] for label, src in samplers.items()}
            for mode in STAND_INS:
                commands[mode] = [py, "-u", "-c", STAND_IN.format(mode=mode), f"{interval:g}"]
            commands["nvidia_smi_lms"] = QUERY.split() + [f"-lms={max(1, int(interval * 1000))}"]
            seconds = args.seconds if interval >= 1 else max(20.0, args.seconds * interval * 5)
            run = side_by_side(commands, interval, args.warmup * min(1.0, interval * 5), seconds)
            report["runs"][f"{interval:g}"] = run
            print(f"interval {interval:g} s:", json.dumps({k: v["cpu_us_per_sample"] for k, v in run.items()}),
                  flush=True)
        starts: dict = {}
        probes = {"python3 -c pass": [py, "-c", "pass"],
                  "import json,os,sys,time": [py, "-c", "import json, os, sys, time"],
                  "import pynvml": [py, "-c", "import pynvml"],
                  "import pynvml; nvmlInit()": [py, "-c", "import pynvml; pynvml.nvmlInit()"]}
        for label, cmd in probes.items():
            starts[label] = [round(child_cpu_us(cmd) / 1e3, 2) for _ in range(args.starts)]
        for label, src in samplers.items():  # to its first sample line: the driver line, then the whole sample
            starts[f"{label} to its first sample"] = [
                round(child_cpu_us([py, "-u", "-c", src, "1"], lines=2) / 1e3, 2) for _ in range(args.starts)]
        report["start_cpu_ms"] = starts
        print("start CPU ms (median):", json.dumps({k: statistics.median(v) for k, v in starts.items()}), flush=True)
        try:
            shots = [child_cpu_us(QUERY.split()) for _ in range(args.oneshot)]
        except OSError:
            shots = [0.0]
        report["nvidia_smi_oneshot_cpu_us"] = {"median": round(statistics.median(shots), 1),
                                               "mean": round(statistics.mean(shots), 1),
                                               "all": [round(x) for x in shots]}
        print("one-shot nvidia-smi CPU us:", report["nvidia_smi_oneshot_cpu_us"]["median"], flush=True)
        try:
            report["nvidia_smi"] = subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout
        except OSError as exc:
            report["nvidia_smi"] = str(exc)
    finally:
        if holder is not None and holder.stdin is not None:
            holder.stdin.close()
            holder.wait(60)
    report["loadavg_after"] = Path("/proc/loadavg").read_text().split()[:3]
    (args.out / "profile.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
