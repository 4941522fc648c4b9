"""The load generator in a process of its own, for the console: the app's bench thread starts
`python -m console.domain.bench.worker`, writes one JSON line (the run's config and prompts) to its stdin,
and reads JSON lines back (progress in batches, then the result). A line `stop` on stdin stops the
run (no new request, the ones in flight cancelled).

Why a process: in a thread, the client's per-chunk work and the UI's repaints take turns on one
interpreter lock, which put milliseconds on the run's TTFT and on the UI's event loop. The API
key travels on stdin, never in argv.

Why batches (issue 23 item 4): one line per finished request, built with `dataclasses.asdict` and
`json.dumps`, cost the client's own event loop ~0.77 ms per request (its 255 floats deep-copied and
printed), written and flushed on that loop, and woke the console once per request: at c=32 that
alone added ~3-5 ms to the mean TTFT the console read. Now a finished request costs an append; a
batch goes out every `progress_every_s` (msgspec, times rounded to what the live chart shows)."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from typing import Any

import msgspec

from console.domain.bench.runner import BenchConfig, Progress, run_benchmark, run_loop
from console.domain.bench.workload import Prompt

# The live chart and table redraw at most twice a second: a batch every quarter second keeps them current.
PROGRESS_EVERY_S = 0.25
_ENCODE = msgspec.json.Encoder().encode


def _emit(obj: Any) -> None:
    sys.stdout.buffer.write(_ENCODE(obj) + b"\n")
    sys.stdout.buffer.flush()


def _emit_json(obj: dict[str, Any]) -> None:
    """The result and errors as before: json keeps a NaN a NaN (msgspec writes null)."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class ProgressBatch:
    """Finished requests' progress, kept until the next flush. `add` is the client loop's only
    per-request cost (an append); `flush` writes one line for all of them, or nothing."""

    def __init__(self, write: Any = _emit) -> None:
        self.pending: list[Progress] = []
        self.write = write
        self.lines = 0

    def add(self, p: Progress) -> None:
        self.pending.append(p)

    def flush(self) -> None:
        if not self.pending:
            return
        items, self.pending = self.pending, []
        self.write({"kind": "progress", "items": [compact(p) for p in items]})
        self.lines += 1


def compact(p: Progress) -> dict[str, Any]:
    """One request's progress as it travels: token times to 0.1 ms (the chart bins them per second),
    gaps to 1 µs (the table shows 0.01 ms). A third of the bytes of full-precision floats."""
    return {"done": p.done, "failed": p.failed, "total": p.total,
            "token_times_s": [round(t, 4) for t in p.token_times_s], "ttft_ms": p.ttft_ms,
            "itl_ms": [round(g, 3) for g in p.itl_ms], "run_started_wall_s": p.run_started_wall_s}


async def run_batched(cfg: BenchConfig, prompts: list[Prompt], stop: threading.Event,
                      batch: ProgressBatch, every_s: float = PROGRESS_EVERY_S) -> dict[str, Any]:
    """The run, its progress written every `every_s` and once more at its end (before the result)."""

    async def flusher() -> None:
        while True:
            await asyncio.sleep(every_s)
            batch.flush()

    task = asyncio.ensure_future(flusher())
    try:
        return await run_benchmark(cfg, prompts, batch.add, stop)
    finally:
        task.cancel()
        batch.flush()


def main() -> int:
    job = json.loads(sys.stdin.readline())
    cfg = BenchConfig(**job["config"])
    prompts = [Prompt(*p) for p in job["prompts"]]
    every_s = float(job.get("progress_every_s") or PROGRESS_EVERY_S)
    stop = threading.Event()

    def watch_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()  # "stop", or the app went away (stdin closed)

    threading.Thread(target=watch_stdin, daemon=True).start()
    batch = ProgressBatch()
    try:
        result = run_loop(run_batched(cfg, prompts, stop, batch, every_s))
    except Exception as exc:  # noqa: BLE001 - reported to the app as one line
        _emit_json({"kind": "error", "message": f"{type(exc).__name__}: {exc}"[:300]})
        return 1
    _emit_json({"kind": "result", "metrics": result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
