"""Several processes holding known memory on one GPU: the console's readings, the drain, the fit.

Run on a GPU host (the project's lent H200):
    python3 benchmarks/gpu_holders.py OUT_DIR [--gib 10,25,40] [--exit-order 2,0,1] [--fit-tp 4,8]
    python3 benchmarks/gpu_holders.py OUT_DIR --ranks 8,16,24,32 --gib 2:10 --exit-order 3,1,0,4,2
        (issue 25 on a 4-GPU host: a 4-rank NCCL job, rank r on GPU r holding its GiB, plus one
        process of 10 GiB on GPU 2; `--gib G:S` puts a holder on GPU G. The fit still allocates
        rank 0's shard on GPU 0 only.)

1. Starts one torch process per size in --gib, each holding that many GiB on GPU 0.
2. Records nvidia-smi's own answers (CSV queries, `-lms`, the plain table, `nvidia-smi -q`), then
   reads the GPUs through the console's paths (in-process NVML; over SSH to this host through the
   project's asyncssh host server: the NVML sampler, the `nvidia-smi -lms` stream, one-shot
   nvidia-smi) and compares every GPU (by UUID) and every process (by pid) with nvidia-smi.
3. The drain: the holders exit one by one in --exit-order while two console paths read over SSH;
   `console.domain.analysis.gpu_drain.DrainWatch` reports each freeing and the holders left. Every
   reading is written out so the tests replay it.
4. The fit: one process allocates rank 0's bf16 shard of a 122B-like layer set (the shapes of
   `shard_tensors`, SGLang's TP sharding rules) after a one-rank NCCL init; the GPU memory it holds
   is compared with `console.domain.analysis.fit.plan_fit`'s per-GPU weights and context overhead.
Everything lands in OUT_DIR; stdout gets one JSON summary.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# NVLink multicast stays off (the device notes: it can take the host's GPUs out of service).
for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[_k] = _v

MIB = 1 << 20

HOLDER = """
import os, sys, torch
n = int(float(sys.argv[1]) * (1 << 30))
x = torch.empty(n, dtype=torch.uint8, device=f"cuda:{sys.argv[2] if len(sys.argv) > 2 else 0}")
x.fill_(1)
torch.cuda.synchronize()
print("ready", os.getpid(), torch.cuda.memory_allocated(), torch.cuda.memory_reserved(), flush=True)
sys.stdin.read()
"""

RANK = """
import os, sys, torch, torch.distributed as dist
rank, world, gib = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
torch.cuda.set_device(rank)
dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29556", world_size=world, rank=rank)
t = torch.ones(1 << 20, device=f"cuda:{rank}")
dist.all_reduce(t)
torch.cuda.synchronize()
assert int(t[0].item()) == world, t[0].item()
x = torch.empty(int(gib * (1 << 30)), dtype=torch.uint8, device=f"cuda:{rank}")
x.fill_(1)
torch.cuda.synchronize()
print("ready", os.getpid(), rank, flush=True)
sys.stdin.read()
os._exit(0)  # no NCCL teardown: the ranks leave one by one, as a stopped server's do
"""

SHARD = """
import json, os, sys, torch, torch.distributed as dist
shapes = json.loads(sys.argv[1])
torch.cuda.set_device(0)
dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29555", world_size=1, rank=0)
t = torch.ones(1 << 20, device="cuda:0")
dist.all_reduce(t)
torch.cuda.synchronize()
print(json.dumps({"phase": "context", "pid": os.getpid(), "allocated": torch.cuda.memory_allocated(),
                  "reserved": torch.cuda.memory_reserved()}), flush=True)
sys.stdin.readline()
keep = [torch.empty(s, dtype=torch.bfloat16, device="cuda:0") for s in shapes]
torch.cuda.synchronize()
print(json.dumps({"phase": "weights", "tensors": len(keep), "allocated": torch.cuda.memory_allocated(),
                  "reserved": torch.cuda.memory_reserved()}), flush=True)
