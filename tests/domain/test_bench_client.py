"""Every benchmark result says how far the client was from being the bottleneck (issue 23 item 4):
the lag between each request's scheduled and actual send time, the client loop's CPU, and a
clear "client-bound" warning when the client was the limit."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.domain.bench.metrics import RequestResult, calculate_metrics, client_headroom, format_table
from console.domain.bench.runner import BenchConfig, run_benchmark
from console.domain.bench.workload import random_prompts

KEYS = ("client_send_lag_p50_ms", "client_send_lag_p99_ms", "client_send_lag_max_ms", "client_cpu_pct",
        "client_bound", "client_bound_reason")


@pytest.fixture
async def loopback() -> AsyncIterator[object]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from benchmarks.loopback_server import LoopbackServer

    srv = LoopbackServer()
    server = await asyncio.start_server(srv.handle, "127.0.0.1", 0)
    srv.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"  # type: ignore[attr-defined]
    yield srv
    server.close()


def _results(lags_ms: list[float]) -> list[RequestResult]:
    return [RequestResult(success=True, ttft_s=0.1, latency_s=0.2, output_len=2, send_lag_s=lag / 1000)
            for lag in lags_ms]


def test_the_client_is_bound_by_its_cpu_or_by_late_sends_and_says_which() -> None:
    idle = client_headroom(_results([0.1] * 99 + [0.3]), 10.0, 2.0, median_ttft_ms=100.0)
    assert idle["client_cpu_pct"] == pytest.approx(20.0)
    assert idle["client_send_lag_p50_ms"] == pytest.approx(0.1)
    assert idle["client_bound"] is False and idle["client_bound_reason"] is None
    busy = client_headroom(_results([0.1] * 100), 10.0, 9.0, median_ttft_ms=100.0)
    assert busy["client_bound"] and "busy 90 %" in busy["client_bound_reason"]
    late = client_headroom(_results([0.1] * 90 + [20.0] * 10), 10.0, 1.0, median_ttft_ms=100.0)
    assert late["client_bound"] and "20.0 ms after their scheduled time" in late["client_bound_reason"]
    # 20 ms late against a TTFT of 2 s is under 5 % of it: the client was not the limit.
    assert not client_headroom(_results([20.0] * 10), 10.0, 1.0, median_ttft_ms=2000.0)["client_bound"]


def test_the_result_text_shows_the_headroom_and_warns_when_client_bound() -> None:
    m = calculate_metrics(_results([0.1] * 10), 1.0)
    m.update(client_headroom(_results([0.1] * 10), 1.0, 0.95, median_ttft_ms=100.0))
    text = format_table(m)
    assert "Client send lag P50 / P99 (ms):" in text and "Client CPU (% of one core):" in text
    assert "WARNING: client-bound: the client's event loop was busy 95 %" in text
    m.update(client_headroom(_results([0.1] * 10), 1.0, 0.1, median_ttft_ms=100.0))
    assert "WARNING" not in format_table(m)


async def test_a_client_whose_loop_is_kept_busy_is_reported_client_bound(loopback: object) -> None:
    """Something else on the client's loop (a UI, a parser) holds it 8 ms on every turn of the
    loop: requests leave late and the run must say so (before: nothing in the result did).

    The hog yields with sleep(0), so it is in every turn's ready queue: a slot freed in one turn
    wakes its waiter in the next, and a hog step always runs between the two (every waited request
    leaves >= 8 ms late, whatever the machine's load). With a 1 ms sleep the hog could miss every
    release-to-send gap, and once did (p99 0.31 ms under CI's load)."""
    stop = asyncio.Event()

    async def hog() -> None:
        while not stop.is_set():
            until = time.perf_counter() + 0.008
            while time.perf_counter() < until:
                pass
            await asyncio.sleep(0)

    hogging = asyncio.ensure_future(hog())
    try:
        m = await run_benchmark(BenchConfig(loopback.url, concurrency=2, warmup=0),  # type: ignore[attr-defined]
                                random_prompts(30, 8, 8))
    finally:
        stop.set()
        await hogging
    assert m["completed"] == 30
    assert m["client_bound"] is True, m
    assert m["client_send_lag_p99_ms"] > 5.0


async def test_bench_json_and_text_carry_the_client_headroom(loopback: object, tmp_path: Path) -> None:
    base = [sys.executable, "-m", "console", "bench", "--url", loopback.url,  # type: ignore[attr-defined]
            "--num-prompts", "6", "--input-len", "4", "--output-len", "4", "--concurrency", "2",
            "--output-file", str(tmp_path / "b.jsonl")]
    proc = await asyncio.create_subprocess_exec(*base, "--json", stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, stderr.decode()
    data = json.loads(stdout)
    for key in KEYS:
        assert key in data, key
    assert data["client_send_lag_p50_ms"] >= 0 and 0 <= data["client_cpu_pct"] <= 100
    assert isinstance(data["client_bound"], bool)
    proc = await asyncio.create_subprocess_exec(*base, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, stderr.decode()
    assert "Client send lag P50 / P99 (ms):" in stdout.decode()
