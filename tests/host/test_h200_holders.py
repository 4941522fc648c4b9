"""Three torch processes (10, 25, 40 GiB) on the lent H200, recorded by benchmarks/gpu_holders.py
(tests/data/h200/holders/, provenance in tests/data/PROVENANCE.md): the console's parsers on the
real outputs, the plain table the simulator prints, the drain as it happened, the fit's weights."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from console.domain.analysis.gpu_drain import DrainWatch
from console.model import GpuDevice, GpuProcess, GpuStatus, Reading
from console.host.parsers.nvidia_smi import attach_processes, parse_compute_apps, parse_gpu_csv, parse_gpu_line
from console.host.parsers.nvidia_smi_table import parse_table
from console.host.parsers.nvml import gpus_from_sample, parse_sampler_line

DATA = Path(__file__).parent.parent / "data" / "h200" / "holders"
REPORT = json.loads((DATA / "report.json").read_text())
UUID = "GPU-d865ede2-4a4a-a3d1-ec6e-2bd9381a37c4"
HELD = {540: 10850, 561: 26210, 579: 41570}  # pid -> MiB, as nvidia-smi --query-compute-apps said


def _truth() -> tuple[dict[str, GpuDevice], dict[str, dict[int, int | None]]]:
    gpus = {g.uuid: g for g in parse_gpu_csv((DATA / "held_query_gpu.txt").read_text()).gpus}
    apps, problems = parse_compute_apps((DATA / "held_apps.txt").read_text())
    assert not problems
    return gpus, {u: {p.pid: p.memory_mib for p in ps} for u, ps in apps.items()}


def test_the_recorded_csv_holds_the_three_processes_keyed_by_uuid() -> None:
    gpus, apps = _truth()
    assert list(gpus) == [UUID] and gpus[UUID].memory_used_mib == 78650 and gpus[UUID].memory_total_mib == 143771
    assert apps == {UUID: HELD}
    # Each holder is its allocation plus its CUDA context: 10/25/40 GiB + 610 MiB.
    for h in REPORT["holders"]:
        assert HELD[h["pid"]] - int(h["gib"] * 1024) == 610


def test_every_console_path_reads_what_nvidia_smi_read_to_the_mib() -> None:
    gpus, apps = _truth()
    # NVML sampler lines (what the console parses over SSH and locally).
    samples = [parse_sampler_line(line) for line in (DATA / "held_nvml_sampler.jsonl").read_text().splitlines()]
    readings = [gpus_from_sample(s) for s in samples if "gpus" in s]
    assert readings
    for devices, problems in readings:
        assert not problems
        for d in devices:
            assert d.memory_used_mib == gpus[d.uuid].memory_used_mib
            assert {p.pid: p.memory_mib for p in d.processes} == apps[d.uuid]
    # The -lms stream's rows with the compute apps attached by UUID.
    rows = [parse_gpu_line(line) for line in (DATA / "held_lms.txt").read_text().splitlines() if line.strip()]
    assert len(rows) >= 3
    by_uuid, _ = parse_compute_apps((DATA / "held_apps.txt").read_text())
    for d in attach_processes(tuple(r for r in rows if r), by_uuid):
        assert d.memory_used_mib == 78650 and {p.pid: p.memory_mib for p in d.processes} == HELD
    # The plain table of the same moment says the same.
    table = parse_table((DATA / "held_nvidia_smi.txt").read_text())
    assert [(g.index, g.memory_used_mib, g.memory_total_mib) for g in table.gpus] == [(0, 78650, 143771)]
    assert {p.pid: p.memory_mib for p in table.processes} == HELD
    # And the console's own readings on the device (local NVML, SSH: NVML, -lms stream, one-shot).
    checks = {c["path"]: c for c in REPORT["checks"]}
    assert set(checks) == {"local/nvml", "ssh/nvml", "ssh/nvidia-smi-stream", "ssh/nvidia-smi"}
    for path, c in checks.items():
        assert c["uuid"] == UUID and c["used_mib"] == 78650, path
        assert {int(k): v for k, v in c["processes"].items()} == HELD, path


@pytest.mark.parametrize("name", ["held_nvidia_smi.txt", "idle_nvidia_smi.txt", "fit_tp4_nvidia_smi.txt",
                                  "../nvidia_smi_full.txt", "../busy/busy_nvidia_smi.txt"])
def test_the_simulators_table_is_the_recorded_table_byte_for_byte(name: str) -> None:
    from console.demo.hostsim.fake_nvidia_smi import render_table

    text = (DATA / name).read_text()
    lines = text.splitlines()
    end = next(i for i, line in enumerate(lines) if i > 12 and line.startswith("+----") and
               lines[i - 1].startswith("|") and ("MiB |" in lines[i - 1] or "No running" in lines[i - 1]))
    table = "\n".join(lines[:end + 1])
    parsed = parse_table(table)
    assert parsed.gpus and parsed.driver == "580.159.04"
    assert "\n".join(render_table(lines[0].rstrip(), parsed.driver, parsed.cuda or "", parsed.gpus,
                                  parsed.processes)) == table


def test_the_simulators_plain_table_shows_the_same_gpus_and_processes_as_its_csv() -> None:
    from console.demo.hostsim import fake_nvidia_smi

    t = 400.0  # the story's old server serving: every GPU holds weights and KV
    out: list[str] = []
    assert fake_nvidia_smi.main([], t, out.append) == 0
    table = parse_table("\n".join(out))
    csv: list[str] = []
    fake_nvidia_smi.main(["--query-gpu=index,uuid,memory.used,memory.total,utilization.gpu,temperature.gpu",
                          "--format=csv,noheader,nounits"], t, csv.append)
    apps: list[str] = []
    fake_nvidia_smi.main(["--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
                          "--format=csv,noheader,nounits"], t, apps.append)
    rows = [line.split(", ") for line in csv]
    assert len(table.gpus) == len(rows) >= 1
    for g, (index, _uuid, used, total, util, temp) in zip(table.gpus, rows, strict=True):
        assert (g.index, g.memory_used_mib, g.memory_total_mib, g.utilization_pct, g.temperature_c) == \
            (int(index), int(used), int(total), int(util), int(temp))
    uuid_index = {r[1]: int(r[0]) for r in rows}
    assert sorted((p.gpu, p.pid, p.memory_mib) for p in table.processes) == sorted(
        (uuid_index[u], int(pid), int(mem)) for u, pid, _name, mem in (line.split(", ") for line in apps))
    assert all(len(line) == 91 for line in out[1:] if line)


def _status(d: dict) -> GpuStatus:
    gpus = tuple(GpuDevice(g["index"], g["name"], g["uuid"], g["memory_used_mib"], g["memory_total_mib"],
                           g["utilization_pct"], g["temperature_c"], g["power_w"], g["power_limit_w"],
                           tuple(GpuProcess(p["pid"], p["name"], p["memory_mib"]) for p in g["processes"]),
                           g.get("error"), g.get("lost_at_s")) for g in d["gpus"])
    return GpuStatus(d["source"], gpus, tuple(d["problems"]), d.get("driver"), d["sampled_at_s"])


def _recorded(path: str) -> list[GpuStatus]:
    return [_status(json.loads(line)) for line in (DATA / f"drain_{path}.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("path", ["nvml", "nvidia-smi-stream"])
def test_the_drain_reports_each_freeing_in_the_order_the_processes_exited(path: str) -> None:
    exits = REPORT["drain"]["exits"]
    assert [e["pid"] for e in exits] == [579, 540, 561]  # the 40 GiB holder first, then 10, then 25
    watch = DrainWatch()
    one_left = None
    for status in _recorded(path):
        watch.update(status)
        if len([f for f in watch.freed if f.pid]) == 2 and one_left is None:
            one_left = (watch.holders, watch.detail())
    procs = [f for f in watch.freed if f.pid is not None]
    assert [(f.pid, f.memory_mib, f.gpu_uuid) for f in procs] == [(e["pid"], HELD[e["pid"]], UUID) for e in exits]
    for f, e, nxt in zip(procs, exits, [*exits[1:], None], strict=True):
        assert f.at_s is not None and f.at_s >= e["asked_at"] - 0.5  # seen after it was told to exit
        assert nxt is None or f.at_s < nxt["asked_at"]  # and before the next one was
    assert one_left is not None
    holders, detail = one_left
    assert [(h.pid, h.memory_mib) for h in holders] == [(561, 26210)]
    assert "still held by GPU 0: pid 561" in detail and "26,210 MiB" in detail
    assert detail.index("pid 579") < detail.index("pid 540")
    assert watch.freed[-1].pid is None and watch.drained() and not watch.holders


def test_a_gpu_whose_processes_are_hidden_still_reports_its_drain_in_order() -> None:
    """A container's other PID namespace: NVML lists no process. Two GPUs free one after the other."""
    def s(t: float, a: int, b: int) -> GpuStatus:
        return GpuStatus("nvml", (GpuDevice(0, "H200", "GPU-a", a, 143771, 0, 30, 100.0, 700.0),
                                  GpuDevice(1, "H200", "GPU-b", b, 143771, 0, 30, 100.0, 700.0)), sampled_at_s=t)
    watch = DrainWatch()
    for status in (s(1, 80000, 60000), s(2, 80000, 4), s(3, 0, 4)):
        watch.update(status)
    assert [(f.gpu_index, f.memory_mib, f.at_s) for f in watch.freed] == [(1, 60000, 2), (0, 80000, 3)]
    assert watch.drained()


