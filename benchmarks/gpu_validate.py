"""Validate the GPU source against a real NVIDIA host, and measure what each path costs.

Run on a GPU host (the project's H200 device):
    python3 benchmarks/gpu_validate.py OUT_DIR [--alloc-gib 40]

It holds a known allocation on GPU 0 with torch, records nvidia-smi's own answers, then reads the
GPUs through every path of `GpuSource` (in-process NVML; and over SSH to this same host through
an asyncssh server on 127.0.0.1: the NVML sampler stream, the nvidia-smi stream and one-shot
nvidia-smi) and compares memory and processes with nvidia-smi. Costs: host CPU per sample of
each path, and the latency from sample to the source's reading.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from console.host.parsers.nvidia_smi import (  # noqa: E402
    parse_compute_apps,
    parse_gpu_csv,
    query_apps_command,
    query_gpu_command,
)
from console.cli.snapshot import to_jsonable  # noqa: E402
from console.host.sources.gpu import PATHS, SAMPLER_SOURCE, GpuSource  # noqa: E402
from console.host.transport import LocalTransport  # noqa: E402

HOLDER = """
import sys, torch
n = int(float(sys.argv[1]) * (1 << 30))
x = torch.empty(n, dtype=torch.uint8, device="cuda:0")
x.fill_(1)
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.read()
"""


def sh(cmd: str) -> tuple[int, str, str, float, float]:
    """(rc, stdout, stderr, wall_s, child_cpu_s)"""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    p = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return p.returncode, p.stdout, p.stderr, wall, cpu


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stream_cost(cmd: list[str], seconds: float, count_line: str) -> dict[str, float]:
    """CPU seconds per sample of a long-running sampler, from its /proc stat."""
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    except OSError as exc:
        return {"error": str(exc)}  # type: ignore[dict-item]
    lines = 0
    started = time.time()
    assert p.stdout is not None
    while time.time() - started < seconds:
        line = p.stdout.readline()
        if not line:
            break
        if count_line in line:
            lines += 1
    cpu = proc_cpu_s(p.pid)
    p.kill()
    p.wait()
    return {"samples": lines, "cpu_s": cpu, "cpu_ms_per_sample": 1000 * cpu / max(lines, 1)}


async def ssh_paths(report: dict) -> None:
    from console.demo.hostsim import HostSimulator
    from console.host.transport.ssh import SshOptions, SshTransport

    async with HostSimulator(simulate_tools=False) as server:
        transport = SshTransport(SshOptions(
            "127.0.0.1", port=server.port, user="root", identity=str(server.client_key_path),
            known_hosts=str(server.known_hosts_path), ssh_config=()))
        await transport.connect()
        for path in PATHS:
            print("ssh path", path, flush=True)
            source = GpuSource(transport, local=False, interval_s=0.5)
            source.unavailable.update({p: "skipped: validating one path" for p in PATHS if p != path})
            readings = []
            latencies = []
            async def collect(source: GpuSource = source, readings: list = readings,  # noqa: B006
                              latencies: list = latencies, path: str = path) -> None:  # noqa: B006
                async for r in source.readings():
                    readings.append(r)
                    if r.data and r.data.sampled_at_s:
                        latencies.append(r.ok_at_s - r.data.sampled_at_s)
                    if len(readings) >= 6 or (r.error and path in source.unavailable):
                        return
            try:
                await asyncio.wait_for(collect(), 15)
            except asyncio.TimeoutError:
                pass
            last = readings[-1] if readings else None
            report["ssh"][path] = {
                "reading": to_jsonable(last),
                "unavailable": source.unavailable.get(path),
                "sampler_cost_us": list(source.sample_cost_us)[-5:],
            }
        print("latency", flush=True)
        # Latency from the sampler's own timestamp to our reading, over SSH.
        stream = await transport.stream(f"exec python3 -u -c {__import__('shlex').quote(SAMPLER_SOURCE)} 0.2")
        lat = []
        async for raw in stream:
            rec = json.loads(raw)
            if "t" in rec:
                lat.append((time.time() - rec["t"]) * 1000)
            if len(lat) >= 25:
                break
        await stream.close()
        report["ssh"]["nvml_sample_to_reading_ms"] = {
            "p50": statistics.median(lat) if lat else None, "max": max(lat) if lat else None}
        await transport.close()


async def main(out: Path, alloc_gib: float) -> int:
    print("gpu_validate: start", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"host": os.uname().nodename, "alloc_gib": alloc_gib, "ssh": {}}
    holder = None
    try:
        import torch  # noqa: F401

        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(alloc_gib)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert holder.stdout is not None
        report["holder_ready"] = holder.stdout.readline().strip()
        report["holder_pid"] = holder.pid
    except ImportError:
        report["holder_ready"] = "no torch here: no allocation"
    time.sleep(1.0)

    rc, gpu_csv, err, wall, cpu = sh(query_gpu_command())
    (out / "nvidia_smi_query_gpu.txt").write_text(gpu_csv + err)
    rc2, apps_csv, err2, _, _ = sh(query_apps_command())
    (out / "nvidia_smi_apps.txt").write_text(apps_csv + err2)
    with_units = query_gpu_command().split(" ", 1)[1].replace(",noheader,nounits", "")
    _, full, _, _, _ = sh("nvidia-smi; echo; nvidia-smi " + with_units)
    (out / "nvidia_smi_full.txt").write_text(full)
    _, lms, _, _, _ = sh("timeout 1.6 " + query_gpu_command(500))
    (out / "nvidia_smi_lms.txt").write_text(lms)
    report["nvidia_smi"] = {"rc": rc, "gpus": to_jsonable(parse_gpu_csv(gpu_csv)),
                            "apps": to_jsonable(parse_compute_apps(apps_csv)[0])}

    # One-shot nvidia-smi cost (what each poll would cost on the host).
    walls, cpus = [], []
    for _ in range(20):
        _, _, _, w, c = sh(query_gpu_command())
        walls.append(w * 1000)
        cpus.append(c * 1000)
    report["cost"] = {"oneshot_nvidia_smi": {"wall_ms_p50": statistics.median(walls),
                                             "cpu_ms_p50": statistics.median(cpus)}}
    # In-process NVML cost per sample.
    try:
        from console.host.sources import nvml_sampler

        pynvml, handles, driver = nvml_sampler.open_nvml()
        started_cpu = time.process_time()
        started = time.perf_counter()
        n = 2000
        for _ in range(n):
            nvml_sampler.sample(pynvml, handles)
        report["cost"]["nvml_in_process"] = {
            "wall_us_per_sample": (time.perf_counter() - started) / n * 1e6,
            "cpu_us_per_sample": (time.process_time() - started_cpu) / n * 1e6,
            "gpus": len(handles), "driver": driver}
    except Exception as exc:  # noqa: BLE001
        report["cost"]["nvml_in_process"] = {"error": str(exc)}
    report["cost"]["nvml_sampler_process"] = stream_cost(
        [sys.executable, "-u", "-c", SAMPLER_SOURCE, "0.05"], 4, '"gpus"')
    report["cost"]["nvidia_smi_lms_process"] = stream_cost(
        ["nvidia-smi", *query_gpu_command(50).split()[1:]], 4, ", ")

    # The sampler's own lines, as test data.
    _, jsonl, _, _, _ = sh(f"timeout 2.5 {sys.executable} -u -c {__import__('shlex').quote(SAMPLER_SOURCE)} 1")
    (out / "nvml_sampler.jsonl").write_text(jsonl)

    # Local path: pynvml in-process.
    local = LocalTransport()
    src = GpuSource(local, local=True)
    report["local"] = to_jsonable(await src.first_reading())
    await local.close()
    await ssh_paths(report)

    if holder is not None:
        holder.stdin.close()  # type: ignore[union-attr]
        holder.wait(30)

    # Compare every path's GPU 0 with nvidia-smi's.
    truth = {g["index"]: g for g in report["nvidia_smi"]["gpus"]["gpus"]}
    checks = []
    def compare(label: str, reading: dict | None) -> None:
        data = (reading or {}).get("data")
        if not data:
            checks.append({"path": label, "ok": False, "detail": (reading or {}).get("error")})
            return
        for g in data["gpus"]:
            t = truth.get(g["index"])
            if t is None:
                continue
            diff = abs((g["memory_used_mib"] or 0) - (t["memory_used_mib"] or 0))
            procs = [p for p in g["processes"] if p["pid"] == report.get("holder_pid")]
            checks.append({"path": label, "gpu": g["index"], "used_mib": g["memory_used_mib"],
                           "nvidia_smi_used_mib": t["memory_used_mib"], "diff_mib": diff,
                           "total_matches": g["memory_total_mib"] == t["memory_total_mib"],
                           "holder_process_mib": procs[0]["memory_mib"] if procs else None,
                           "source": data["source"],
                           "ok": diff <= 2 and g["memory_total_mib"] == t["memory_total_mib"]})
    compare("local", report["local"])
    for path in PATHS:
        compare(f"ssh/{path}", report["ssh"][path]["reading"])
    report["checks"] = checks
    (out / "validation.json").write_text(json.dumps(report, indent=2, default=str))
    for c in checks:
        print(json.dumps(c))
    print(json.dumps(report["cost"], indent=1))
    print("latency", report["ssh"].get("nvml_sample_to_reading_ms"))
    return 0 if checks and all(c["ok"] for c in checks) else 1


if __name__ == "__main__":
    args = sys.argv[1:]
    gib = float(args[args.index("--alloc-gib") + 1]) if "--alloc-gib" in args else 40.0
    raise SystemExit(asyncio.run(main(Path(args[0]), gib)))