sys.stdin.readline()
dist.destroy_process_group()
"""


# -- the model-like layer set ------------------------------------------------------------------
def shard_tensors(config: dict, tp: int) -> list[tuple[str, list[int]]]:
    """Rank 0's bf16 tensors of a Qwen3.5-MoE-like text model under SGLang's TP rules: column- and
    row-parallel projections and the experts' intermediate dim split 1/TP, the vocabulary split
    1/TP, norms and the router replicated, K/V heads replicated when TP exceeds their count.
    (The vision tower and the MTP layer of the real checkpoint are left out.)"""
    tc = config.get("text_config", config)
    h, v = tc["hidden_size"], tc["vocab_size"]
    heads, kvh, hd = tc["num_attention_heads"], tc["num_key_value_heads"], tc["head_dim"]
    kh, vh = tc["linear_num_key_heads"], tc["linear_num_value_heads"]
    kd, vd, kernel = tc["linear_key_head_dim"], tc["linear_value_head_dim"], tc["linear_conv_kernel_dim"]
    experts, inter, shared = tc["num_experts"], tc["moe_intermediate_size"], tc["shared_expert_intermediate_size"]
    interval = tc["full_attention_interval"]
    kv_rank = max(1, kvh // tp)
    out: list[tuple[str, list[int]]] = [("embed_tokens", [v // tp, h]), ("lm_head", [v // tp, h]), ("norm", [h])]
    for i in range(tc["num_hidden_layers"]):
        p = f"layers.{i}."
        out += [(p + "input_layernorm", [h]), (p + "post_attention_layernorm", [h])]
        if (i + 1) % interval == 0:
            out += [(p + "q_proj", [heads * hd * 2 // tp, h]), (p + "k_proj", [kv_rank * hd, h]),
                    (p + "v_proj", [kv_rank * hd, h]), (p + "o_proj", [h, heads * hd // tp]),
                    (p + "q_norm", [hd]), (p + "k_norm", [hd])]
        else:
            out += [(p + "in_proj_qkvz", [(2 * kh * kd + 2 * vh * vd) // tp, h]),
                    (p + "in_proj_ba", [2 * vh // tp, h]),
                    (p + "conv1d", [(2 * kh * kd + vh * vd) // tp, 1, kernel]),
                    (p + "dt_bias", [vh // tp]), (p + "A_log", [vh // tp]), (p + "linear_norm", [vd]),
                    (p + "out_proj", [h, vh * vd // tp])]
        out += [(p + "router", [experts, h]), (p + "experts.w13", [experts, 2 * inter // tp, h]),
                (p + "experts.w2", [experts, h, inter // tp]),
                (p + "shared_expert.gate_up", [2 * shared // tp, h]), (p + "shared_expert.down", [h, shared // tp]),
                (p + "shared_expert_gate", [1, h])]
    return out


def tensor_bytes(tensors: list[tuple[str, list[int]]], itemsize: int = 2) -> int:
    total = 0
    for _, shape in tensors:
        n = 1
        for d in shape:
            n *= d
        total += n * itemsize
    return total


# -- helpers -----------------------------------------------------------------------------------
def sh(cmd: str) -> str:
    p = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    return p.stdout + p.stderr


def truth_now() -> dict:
    from console.host.parsers.nvidia_smi import parse_compute_apps, parse_gpu_csv, query_apps_command, query_gpu_command
    from console.cli.snapshot import to_jsonable

    gpu_csv = sh(query_gpu_command())
    apps_csv = sh(query_apps_command())
    return {"gpu_csv": gpu_csv, "apps_csv": apps_csv, "gpus": to_jsonable(parse_gpu_csv(gpu_csv).gpus),
            "apps": to_jsonable(parse_compute_apps(apps_csv)[0])}


def compare(label: str, data: dict | None, truth: dict) -> list[dict]:
    """Every GPU by UUID and every process by pid against nvidia-smi's."""
    rows: list[dict] = []
    if not data:
        return [{"path": label, "ok": False, "detail": "no reading"}]
    smi = {g["uuid"]: g for g in truth["gpus"]}
    for g in data["gpus"]:
        t = smi.get(g["uuid"])
        if t is None:
            rows.append({"path": label, "uuid": g["uuid"], "ok": False, "detail": "UUID not in nvidia-smi"})
            continue
        smi_procs = {p["pid"]: p["memory_mib"] for p in truth["apps"].get(g["uuid"], [])}
        procs = {p["pid"]: p["memory_mib"] for p in g["processes"]}
        rows.append({"path": label, "uuid": g["uuid"], "index": g["index"], "used_mib": g["memory_used_mib"],
                     "nvidia_smi_used_mib": t["memory_used_mib"],
                     "diff_mib": abs((g["memory_used_mib"] or 0) - (t["memory_used_mib"] or 0)),
                     "processes": {str(k): v for k, v in sorted(procs.items())},
                     "nvidia_smi_processes": {str(k): v for k, v in sorted(smi_procs.items())},
                     "ok": abs((g["memory_used_mib"] or 0) - (t["memory_used_mib"] or 0)) <= 2
                     and procs == smi_procs})
    return rows


