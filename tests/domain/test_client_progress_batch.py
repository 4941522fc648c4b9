"""Issue 23 item 4: the console's load generator sends its progress in batches, not one line per
finished request (a line per request cost the client's own event loop ~0.77 ms each and woke the
console 40 times a second at c=32: the TTFT the console read was +49 % of the headless run's)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from console.domain.bench.runner import Progress

ROOT = Path(__file__).resolve().parent.parent.parent


async def _loopback(**kwargs: object) -> tuple[object, asyncio.AbstractServer]:
    sys.path.insert(0, str(ROOT))
    from benchmarks.loopback_server import LoopbackServer

    srv = LoopbackServer(**kwargs)  # type: ignore[arg-type]
    server = await asyncio.start_server(srv.handle, "127.0.0.1", 0)
    srv.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"  # type: ignore[attr-defined]
    return srv, server


async def _worker_lines(url: str, n: int, every_s: float) -> list[dict[str, object]]:
    from console.domain.bench.workload import random_prompts

    prompts = random_prompts(n, 8, 16)
    job = {"config": {"base_url": url, "concurrency": 4, "num_prompts": n, "input_len": 8, "output_len": 16,
                      "warmup": 0},
           "prompts": [[p.text, p.prompt_len, p.output_len] for p in prompts], "progress_every_s": every_s}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "console.domain.bench.worker", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(job).encode() + b"\n")  # stdin stays open: closing it stops the run
    lines: list[dict[str, object]] = []
    try:
        while not lines or lines[-1]["kind"] not in ("result", "error"):
            line = await asyncio.wait_for(proc.stdout.readline(), 120)
            assert line, "the worker exited without a result"
            lines.append(json.loads(line))
    finally:
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 60)
    return lines


async def test_the_worker_writes_one_progress_line_per_batch_not_per_request() -> None:
    srv, server = await _loopback()
    try:
        # A batch interval longer than the run: every request's progress comes in the one flush at its end.
        lines = await _worker_lines(srv.url, 16, 60.0)  # type: ignore[attr-defined]
    finally:
        server.close()
    kinds = [m["kind"] for m in lines]
    assert kinds == ["progress", "result"], kinds
    items = lines[0]["items"]
    assert isinstance(items, list) and len(items) == 16
    # every finished request is there, in order, each with its tokens and its TTFT
    assert [it["done"] for it in items] == list(range(1, 17))
    assert all(len(it["token_times_s"]) == 16 and it["ttft_ms"] > 0 for it in items)
    assert lines[1]["metrics"]["completed"] == 16  # type: ignore[index]


async def test_the_console_gets_every_requests_progress_through_the_batches() -> None:
    """BenchThread unpacks the batches: the console's view sees one Progress per request, as before."""
    import contextlib
    import threading

    from console.domain.bench.runner import BenchConfig, BenchThread
    from console.domain.bench.workload import random_prompts

    srv, server = await _loopback(itl_ms=2.0)

    @contextlib.asynccontextmanager
    async def url():  # type: ignore[no-untyped-def]
        yield srv.url  # type: ignore[attr-defined]

    got: list[Progress] = []
    results: list[dict[str, object]] = []
    finished = threading.Event()
    runs = [(BenchConfig("", concurrency=4, warmup=0), random_prompts(24, 8, 32))]
    bench = BenchThread(runs, url, lambda i, p: got.append(p), lambda i, m: results.append(m),
                        lambda err: finished.set())
    try:
        bench.start()
        while not finished.is_set():
            await asyncio.sleep(0.05)
    finally:
        server.close()
    assert results and results[0]["completed"] == 24
    assert sorted(p.done for p in got) == list(range(1, 25))
    assert all(isinstance(p, Progress) and len(p.token_times_s) == 32 and len(p.itl_ms) == 31 for p in got)


def test_a_batch_is_written_only_when_flushed_and_keeps_what_the_chart_needs() -> None:
    from console.domain.bench.worker import ProgressBatch

    written: list[dict[str, object]] = []
    batch = ProgressBatch(written.append)
    batch.flush()
    assert written == []  # nothing finished: no line
    for i in range(3):
        batch.add(Progress(i + 1, 0, 3, [1.23456789 + i, 2.0], 20.123456, [4.98765432], 1000.5))
    assert written == []
    batch.flush()
    batch.flush()
    assert len(written) == 1 and batch.lines == 1
    items = written[0]["items"]
    assert [Progress(**it).done for it in items] == [1, 2, 3]  # type: ignore[union-attr]
    first = items[0]  # type: ignore[index]
    assert first["token_times_s"] == [1.2346, 2.0] and first["itl_ms"] == [4.988] and first["ttft_ms"] == 20.123456
