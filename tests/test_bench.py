"""The benchmark: bench_serving's metric definitions, the client against faulty servers, the
simulated SGLang, saving and comparing runs, the CLI."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from console.bench.metrics import RequestResult, calculate_metrics, format_table, percentile
from console.bench.runner import BenchConfig, run_benchmark
from console.bench.store import compare_pair, load_runs, save_run
from console.bench.workload import WorkloadError, random_prompts, sharegpt_prompts
from console.hostsim import HostSimulator
from console.hostsim.scenario import start_scenario


def test_metrics_follow_bench_servings_definitions() -> None:
    a = RequestResult(True, 10, 5, ttft_s=0.1, latency_s=0.5, itl_s=[0.1] * 4, start_s=0.0)
    b = RequestResult(True, 20, 3, ttft_s=0.3, latency_s=0.7, itl_s=[0.2, 0.2], start_s=0.5)
    c = RequestResult(False, 30, 0, error="HTTP 500: boom")
    m = calculate_metrics([a, b, c], duration_s=2.0, accept_length=3.1)
    assert (m["completed"], m["failed"], m["total_input_tokens"], m["total_output_tokens"]) == (2, 1, 30, 8)
    assert m["request_throughput"] == 1.0 and m["output_throughput"] == 4.0 and m["total_throughput"] == 19.0
    assert m["mean_ttft_ms"] == pytest.approx(200.0)
    # TPOT excludes the first token: (0.5-0.1)/4 = 100 ms and (0.7-0.3)/2 = 200 ms.
    assert m["mean_tpot_ms"] == pytest.approx(150.0)
    assert m["mean_itl_ms"] == pytest.approx((0.1 * 4 + 0.2 * 2) / 6 * 1000)
    assert m["concurrency"] == pytest.approx((0.5 + 0.7) / 2.0)
    # Token times: a at 0.1..0.5 (5 in bin 0), b at 0.8, 1.0, 1.2 -> bin 0 has 6, bin 1 has 2.
    assert m["max_output_tokens_per_s"] == 6.0
    assert m["accept_length"] == 3.1 and m["errors"] == {"HTTP 500: boom": 1}
    assert "Successful requests:                     2" in format_table(m)


def test_percentiles_interpolate_like_numpy() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([1, 2, 3, 4], 99) == pytest.approx(3.97)
    assert percentile([], 99) == 0.0


def test_random_prompts_are_seeded_and_ranged() -> None:
    a = random_prompts(5, 100, 50, seed=1)
    assert a == random_prompts(5, 100, 50, seed=1)
    assert all(p.prompt_len == 100 and len(p.text.split()) == 100 and p.output_len == 50 for p in a)
    ranged = random_prompts(200, 100, 50, seed=1, range_ratio=0.5)
    assert min(p.prompt_len for p in ranged) >= 50 and max(p.prompt_len for p in ranged) <= 100
    assert len({p.prompt_len for p in ranged}) > 10


def test_sharegpt_file(tmp_path: Path) -> None:
    path = tmp_path / "sg.json"
    path.write_text(json.dumps([{"conversations": [{"from": "human", "value": "hi there"},
                                                   {"from": "gpt", "value": "one two three four five"}]},
                                {"conversations": [{"from": "human", "value": "x"}]}]))
    (p,) = sharegpt_prompts(str(path), 10)
    assert (p.text, p.prompt_len, p.output_len) == ("hi there", 2, 5)
    path.write_text("{not json")
    with pytest.raises(WorkloadError, match="not JSON"):
        sharegpt_prompts(str(path), 10)


class FaultyServer:
    """A small HTTP/1.1 server on loopback whose answer depends on the prompt's first word."""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next((ln.split(b":")[1] for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")), b"0"))
            body = json.loads(await reader.readexactly(length)) if length else {}
            mode = body.get("messages", [{}])[0].get("content", "ok").split()[0]
            if b"GET /v1/models" in head:
                payload = b'{"data": [{"id": "m"}]}'
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload))
            elif b"GET /server_info" in head:
                payload = b'{"internal_states": [{"avg_spec_accept_length": 2.5}]}'
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload))
            elif mode in ("e400", "e503"):
                code = mode[1:].encode()
                writer.write(b"HTTP/1.1 " + code + b" X\r\nContent-Length: 12\r\n\r\nbad request!")
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
                chunks = [b'data: {"choices": [{"delta": {"content": "a"}}], "usage": {"completion_tokens": 1}}\n\n',
                          b'data: {"choices": [{"delta": {"content": "bcd"}}], "usage": {"completion_tokens": 4}}\n\n']
                if mode == "malformed":
                    chunks.append(b"data: {oops\n\n")
                for c in chunks:
                    writer.write(c)
                    await writer.drain()
                    await asyncio.sleep(0.01)
                if mode == "hang":
                    await asyncio.sleep(5)
                if mode not in ("cut", "hang"):
                    writer.write(b'data: {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 4}}\n\n')
                    writer.write(b"data: [DONE]\n\n")
                # "cut" and "nodone" end here without [DONE]
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def faulty() -> object:
    server = await asyncio.start_server(FaultyServer().handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.close()


async def test_every_failure_is_counted_with_its_reason_and_the_run_completes(faulty: str) -> None:
    from console.bench.workload import Prompt

    prompts = [Prompt(f"{mode} words", 2, 4) for mode in ("ok", "e400", "e503", "malformed", "cut", "hang", "ok")]
    cfg = BenchConfig(faulty, concurrency=7, warmup=1, timeout_s=1.0)
    m = await run_benchmark(cfg, prompts)
    assert m["completed"] == 2 and m["failed"] == 5
    reasons = " | ".join(m["errors"])
    for expect in ("HTTP 400", "HTTP 503", "malformed SSE", "without [DONE]", "timeout"):
        assert expect in reasons, reasons
    # The multi-token chunk's gap is spread over its 3 tokens; usage replaces the declared prompt length.
    assert m["total_output_tokens"] == 8 and m["total_input_tokens"] == 14 and m["accept_length"] == 2.5


async def test_connection_refused_fails_the_requests_not_the_client() -> None:
    import socket

    from console.bench.workload import Prompt

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = BenchConfig(f"http://127.0.0.1:{port}", model="m", concurrency=2, warmup=0, timeout_s=2)
    m = await run_benchmark(cfg, [Prompt("ok", 1, 4)] * 3)
    assert m["completed"] == 0 and m["failed"] == 3 and "ConnectError" in " ".join(m["errors"])


async def test_against_the_simulated_sglang_with_mtp(tmp_path: Path) -> None:
    sim = HostSimulator(tmp_path / "h", speed=20.0)
    await sim.start()
    try:
        await start_scenario(sim)
        url = f"http://127.0.0.1:{sim.server_port}"
        import httpx

        ready = False
        for _ in range(200):  # the 122B is ready at t=75 s: under 4 s at 20x
            await asyncio.sleep(0.1)
            try:
                async with httpx.AsyncClient(timeout=2) as c:
                    r = await c.get(url + "/v1/models")
                    healthy = (await c.get(url + "/health")).status_code == 200
                if r.json()["data"][0]["id"] == "qwen3.5-122b" and healthy:
                    ready = True
                    break
            except (httpx.HTTPError, KeyError, IndexError, ValueError):
                continue
        units = (sim.root / ".sim" / "units.json").read_text()
        assert ready, f"the 122B never became ready within 20 s: {units}"
        m = await run_benchmark(BenchConfig(url, concurrency=4, warmup=1), random_prompts(8, 64, 64))
    finally:
        await sim.stop()
    assert m["completed"] == 8 and m["model"] == "qwen3.5-122b"
    assert m["total_output_tokens"] == 8 * 64
    assert m["accept_length"] and 1.5 < m["accept_length"] < 4.0, "MTP chunks carry several tokens"
    assert m["mean_ttft_ms"] > 0 and m["p99_itl_ms"] >= m["median_itl_ms"]


def test_runs_are_saved_and_the_swap_pair_is_compared(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    save_run({"model": "qwen3.5-397b", "output_throughput": 1.0}, path, host="h", flags=["--a"])
    save_run({"model": "qwen3.5-122b", "output_throughput": 2.0}, path, host="h", flags=["--b"])
    with open(path, "a") as fh:
        fh.write("garbage line\n")
    save_run({"model": "qwen3.5-122b", "output_throughput": 3.0}, path, host="h", flags=["--b"], tag="again")
    runs = load_runs(path)
    assert [r["output_throughput"] for r in runs] == [1.0, 2.0, 3.0]
    assert runs[0]["flags_hash"] != runs[1]["flags_hash"] and "time" in runs[0]
    before, after = compare_pair(runs) or ({}, {})
    assert (before["model"], after["output_throughput"]) == ("qwen3.5-397b", 3.0)


async def test_bench_cli_json_keys(faulty: str, tmp_path: Path) -> None:
    # The fake server lives on this test's event loop: the CLI must run without blocking it.
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "console", "bench", "--url", faulty, "--num-prompts", "3", "--input-len", "4",
        "--output-len", "4", "--concurrency", "2", "--json", "--output-file", str(tmp_path / "b.jsonl"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, stderr.decode()
    data = json.loads(stdout)
    for key in ("completed", "failed", "duration", "request_throughput", "input_throughput", "output_throughput",
                "total_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms",
                "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms",
                "mean_e2e_latency_ms", "median_e2e_latency_ms", "p99_e2e_latency_ms", "concurrency",
                "max_output_tokens_per_s", "accept_length"):
        assert key in data, key
    assert len(load_runs(tmp_path / "b.jsonl")) == 1


def test_the_view_puts_tokens_on_the_wall_clock_and_draws_a_sweep() -> None:
    from console.analysis.bench_view import BenchView
    from console.bench.runner import Progress
    from console.panes.bench import chart, sweep_chart

    view = BenchView()
    view.start("c=4", 2, now_s=1000.0)
    # The measured run started at 1002 (after warm-up); its tokens at +0.5 s and +1.2 s.
    view.progress(Progress(1, 0, 2, [0.5, 1.2], 50.0, [700.0], run_started_wall_s=1002.0))
    assert view.live is not None and view.client_bins == {1002: 1, 1003: 1}
    assert chart(view, 60, 8, 1010.0).plain
    for c, tok, p99 in ((1, 100.0, 40.0), (4, 380.0, 55.0), (16, 1200.0, 90.0)):
        view.finish({"max_concurrency": c, "output_throughput": tok, "p99_ttft_ms": p99})
    assert view.sweep_points() == [(1, 100.0, 40.0), (4, 380.0, 55.0), (16, 1200.0, 90.0)]
    assert "concurrency" in sweep_chart(view, 60, 10).plain


def test_live_percentiles_are_charted_during_a_run() -> None:
    from rich.console import Console

    from console.analysis.bench_view import BenchView
    from console.bench.runner import Progress
    from console.panes.bench import results_table

    view = BenchView()
    view.start("c=4", 10, now_s=0.0)
    for i in range(10):
        view.progress(Progress(i + 1, 0, 10, [0.1], 40.0 + i, [10.0 + i, 12.0], run_started_wall_s=0.0))
    pct = view.live_percentiles()
    assert pct and pct["TTFT"][0] == 44.5 and pct["ITL"][2] > pct["ITL"][0]
    console = Console(width=40, record=True)
    console.print(results_table(view, 40, 12))
    out = console.export_text()
    assert "RUNNING c=4" in out and "10/10 done" in out and "TTFT" in out and "ITL" in out and "p99" in out


def test_without_runs_this_session_the_pane_compares_before_and_after_the_swap() -> None:
    from rich.console import Console

    from console.analysis.bench_view import BenchView
    from console.panes.bench import results_table

    view = BenchView()
    view.history = [{"model": "qwen3.5-397b", "max_concurrency": 16, "output_throughput": 900.0},
                    {"model": "qwen3.5-122b", "max_concurrency": 4, "output_throughput": 300.0},
                    {"model": "qwen3.5-122b", "max_concurrency": 16, "output_throughput": 2100.0}]
    console = Console(width=60, record=True)
    console.print(results_table(view, 60))
    out = console.export_text()
    assert "qwen3.5-397b" in out and "qwen3.5-122b" in out and "900" in out and "2,100" in out
    assert "300" not in out
