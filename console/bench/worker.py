"""The load generator in a process of its own, for the console: the app's bench thread starts
`python -m console.bench.worker`, writes one JSON line (the run's config and prompts) to its stdin,
and reads JSON lines back (one per finished request, then the result). A line `stop` on stdin
stops the run (no new request, the ones in flight cancelled).

Why a process: in a thread, the client's per-chunk work and the UI's repaints take turns on one
interpreter lock, which put milliseconds on the run's TTFT and on the UI's event loop. The API
key travels on stdin, never in argv."""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import asdict
from typing import Any

from console.bench.runner import BenchConfig, Progress, run_benchmark, run_loop
from console.bench.workload import Prompt


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> int:
    job = json.loads(sys.stdin.readline())
    cfg = BenchConfig(**job["config"])
    prompts = [Prompt(*p) for p in job["prompts"]]
    stop = threading.Event()

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()  # "stop", or the app went away (stdin closed)

    threading.Thread(target=watch_stdin, daemon=True).start()

    def progress(p: Progress) -> None:
        _emit({"kind": "progress", "progress": asdict(p)})

    try:
        result = run_loop(run_benchmark(cfg, prompts, progress, stop))
    except Exception as exc:  # noqa: BLE001 - reported to the app as one line
        _emit({"kind": "error", "message": f"{type(exc).__name__}: {exc}"[:300]})
        return 1
    _emit({"kind": "result", "metrics": result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