async def test_the_swaps_drain_step_names_each_freeing_and_the_holder_left() -> None:
    from console.core.state import HostState, ReadingChanged
    from console.domain.swap import shared_steps
    from console.domain.swap.controller import SwapController

    state = HostState("h")
    runner = SimpleNamespace(state=state, host="h", session=SimpleNamespace(profile=SimpleNamespace(
        drain_timeout_s=30.0, read_only=False)))
    controller = SwapController(runner)
    controller.poll_s = 0.01
    details: list[str] = []
    state.subscribe(lambda e: details.append(e.step.detail) if getattr(e, "step", None) is not None else None)
    statuses = _recorded("nvml")
    since = statuses[0].sampled_at_s - 1
    task = asyncio.create_task(shared_steps.drain(controller, "stop_old", since))
    for status in statuses:
        state.apply(ReadingChanged("h", "gpu", Reading("gpu", status, status.sampled_at_s)))
        if (status.gpus[0].memory_used_mib or 0) > 1024:
            await asyncio.sleep(0.02)  # the step's loop looks while memory is held
    result = await asyncio.wait_for(task, 10)
    assert result.startswith("GPU memory drained")
    assert result.index("pid 579") < result.index("pid 540") < result.index("pid 561")
    assert any("still held by GPU 0: pid 561" in d and "26,210 MiB" in d for d in details)


