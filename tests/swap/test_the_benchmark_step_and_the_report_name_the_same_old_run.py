"""The benchmark step's words and the report name the same run of the old model: the one like-workload
rule (the newest run of the old model, before the swap began, of the new run's workload). The host's
history here has, before the swap, a run of that workload, then a newer run of another workload, then a
newest one whose requests partly failed: the old model's *last* run is neither comparable nor a result,
and neither the plan nor the report may name it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.core.events import BenchChanged
from console.domain.swap.report import report_from_recording
from tests.kit.swap import BENCH_PLAN, Driven, driven_host
from tests.kit.swap import run_step as _run
from tests.kit.swap import until as _until

SPEED = 8.0


def _run_record(host: str, at: float, tput: float, workload: tuple[int, int, int, int], completed: int) -> dict:
    c, n, i, o = workload
    return {"model": "qwen3.5-122b-old", "host": host, "timestamp": at, "dataset_name": "random",
            "max_concurrency": c, "num_prompts": n, "random_input_len": i, "random_output_len": o,
            "completed": completed, "output_throughput": tput, "stopped": False}


@pytest.fixture
async def driven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Driven]:
    async with driven_host(tmp_path, monkeypatch, speed=SPEED) as d:
        yield d


async def test_the_benchmark_step_names_the_run_the_report_compares(driven: Driven) -> None:
    d = driven
    swap = d.runner.swap
    host = d.runner.session.transport.label
    now = time.time()
    like, other = BENCH_PLAN[0], (64, 128, 1024, 1024)
    history = (_run_record(host, now - 300, 111.0, like, like[1]),  # the same workload as the swap's benchmark
               _run_record(host, now - 200, 222.0, other, other[1]),  # newer, another workload
               _run_record(host, now - 100, 333.0, like, like[1] - 1))  # newest: one request failed
    await _until(lambda: d.state.data("gpu") is not None and d.state.data("service") is not None, 30, "readings")
    d.state.apply(BenchChanged(d.state.host, "history", runs=history))
    await _run(d, "install", 60)
    for check in swap.evaluate_gate():
        if not check.passes:
            assert swap.override(check.name, check.name) is None
    await _run(d, "stop_old", 60)
    await _run(d, "start_new", 120)
    assert d.state.swap.steps["start_new"].state == "done", d.state.swap.steps["start_new"]
    await _run(d, "benchmark", 120)
    step = d.state.swap.steps["benchmark"]
    assert step.state == "done", step

    d.recorder.flush()
    r = report_from_recording(d.recorder.path)
    compared = r["bench"]["compared"]
    assert compared is not None and compared["before"]["output_throughput"] == 111.0, r["bench"]
    # The plan's words name that run (111 tok/s, its workload), never the last one (333) nor the other (222).
    assert "did 111 tok/s on the same workload (c=2 · 64/32)" in step.detail, step.detail
    assert "333" not in step.detail and "222" not in step.detail, step.detail
