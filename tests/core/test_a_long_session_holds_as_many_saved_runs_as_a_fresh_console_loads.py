"""A console open for days adds a saved run per benchmark: it holds as many as a fresh console
loads from the file (the last HELD_RUNS), never one more, so its memory stays flat."""

from __future__ import annotations

import json
from pathlib import Path

from console.core.state import BenchChanged, HostInfo, HostState
from console.domain.bench.store import HELD_RUNS, load_runs


def _run(n: int) -> dict:
    return {"host": "h", "model": "m", "label": f"c=4 #{n}", "completed": 4, "request_throughput": 1.0 + n}


def test_the_runs_held_are_the_last_ones_a_fresh_console_would_load(tmp_path: Path) -> None:
    state = HostState("h")
    state.apply(HostInfo("h", "lab"))
    saved = tmp_path / "runs.jsonl"
    with saved.open("w") as fh:
        for n in range(HELD_RUNS + 25):
            record = _run(n)
            fh.write(json.dumps(record) + "\n")
            state.apply(BenchChanged("h", "start", label=record["label"], total=4))
            state.apply(BenchChanged("h", "result", record=record))
            state.apply(BenchChanged("h", "done"))
    held = state.bench.history
    assert len(held) == HELD_RUNS
    assert held == load_runs(saved)
    assert held[-1]["label"] == f"c=4 #{HELD_RUNS + 24}" and held[0]["label"] == "c=4 #25"