async def read_paths(report: dict, transport, local: bool, label: str) -> None:
    from console.cli.snapshot import to_jsonable
    from console.host.sources.gpu import PATHS, GpuSource

    for path in PATHS if not local else ("nvml",):
        source = GpuSource(transport, local=local, interval_s=0.5, apps_every_s=0.5)
        source.unavailable.update({p: "skipped: validating one path" for p in PATHS if p != path})
        got = []

        async def collect(source: GpuSource = source, got: list = got) -> None:  # noqa: B006
            async for r in source.readings():
                got.append(r)
                if r.data is not None and len(got) >= 4 or r.error:
                    return
        try:
            await asyncio.wait_for(collect(), 20)
        except asyncio.TimeoutError:
            pass
        truth = truth_now()
        last = got[-1] if got else None
        name = f"{label}/{path}"
        report["readings"][name] = to_jsonable(last)
        report["checks"] += compare(name, to_jsonable(last.data) if last and last.data else None, truth)


async def drain(report: dict, transport, holders: list[dict], order: list[int], out: Path) -> None:
    from console.domain.analysis.gpu_drain import DrainWatch
    from console.cli.snapshot import to_jsonable
    from console.host.sources.gpu import PATHS, GpuSource

    result: dict = {"exits": [], "paths": {}}
    stop = asyncio.Event()

    async def follow(path: str) -> None:
        source = GpuSource(transport, local=False, interval_s=0.25, apps_every_s=0.25)
        source.unavailable.update({p: "skipped: one path per watch" for p in PATHS if p != path})
        watch = DrainWatch()
        log = (out / f"drain_{path}.jsonl").open("w")
        events: list[dict] = []
        mid: list[dict] = []
        result["paths"][path] = {"events": events, "holders_between": mid}
        async for r in source.readings():
            if r.data is None:
                continue
            log.write(json.dumps(to_jsonable(r.data)) + "\n")
            for f in watch.update(r.data):
                events.append({**to_jsonable(f), "detail_after": watch.detail()})
            if stop.is_set():
                break
            if result.get("mark") and not mid:
                mid.append({"at": time.time(), "holders": [to_jsonable(h) for h in watch.holders],
                            "detail": watch.detail()})
        log.close()
        result["paths"][path]["final_detail"] = watch.detail()
        result["paths"][path]["drained"] = watch.drained()

    tasks = [asyncio.create_task(follow(p)) for p in ("nvml", "nvidia-smi-stream")]
    truth_log = subprocess.Popen(
        "exec nvidia-smi --query-gpu=timestamp,index,uuid,memory.used --format=csv,noheader,nounits -lms 250",
        shell=True, stdout=(out / "drain_truth_lms.csv").open("w"))
    await asyncio.sleep(3)
    for n, i in enumerate(order):
        h = holders[i]
        before = time.time()
        h["proc"].stdin.close()
        await asyncio.to_thread(h["proc"].wait, 30)
        result["exits"].append({"pid": h["pid"], "gib": h["gib"], "asked_at": before, "exited_at": time.time()})
        await asyncio.sleep(3)
        if n == len(order) - 2:
            result["mark"] = True  # one holder left: record what the watch names
            await asyncio.sleep(1)
            result["apps_one_left"] = sh("nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory "
                                         "--format=csv,noheader,nounits")
    await asyncio.sleep(1)
    stop.set()
    await asyncio.wait(tasks, timeout=10)
    truth_log.kill()
    result.pop("mark", None)
    report["drain"] = result


