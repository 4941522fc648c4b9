"""(On a GPU host) what each way of cutting below the GPU sampler's floor would save, side by side.

Session 13 profiled a 1 Hz sample's floor (`gpu_sampler_profile.py`, tests/data/h200/sampler_cost/s13):
wake-up ~74 µs, write 15, clocks 16, a format 26, the memory call 111, utilization and power 27. The
stand-ins here each change one of those parts, and run side by side (the same method: one process each,
started as the console starts the sampler, `python3 -u -c SOURCE INTERVAL`, a fraction of the interval
apart, whole-process CPU from /proc/PID/schedstat over `--seconds` after `--warmup`, divided by the
samples in that time) with the samplers given (`--sampler LABEL=PATH`) and `nvidia-smi -lms`:

- the wake-up (no NVML, no line): `sleep` (a clock read and time.sleep, as the sampler), `sleep_fixed`
  (time.sleep(interval), no clock), `select` (select.select with no fds), `poll_in` (poll on the stdin
  pipe, which the parent holds open and never writes: a blocking read with a timeout), `sigwait` (a
  periodic itimer and signal.sigwait, no handler, no clock);
- the memory call (time.sleep wake-up, no line): `nvml` (none), `mem` (v2 struct), `mem_v1`, `mem_ct`
  (v1 through ctypes straight to libnvidia-ml, the struct made once: pynvml's Python left out), `mem_ct2` (v2 so),
  `power_mem` (power read first: is the memory call dear as the wake-up's first ioctl or by itself),
  `power1` (power alone);
- whole samples: `line3` (memory, utilization, power, two clock reads, the line formatted, one write),
  `still` (memory alone, no line: a still sample whose other figures are not due), `still_dot` (the same
  and a 2-byte line), `alt2` (memory each sample; utilization, power and a line every second sample),
  `alt2_dot` (`alt2` with a 2-byte line on the others), `floor` (`mem_ct2` woken by `sleep_fixed`: the least a
  sample that reads memory can cost, no line).

`--rounds` repeats the whole set, the start order reversed each round. Then one-shot nvidia-smi's CPU
(median of `--oneshot`). A torch process holding 2 GiB on GPU 0 (when torch is there). Stdlib only.

    python3 -m benchmarks.gpu_sampler_variants OUT --sampler now=console/host/sources/nvml_sampler.py
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.gpu_sampler_profile import HOLDER, QUERY, child_cpu_us, side_by_side

STAND_IN = """
import ctypes, os, select, signal, sys, time
MODE, interval = {mode!r}, float(sys.argv[1])
WAKE = MODE if MODE in ("select", "poll_in", "sigwait") else "sleep"
WAKE = "sleep_fixed" if MODE in ("sleep_fixed", "floor") else WAKE
if MODE not in ("sleep", "sleep_fixed", "select", "poll_in", "sigwait"):
    import pynvml
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    if MODE == "mem_ct":
        fn = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetMemoryInfo")
        cmem = pynvml.c_nvmlMemory_t()
        ref = ctypes.byref(cmem)
    if MODE in ("mem_ct2", "floor"):
        fn = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetMemoryInfo_v2")
        cmem = pynvml.c_nvmlMemory_v2_t()
        cmem.version = pynvml.nvmlMemory_v2
        ref = ctypes.byref(cmem)
v2 = getattr(sys.modules.get("pynvml"), "nvmlMemory_v2", None)
os.write(1, b'{{"gpus":[],"start":1}}\\n')
if WAKE == "poll_in":
    poller = select.poll()
    poller.register(0, select.POLLIN)
if WAKE == "sigwait":
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
    signal.setitimer(signal.ITIMER_REAL, interval, interval)
