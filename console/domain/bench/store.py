"""Runs saved as JSONL: a line per run, keys compatible with sglang.bench_serving's output file,
plus the model, a hash of the service's flags and the time, so a swap's before/after compare."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from console.locations import data_home


def default_path(*, demo: bool = False) -> Path:
    """The user's runs; a demo keeps its own file beside it (its simulated runs are not the user's)."""
    return data_home() / ("demo-bench.jsonl" if demo else "bench.jsonl")


def flags_hash(argv: list[str] | None) -> str | None:
    if not argv:
        return None
    return hashlib.sha256(json.dumps(sorted(argv)).encode()).hexdigest()[:12]


def save_run(metrics: dict[str, Any], path: Path, *, host: str | None, flags: list[str] | None,
             tag: str | None = None) -> dict[str, Any]:
    record = {k: v for k, v in metrics.items()}
    record.update({"tag": tag, "backend": "gpuconsole", "dataset_name": "random", "host": host,
                   "flags_hash": flags_hash(flags), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                   "timestamp": time.time()})
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
    return record


# The saved runs a console holds: as many as it loads from the file, and no more as a session
# adds runs (a console open for days must not grow by a run per benchmark).
HELD_RUNS = 200


def load_runs(path: Path, limit: int = HELD_RUNS) -> list[dict[str, Any]]:
    """The last runs; lines that are not JSON objects are skipped, never fatal."""
    if not path.exists():
        return []
    runs = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError):  # not JSON, a 5,000-digit integer, deep nesting
                continue
            if isinstance(obj, dict):
                runs.append(obj)
    return runs[-limit:]


def compare_pair(runs: list[dict[str, Any]], host: str | None = None
                 ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Before and after a swap on one host: the latest run of `host` (default: the host of the
    latest run) and the latest earlier run of that host with another model. Runs of other hosts
    never pair; with no other model on that host, no pair."""
    if host is None:
        host = runs[-1].get("host") if runs else None
    mine = [r for r in runs if r.get("host") == host]
    if not mine:
        return None
    latest = mine[-1]
    for run in reversed(mine[:-1]):
        if run.get("model") != latest.get("model"):
            return run, latest
    return None
