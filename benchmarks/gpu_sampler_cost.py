"""(On a GPU host) the host's CPU per GPU sample, the whole process, against nvidia-smi's.

Each sampler runs as the console starts it on a host (`python3 -u -c SOURCE INTERVAL`, its lines
read from a pipe), and so does `nvidia-smi --query-gpu=… -lms INTERVAL` (the console's
nvidia-smi-stream path); its CPU is read from /proc/PID/schedstat (nanoseconds; /proc/PID/stat's
ticks where there is none) after a warm-up of `--warmup` samples and again `--samples` later:
the steady cost per sample, the process's start not in it (the start is said apart). The one-shot
path (`nvidia-smi --query-gpu=…` once per sample, the console's last fallback) is timed as the
CPU of each child from getrusage. Rounds are interleaved. A torch process holding 2 GiB on GPU 0
(when torch is there) gives every sample a process to name. Stdlib only: run it with the host's
python3, e.g. `python3 benchmarks/gpu_sampler_cost.py OUT --sampler now=console/host/sources/nvml_sampler.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

QUERY = ("nvidia-smi --query-gpu=index,name,uuid,memory.used,memory.total,utilization.gpu,"
         "temperature.gpu,power.draw,power.limit --format=csv,noheader,nounits")
HOLDER = """
import sys, torch
x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda:0"); x.fill_(1); torch.cuda.synchronize()
print("ready", flush=True); sys.stdin.read()
"""


def cpu_ns(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int((int(fields[11]) + int(fields[12])) * 1e9 / os.sysconf("SC_CLK_TCK"))


def writes(pid: int) -> int | None:
    """write(2) calls so far (/proc/PID/io's syscw)."""
    try:
        return int(dict(x.split(": ") for x in Path(f"/proc/{pid}/io").read_text().splitlines())["syscw"])
    except (OSError, KeyError, ValueError):
        return None


def stream(cmd: list[str], warmup: int, samples: int, is_sample, keep: int = 0,
           interval_s: float | None = None) -> dict:
    """With `interval_s`, the steady part lasts `samples` intervals of wall time and its CPU is
    divided by the samples taken in it (wall / interval): a sampler that sends no line for a
    sample where nothing moved still pays for that sample's read. Without it, a sample is a line."""
    started = time.perf_counter()
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        return {"error": str(exc)}
    assert p.stdout is not None
    lines: list[bytes] = []
    count, at_first, at_warm, bytes_steady, writes0 = 0, None, None, 0, None
    t_warm = 0.0
    try:
        while (count < warmup + samples if interval_s is None or count < warmup
               else time.perf_counter() - t_warm < samples * interval_s):
            line = p.stdout.readline()
            if not line:
                return {"error": p.stderr.read().decode(errors="replace")[-500:] if p.stderr else "ended"}
            if keep and len(lines) < keep:
                lines.append(line)
            if not is_sample(line):
                continue
            count += 1
            if count == 1:
                at_first = cpu_ns(p.pid)
            if count == warmup:
                at_warm, t_warm = cpu_ns(p.pid), time.perf_counter()
                writes0 = writes(p.pid)
            elif count > warmup:
                bytes_steady += len(line)
        at_end, t_end = cpu_ns(p.pid), time.perf_counter()
        writes_end = writes(p.pid)
    finally:
        p.kill()
        p.wait()
    assert at_first is not None and at_warm is not None
    sent = count - warmup
    if interval_s is not None:
        samples = max(1, round((t_end - t_warm) / interval_s))
    return {
        "start_cpu_ms": round(at_first / 1e6, 2), "start_wall_s": round(t_warm - started, 2),
        "samples": samples, "lines_sent": sent, "cpu_us_per_sample": round((at_end - at_warm) / 1e3 / samples, 1),
        "bytes_per_sample": round(bytes_steady / samples, 1),
        "writes_per_sample": (None if writes0 is None or writes_end is None
                              else round((writes_end - writes0) / samples, 2)),
        "wall_s": round(t_end - t_warm, 2),
        "lines": [x.decode(errors="replace") for x in lines],
    }


def oneshot(n: int) -> dict:
    cpus, walls = [], []
    for _ in range(n):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        try:
            subprocess.run(QUERY.split(), capture_output=True, check=False)
        except OSError as exc:
            return {"error": str(exc)}
        walls.append((time.perf_counter() - t) * 1e3)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1e6)
    return {"samples": n, "cpu_us_per_sample": round(statistics.median(cpus), 1),
            "cpu_us_mean": round(statistics.mean(cpus), 1), "wall_ms_p50": round(statistics.median(walls), 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--sampler", action="append", default=[], help="LABEL=PATH of a sampler file (repeat)")
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--samples", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--oneshot", type=int, default=20)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    samplers = dict(s.split("=", 1) for s in args.sampler)
    report: dict = {"interval_s": args.interval, "python": sys.version.split()[0],
                    "loadavg_before": Path("/proc/loadavg").read_text().split()[:3], "rounds": []}
    holder = None
    try:
        import torch  # noqa: F401

        holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        report["holder"] = holder.stdout.readline().strip() if holder.stdout else None
        report["holder_pid"] = holder.pid
    except ImportError:
        report["holder"] = "no torch: no process on the GPU"
    try:
        try:
            report["nvidia_smi"] = subprocess.run(["nvidia-smi"], capture_output=True, text=True).stdout
        except OSError as exc:
            report["nvidia_smi"] = str(exc)
        for r in range(args.rounds):
            row: dict = {}
            for label, path in samplers.items():
                source = Path(path).read_text()
                row[label] = stream([sys.executable, "-u", "-c", source, f"{args.interval:g}"],
                                    args.warmup, args.samples, lambda line: b'"gpus"' in line,
                                    keep=40 if r == 0 else 0, interval_s=args.interval)
                print(label, {k: v for k, v in row[label].items() if k != "lines"}, flush=True)
            ms = max(1, int(args.interval * 1000))
            row["nvidia_smi_lms"] = stream(QUERY.split() + [f"-lms={ms}"], args.warmup, args.samples,
                                           lambda line: line.count(b",") >= 8, keep=10 if r == 0 else 0)
            print("nvidia_smi_lms", {k: v for k, v in row["nvidia_smi_lms"].items() if k != "lines"}, flush=True)
            row["nvidia_smi_oneshot"] = oneshot(args.oneshot)
            print("nvidia_smi_oneshot", row["nvidia_smi_oneshot"], flush=True)
            report["rounds"].append(row)
    finally:
        if holder is not None and holder.stdin is not None:
            holder.stdin.close()
            holder.wait(60)
    for label in samplers:
        for r, row in enumerate(report["rounds"]):
            if r == 0 and row[label].get("lines"):
                (args.out / f"sampler_{label}.jsonl").write_text("".join(row[label]["lines"]))
    report["loadavg_after"] = Path("/proc/loadavg").read_text().split()[:3]
    summary = {}
    for key in [*samplers, "nvidia_smi_lms", "nvidia_smi_oneshot"]:
        summary[key] = [row[key].get("cpu_us_per_sample") for row in report["rounds"]]
    report["summary_cpu_us_per_sample"] = summary
    (args.out / "sampler_cost.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