def fit(report: dict, tps: list[int], out: Path) -> None:
    from console.domain.analysis.fit import CONTEXT_OVERHEAD_GIB
    from console.demo.hostsim.downloader import qwen122b_config

    cfg = qwen122b_config()
    full = tensor_bytes(shard_tensors(cfg, 1))
    report["fit"] = {"full_model_bytes": full, "context_overhead_gib_assumed": CONTEXT_OVERHEAD_GIB, "runs": []}
    for tp in tps:
        try:
            _fit_one(report, cfg, full, tp, out)
        except Exception as exc:  # noqa: BLE001 - one failed run is reported, the rest still run
            report["fit"]["runs"].append({"tp": tp, "error": repr(exc)})


def _fit_one(report: dict, cfg: dict, full: int, tp: int, out: Path) -> None:
    from console.domain.analysis.fit import FitInputs, plan_fit

    shapes = [s for _, s in shard_tensors(cfg, tp)]
    p = subprocess.Popen([sys.executable, "-c", SHARD, json.dumps(shapes)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdin and p.stdout
    ctx = json.loads(p.stdout.readline())
    time.sleep(1)
    t_ctx = truth_now()
    p.stdin.write("go\n")
    p.stdin.flush()
    w = json.loads(p.stdout.readline())
    time.sleep(1)
    t_w = truth_now()
    table = sh("nvidia-smi")
    p.stdin.write("end\n")
    p.stdin.flush()
    p.wait(60)

    def proc_mib(t: dict, pid: int) -> int | None:
        return next((q["memory_mib"] for ps in t["apps"].values() for q in ps if q["pid"] == pid), None)

    r = plan_fit(FitInputs(cfg, full, tp, 139.8, tp=tp))
    run = {"tp": tp, "pid": ctx["pid"], "tensors": w["tensors"],
           "shard_bytes": tensor_bytes(shard_tensors(cfg, tp)),
           "predicted_weights_gib": r.weights_gib, "predicted_weights_mib": r.weights_gib * 1024,
           "context_process_mib": proc_mib(t_ctx, ctx["pid"]),
           "context_gpu_used_mib": t_ctx["gpus"][0]["memory_used_mib"],
           "weights_process_mib": proc_mib(t_w, ctx["pid"]),
           "weights_gpu_used_mib": t_w["gpus"][0]["memory_used_mib"],
           "torch_allocated": w["allocated"] - ctx["allocated"], "torch_reserved": w["reserved"] - ctx["reserved"],
           "apps_csv_context": t_ctx["apps_csv"], "apps_csv_weights": t_w["apps_csv"]}
    if run["weights_process_mib"] and run["context_process_mib"]:
        run["measured_weights_mib"] = run["weights_process_mib"] - run["context_process_mib"]
    report["fit"]["runs"].append(run)
    (out / f"fit_tp{tp}_nvidia_smi.txt").write_text(table)


async def main(out: Path, gibs: list[tuple[int, float]], order: list[int], tps: list[int],
               ranks: list[float] | None = None) -> int:
    from console.demo.hostsim import HostSimulator
    from console.host.transport import LocalTransport
    from console.host.transport.ssh import SshOptions, SshTransport

    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"host": os.uname().nodename, "gib": [g for _, g in gibs], "exit_order": order,
                    "ranks": ranks or [], "readings": {}, "checks": [], "started_at": time.time()}
    ranks = ranks or []
    if sorted(order) != list(range(len(ranks) + len(gibs))):
        print(f"--exit-order must name each of the {len(ranks) + len(gibs)} holders once", file=sys.stderr)
        return 2
    import torch

    gpus = torch.cuda.device_count()
    if len(ranks) > gpus or any(g >= gpus for g, _ in gibs):
        print(f"this host has {gpus} GPU(s): --ranks {len(ranks)} / --gib GPU indexes need more", file=sys.stderr)
        return 2
    (out / "idle_nvidia_smi.txt").write_text(sh("nvidia-smi"))
    (out / "idle_nvidia_smi_q.txt").write_text(sh("nvidia-smi -q"))
    holders = []
    if ranks:
        procs = [subprocess.Popen([sys.executable, "-c", RANK, str(r), str(len(ranks)), str(gib)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                 for r, gib in enumerate(ranks)]  # all at once: NCCL's init waits for every rank
        for r, (p, gib) in enumerate(zip(procs, ranks, strict=True)):
            assert p.stdout
            holders.append({"gib": gib, "gpu": r, "rank": r, "pid": p.pid, "proc": p,
                            "ready": p.stdout.readline().split()})
    for spec in gibs:
        gpu, gib = spec
        p = subprocess.Popen([sys.executable, "-c", HOLDER, str(gib), str(gpu)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        assert p.stdout
        line = p.stdout.readline().split()
        holders.append({"gib": gib, "gpu": gpu, "pid": p.pid, "proc": p, "ready": line})
    report["holders"] = [{k: v for k, v in h.items() if k != "proc"} for h in holders]
    time.sleep(1.5)
    truth = truth_now()
    report["truth"] = truth
    (out / "held_query_gpu.txt").write_text(truth["gpu_csv"])
    (out / "held_apps.txt").write_text(truth["apps_csv"])
    (out / "held_nvidia_smi.txt").write_text(sh("nvidia-smi"))
    (out / "held_nvidia_smi_q.txt").write_text(sh("nvidia-smi -q"))
    (out / "held_lms.txt").write_text(sh("timeout 1.6 nvidia-smi --query-gpu=index,name,uuid,memory.used,"
                                         "memory.total,utilization.gpu,temperature.gpu,power.draw,power.limit "
                                         "--format=csv,noheader,nounits -lms 500"))
    from console.host.sources.gpu import SAMPLER_SOURCE

    (out / "held_nvml_sampler.jsonl").write_text(sh(f"timeout 2.5 {sys.executable} -u -c "
                                                    f"{__import__('shlex').quote(SAMPLER_SOURCE)} 1"))
    local = LocalTransport()
    await read_paths(report, local, True, "local")
    await local.close()
    async with HostSimulator(simulate_tools=False) as server:
        transport = SshTransport(SshOptions(
            "127.0.0.1", port=server.port, user="root", identity=str(server.client_key_path),
            known_hosts=str(server.known_hosts_path), ssh_config=()))
        await transport.connect()
        try:
            await read_paths(report, transport, False, "ssh")
            await drain(report, transport, holders, order, out)
        except Exception as exc:  # noqa: BLE001 - the report says what broke; the fit still runs
            import traceback

            report["error"] = traceback.format_exc()
            print("ssh/drain failed:", repr(exc), flush=True)
        await transport.close()
    for h in holders:
        if h["proc"].poll() is None:
            h["proc"].kill()
    fit(report, tps, out)
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    summary = {"checks": [{k: c.get(k) for k in ("path", "index", "used_mib", "nvidia_smi_used_mib", "processes",
                                                 "nvidia_smi_processes", "ok")} for c in report["checks"]],
               "drain": {k: {"events": [(e["pid"], e["memory_mib"], round(e["at_s"] or 0, 2)) for e in v["events"]],
                             "between": v["holders_between"][0]["detail"] if v["holders_between"] else None,
                             "drained": v.get("drained")}
                         for k, v in report.get("drain", {}).get("paths", {}).items()},
               "exits": [(e["pid"], e["gib"], round(e["exited_at"], 2))
                         for e in report.get("drain", {}).get("exits", [])],
               "fit": [{k: r.get(k) for k in ("tp", "predicted_weights_mib", "measured_weights_mib",
                                              "context_process_mib", "torch_allocated", "torch_reserved")}
                       for r in report["fit"]["runs"]]}
    print(json.dumps(summary, indent=1, default=str))
    return 0 if all(c["ok"] for c in report["checks"]) else 1


if __name__ == "__main__":
    a = sys.argv[1:]

    def opt(name: str, default: str) -> str:
        return a[a.index(name) + 1] if name in a else default
    def holder(spec: str) -> tuple[int, float]:
        gpu, _, gib = spec.rpartition(":")
        return int(gpu or 0), float(gib)

    try:
        specs = [holder(x) for x in opt("--gib", "10,25,40").split(",") if x]
        rank_gib = [float(x) for x in opt("--ranks", "").split(",") if x]
        default_order = "2,0,1" if not rank_gib and len(specs) == 3 else ",".join(
            str(i) for i in reversed(range(len(rank_gib) + len(specs))))
        exit_order = [int(x) for x in opt("--exit-order", default_order).split(",")]
        fit_tps = [int(x) for x in opt("--fit-tp", "4,8").split(",") if x]
    except ValueError as exc:
        print(f"gpu_holders: bad option value: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    raise SystemExit(asyncio.run(main(Path(a[0]), specs, exit_order, fit_tps, rank_gib)))