def test_the_fit_planners_weights_per_gpu_match_a_real_bf16_shard_allocation() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from benchmarks.gpu_holders import shard_tensors, tensor_bytes
    from console.domain.analysis.fit import FitInputs, plan_fit
    from console.demo.hostsim.downloader import qwen122b_config

    cfg = qwen122b_config()
    full = tensor_bytes(shard_tensors(cfg, 1))
    assert full == REPORT["fit"]["full_model_bytes"]
    runs = {r["tp"]: r for r in REPORT["fit"]["runs"]}
    assert set(runs) == {4, 8}
    for tp, run in runs.items():
        assert tensor_bytes(shard_tensors(cfg, tp)) == run["shard_bytes"]  # the shapes that were allocated
        predicted_mib = plan_fit(FitInputs(cfg, full, tp, 139.8, tp=tp)).weights_gib * 1024
        measured = run["measured_weights_mib"]  # nvidia-smi: the process after the weights minus before
        assert abs(predicted_mib - measured) / measured < 0.005, (tp, predicted_mib, measured)


def test_the_sampler_turns_nvml_bytes_into_the_mib_nvidia_smi_prints() -> None:
    """20 memory states of the H200 (benchmarks/gpu_rounding.py): NVML's v2 bytes beside nvidia-smi's
    MiB of the same moment. nvidia-smi rounds up; the nearest MiB was 1 MiB short in 10 of them
    (the 7,898 vs 7,899 and 37,074 vs 37,075 seen in the busy and drain runs)."""
    from console.host.sources.nvml_sampler import mib

    rows = json.loads((DATA.parent / "rounding.json").read_text())
    assert len(rows) == 20
    for r in rows:
        assert r["v2"]["used"] == r["v2_after"]["used"]  # a still moment: both reads agree
        assert mib(r["v2"]["used"]) == r["smi"]["used"]
        assert mib(r["v2"]["total"]) == r["smi"]["total"]
        for pid, n_bytes in r["procs_bytes"].items():
            assert mib(n_bytes) == r["smi_procs_mib"][pid]
    assert sum(round(r["v2"]["used"] / (1 << 20)) != r["smi"]["used"] for r in rows) == 10


