"""The GPU sampler's lines as a real H200 printed them (tests/data/h200/sampler_cost/, recorded by
`benchmarks/gpu_sampler_cost.py` on the lent H200): the console's merge makes every line whole again,
and the lines of what changed carry a quarter of the bytes of whole ones."""

from __future__ import annotations

import json
from pathlib import Path

from console.host.parsers.nvml import gpus_from_sample, merge_sample, parse_sampler_line

DATA = Path(__file__).resolve().parent.parent / "data" / "h200" / "sampler_cost"


def _samples(name: str) -> list[dict]:
    lines = (DATA / name).read_text().splitlines()
    assert json.loads(lines[0]) == {"driver": "580.159.04", "count": 1}
    return [parse_sampler_line(line) for line in lines[1:]]


def test_every_line_of_what_changed_merges_into_a_whole_h200_reading() -> None:
    known: dict[int, dict] = {}
    deltas = 0
    whole_keys = set(_samples("sampler_before.jsonl")[0]["gpus"][0])
    for record in _samples("sampler_now.jsonl"):
        deltas += bool(record.get("delta"))
        gpus, problems = gpus_from_sample(merge_sample(known, record))
        assert problems == ()
        assert set(known[0]) == whole_keys  # nothing missing after a merge
        (gpu,) = gpus
        assert gpu.name == "NVIDIA H200" and gpu.uuid == "GPU-02a0e728-086c-202a-c0d3-6e307fc17061"
        assert gpu.memory_total_mib == 143771 and gpu.memory_used_mib == 2667
        assert [(p.pid, p.memory_mib) for p in gpu.processes] == [(506, 2658)]  # the benchmark's torch holder
    assert deltas >= 30  # most of the 39 lines after the first said only what changed


def test_lines_of_what_changed_are_a_fraction_of_whole_lines() -> None:
    now = (DATA / "sampler_now.jsonl").read_bytes().splitlines()[2:]
    before = (DATA / "sampler_before.jsonl").read_bytes().splitlines()[2:]
    assert sum(map(len, now)) / len(now) * 3 < sum(map(len, before)) / len(before)


def test_the_clocked_sampler_lines_of_a_real_h200_merge_whole_with_the_slow_fields_kept() -> None:
    # recorded at 20 Hz by the sampler that reads the temperature, the limit and the processes on
    # their own clocks (benchmarks/gpu_sampler_cost.py, tests/data/h200/sampler_cost/clocked/)
    lines = (DATA / "clocked" / "sampler_clocked.jsonl").read_text().splitlines()
    assert json.loads(lines[0]) == {"driver": "580.159.04", "count": 1}
    known: dict[int, dict] = {}
    for line in lines[1:]:
        gpus, problems = gpus_from_sample(merge_sample(known, parse_sampler_line(line)))
        assert problems == ()
        (gpu,) = gpus
        assert gpu.uuid == "GPU-0d6ec259-18df-497e-5739-6a256555cd96" and gpu.power_limit_w == 700.0
        assert gpu.temperature_c is not None and 20 <= gpu.temperature_c <= 90
        assert [(p.pid, p.memory_mib) for p in gpu.processes] == [(559, 2658)]