n = 0
while True:
    n += 1
    if MODE == "mem":
        used = pynvml.nvmlDeviceGetMemoryInfo(h, version=v2).used
    elif MODE == "mem_v1":
        used = pynvml.nvmlDeviceGetMemoryInfo(h).used
    elif MODE in ("mem_ct", "mem_ct2", "floor"):
        if fn(h, ref) != 0:
            raise SystemExit("memory call failed")
        used = cmem.used
    elif MODE == "power_mem":
        power = pynvml.nvmlDeviceGetPowerUsage(h)
        used = pynvml.nvmlDeviceGetMemoryInfo(h, version=v2).used
    elif MODE == "power1":
        power = pynvml.nvmlDeviceGetPowerUsage(h)
    elif MODE == "line3" or (MODE.startswith("alt2") and n % 2 == 0):
        started = time.perf_counter()
        used = pynvml.nvmlDeviceGetMemoryInfo(h, version=v2).used
        util = pynvml.nvmlDeviceGetUtilizationRates(h).gpu
        power = pynvml.nvmlDeviceGetPowerUsage(h)
        os.write(1, ('{{"t":%r,"gpus":[{{"utilization_pct":%d,"power_w":%r,"index":0,"delta":1}}],"delta":1,'
                     '"cost_us":%r}}\\n' % (time.time(), util, power / 1000.0,
                                           round((time.perf_counter() - started) * 1e6, 1))).encode())
    elif MODE in ("still", "still_dot", "alt2", "alt2_dot"):
        used = pynvml.nvmlDeviceGetMemoryInfo(h, version=v2).used
        if MODE.endswith("_dot"):
            os.write(1, b".\\n")
    if WAKE == "sleep":
        if MODE in ("line3", "alt2", "alt2_dot"):
            time.sleep(max(0.0, interval - (time.perf_counter() - started)) if n % 2 == 0 or MODE == "line3"
                       else interval)
        else:
            started = time.perf_counter()
            time.sleep(max(0.0, interval - (time.perf_counter() - started)))
    elif WAKE == "sleep_fixed":
        time.sleep(interval)
    elif WAKE == "select":
        started = time.perf_counter()
        select.select([], [], [], max(0.0, interval - (time.perf_counter() - started)))
    elif WAKE == "poll_in":
        started = time.perf_counter()
        if poller.poll(max(0, round((interval - (time.perf_counter() - started)) * 1000))):
            raise SystemExit("stdin moved")
    else:
        signal.sigwait([signal.SIGALRM])
"""
STAND_INS = ["sleep", "sleep_fixed", "select", "poll_in", "sigwait", "nvml", "mem", "mem_v1", "mem_ct", "mem_ct2",
             "power_mem", "power1", "line3", "still", "still_dot", "alt2", "alt2_dot", "floor"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--sampler", action="append", default=[], help="LABEL=PATH of a sampler file (repeat)")
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--oneshot", type=int, default=20)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    samplers = {label: Path(path).read_text() for label, path in (s.split("=", 1) for s in args.sampler)}
    py = sys.executable
    report: dict = {"python": sys.version.split()[0], "nproc": os.cpu_count(), "kernel": platform.release(),
                    "loadavg_before": Path("/proc/loadavg").read_text().split()[:3], "rounds": []}
    holder = None
    try:
        import torch  # noqa: F401

        holder = subprocess.Popen([py, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        report["holder"] = holder.stdout.readline().strip() if holder.stdout else None
    except ImportError:
        report["holder"] = "no torch: no process on the GPU"
    try:
        for round_ in range(args.rounds):
            commands = {label: [py, "-u", "-c", src, f"{args.interval:g}"] for label, src in samplers.items()}
            for mode in STAND_INS:
                commands[mode] = [py, "-u", "-c", STAND_IN.format(mode=mode), f"{args.interval:g}"]
            commands["nvidia_smi_lms"] = QUERY.split() + [f"-lms={max(1, int(args.interval * 1000))}"]
            if round_ % 2:
                commands = dict(reversed(commands.items()))
            run = side_by_side(commands, args.interval, args.warmup, args.seconds)
            report["rounds"].append(run)
            print(f"round {round_ + 1}:", json.dumps({k: v["cpu_us_per_sample"] for k, v in run.items()}),
                  flush=True)
        shots = [child_cpu_us(QUERY.split()) for _ in range(args.oneshot)]
        report["nvidia_smi_oneshot_cpu_us"] = {"median": round(statistics.median(shots), 1),
                                               "all": [round(x) for x in shots]}
        print("one-shot nvidia-smi CPU us:", report["nvidia_smi_oneshot_cpu_us"]["median"], flush=True)
        report["nvidia_smi"] = subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout
    finally:
        if holder is not None and holder.stdin is not None:
            holder.stdin.close()
            holder.wait(60)
    report["loadavg_after"] = Path("/proc/loadavg").read_text().split()[:3]
    (args.out / "variants.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