def test_a_busy_gpu_and_a_long_process_name_read_as_nvidia_smi_shows_them() -> None:
    """One process at 100 % utilization, started as a 72-character path that the table shortens."""
    busy = DATA.parent / "busy"
    report = json.loads((busy / "busy_report.json").read_text())
    table = parse_table((busy / "busy_nvidia_smi.txt").read_text())
    (gpu,) = table.gpus
    assert (gpu.utilization_pct, gpu.power_w, gpu.perf) == (100, 691, "P0")
    long_name = report["long_python"]
    assert len(long_name) > 32
    names = {p.pid: p.name for p in table.processes}
    assert names[int(report["busy"][1])] == "..." + long_name[-29:]  # nvidia-smi keeps the end
    for row in report["utilization"]:
        assert row["util_pct"] == row["nvidia_smi_util_pct"] == 100, row
    for c in report["checks"]:
        assert c["ok"] and c["processes"] == c["nvidia_smi_processes"], c
    apps, _ = parse_compute_apps((busy / "busy_apps.txt").read_text())
    assert [p.name for ps in apps.values() for p in ps][0] == long_name  # the CSV keeps the whole name


def test_a_nccl_rank_and_a_plain_holder_drain_in_order_and_the_rank_carries_nccls_context() -> None:
    """`gpu_holders.py --ranks 8 --gib 0:10` on the one H200 (the 4-GPU kind was withheld): the
    multi-GPU job's code path with one rank. A rank holds its 8 GiB plus 1,188 MiB of CUDA and NCCL
    context, the context the fit measured (the planner assumes 614 MiB)."""
    d = DATA.parent / "nccl_rank"
    report = json.loads((d / "report.json").read_text())
    rank, plain = report["holders"]
    assert rank["rank"] == 0 and plain["gpu"] == 0
    apps, _ = parse_compute_apps((d / "held_apps.txt").read_text())
    held = {p.pid: p.memory_mib for ps in apps.values() for p in ps}
    assert held == {rank["pid"]: 8 * 1024 + 1188, plain["pid"]: 10 * 1024 + 610}
    assert all(c["ok"] for c in report["checks"]) and len(report["checks"]) == 4
    watch = DrainWatch()
    for line in (d / "drain_nvml.jsonl").read_text().splitlines():
        watch.update(_status(json.loads(line)))
    assert [f.pid for f in watch.freed] == [rank["pid"], plain["pid"], None]
