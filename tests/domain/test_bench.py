"""The benchmark: bench_serving's metric definitions, the client against faulty servers, the
simulated SGLang, saving and comparing runs, the CLI."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from console.domain.bench.metrics import RequestResult, calculate_metrics, format_table, percentile
from console.domain.bench.runner import BenchConfig, run_benchmark
from console.domain.bench.store import compare_pair, load_runs, save_run
from console.domain.bench.workload import WorkloadError, random_prompts, sharegpt_prompts
from console.demo.hostsim import HostSimulator
from console.demo.hostsim.scenario import start_scenario
from tests.kit.bench import FaultyServer


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


@pytest.fixture
async def faulty() -> object:
    server = await asyncio.start_server(FaultyServer().handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.close()


async def test_every_failure_is_counted_with_its_reason_and_the_run_completes(faulty: str) -> None:
    from console.domain.bench.workload import Prompt

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

    from console.domain.bench.workload import Prompt

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
    from console.domain.analysis.bench_view import BenchView
    from console.domain.bench.runner import Progress
    from console.ui.panes.bench import chart, sweep_chart

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

    from console.domain.analysis.bench_view import BenchView
    from console.domain.bench.runner import Progress
    from console.ui.panes.bench import results_table

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

    from console.domain.analysis.bench_view import BenchView
    from console.ui.panes.bench import results_table

    view = BenchView()
    view.history = [{"model": "qwen3.5-397b", "max_concurrency": 16, "output_throughput": 900.0},
                    {"model": "qwen3.5-122b", "max_concurrency": 4, "output_throughput": 300.0},
                    {"model": "qwen3.5-122b", "max_concurrency": 16, "output_throughput": 2100.0}]
    console = Console(width=60, record=True)
    console.print(results_table(view, 60))
    out = console.export_text()
    assert "qwen3.5-397b" in out and "qwen3.5-122b" in out and "900" in out and "2,100" in out
    assert "300" not in out


def _mb(n: int) -> float:
    return n / (1 << 20)


async def test_one_bad_response_fails_that_request_only_and_allocates_little(faulty: str) -> None:
    """Issue 15 item 7: a malformed chunk, a chunk claiming 20,000,000 tokens, a 4 MiB line: each
    fails its own request with a reason; the run completes; the client never holds much."""
    import tracemalloc

    from console.domain.bench.workload import Prompt

    prompts = [Prompt(f"{mode} words", 2, 4) for mode in ("ok", "malformed", "huge", "longline", "ok")]
    tracemalloc.start()
    try:
        m = await run_benchmark(BenchConfig(faulty, concurrency=5, warmup=0, timeout_s=10), prompts)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert m["completed"] == 2 and m["failed"] == 3
    assert set(m["errors"]) == {"malformed SSE", "bad usage", "oversized response"}, m["errors"]
    assert "20000000" in m["error_examples"]["bad usage"]
    assert _mb(peak) < 32, f"peak {_mb(peak):.0f} MiB"


async def test_errors_are_grouped_by_kind_with_one_example(faulty: str) -> None:
    from console.domain.bench.workload import Prompt

    m = await run_benchmark(BenchConfig(faulty, concurrency=4, warmup=0), [Prompt("e500 x", 2, 4)] * 10
                            + [Prompt("ok x", 2, 4)])
    assert m["errors"] == {"HTTP 500": 10}
    assert m["error_examples"]["HTTP 500"].startswith("HTTP 500: internal error in request ")


def _server(**kwargs: object) -> object:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
    from benchmarks.loopback_server import LoopbackServer

    return LoopbackServer(**kwargs)  # type: ignore[arg-type]


@pytest.fixture
async def loopback(request: pytest.FixtureRequest) -> object:
    srv = _server(**getattr(request, "param", {}))
    server = await asyncio.start_server(srv.handle, "127.0.0.1", 0)  # type: ignore[attr-defined]
    srv.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"  # type: ignore[attr-defined]
    yield srv
    server.close()


async def test_connections_are_kept_between_requests(loopback: object) -> None:
    """Issue 16 item 1: each stream is read to the end of its body, so its connection is reused."""
    m = await run_benchmark(BenchConfig(loopback.url, concurrency=2, warmup=1),  # type: ignore[attr-defined]
                            random_prompts(20, 8, 16))
    assert m["completed"] == 20
    # /v1/models, the warm-up, 2 streams, /server_info: a handful, not one per request.
    assert loopback.connections <= 5, loopback.connections  # type: ignore[attr-defined]


@pytest.mark.parametrize("loopback", [{"tokens_per_chunk": 3, "itl_ms": 2.0}], indirect=True)
async def test_itl_leaves_the_first_chunk_out_and_spreads_multi_token_chunks(loopback: object) -> None:
    """Issue 16 item 4: bench_serving leaves the first chunk out of ITL; no zeros for its extra tokens."""
    m = await run_benchmark(BenchConfig(loopback.url, concurrency=1, warmup=0),  # type: ignore[attr-defined]
                            random_prompts(2, 8, 12))
    assert m["total_output_tokens"] == 24 and m["token_count"] == "usage"
    # 12 tokens in chunks of 3: the first chunk's 3 are TTFT, the other 9 each get a third of a gap.
    assert m["median_itl_ms"] > 0.5, "no zero gaps for the first chunk's extra tokens"
    # TPOT = (latency - ttft) / 11 and ITL's mean over 9 tokens describe the same gaps.
    assert m["mean_itl_ms"] == pytest.approx(m["mean_tpot_ms"] * 11 / 9, rel=0.05)


@pytest.mark.parametrize("loopback", [{"usage": False, "tokens_per_chunk": 4}], indirect=True)
async def test_without_usage_tokens_are_counted_not_chunks(loopback: object, tmp_path: Path) -> None:
    """Issue 16 item 5: a server that sends no usage: tokens from the model's tokenizer when at hand,
    else from finish_reason "length" (max_tokens exactly); the run says which way was used."""
    from benchmarks.loopback_server import build_tokenizer
    from console.domain.bench.tokens import load_counter

    prompts = random_prompts(4, 8, 40)
    counter = load_counter(str(build_tokenizer(tmp_path / "tok")))
    with_tok = await run_benchmark(BenchConfig(loopback.url, concurrency=2, warmup=0), prompts,  # type: ignore[attr-defined]
                                   counter=counter)
    assert with_tok["total_output_tokens"] == 160 and with_tok["token_count"] == "tokenizer tok"
    without = await run_benchmark(BenchConfig(loopback.url, concurrency=2, warmup=0), prompts)  # type: ignore[attr-defined]
    assert without["total_output_tokens"] == 160 and without["token_count"] == "finish_reason=length"
    # Peaks count tokens, not the 10 chunks of each request.
    assert without["max_output_tokens_per_s"] >= 160 * 0.5


def test_peak_counts_tokens_not_chunks() -> None:
    """Issue 17: with MTP chunks of several tokens, the peak must not fall below the mean."""
    r = RequestResult(True, 4, 9, ttft_s=0.1, latency_s=0.3, itl_s=[0.1 / 3] * 6, start_s=0.0,
                      chunk_times_s=[0.1, 0.2, 0.3], chunk_tokens=[3, 3, 3])
    m = calculate_metrics([r], duration_s=0.5)
    # A run under a second is one bin of its own length: 9 tokens in 0.5 s (never 9 beside a mean of 18).
    assert m["max_output_tokens_per_s"] == 18.0 and m["output_throughput"] == 18.0


@pytest.mark.parametrize("loopback", [{"itl_ms": 50.0}], indirect=True)
async def test_stop_sends_nothing_more_and_cancels_the_requests_in_flight(loopback: object) -> None:
    """Issue 17: `x` stops now: no new request, the ones in flight cancelled, the run reports it."""
    import threading

    stop = threading.Event()
    loop = asyncio.get_running_loop()
    loop.call_later(0.5, stop.set)
    # 16 requests of 128 tokens at 50 ms each, 4 at a time: 26 s if it ran to the end. That none
    # completed, and only the first 4 were sent, says it stopped (no wall-clock bound; issue 27).
    m = await run_benchmark(BenchConfig(loopback.url, concurrency=4, warmup=0),  # type: ignore[attr-defined]
                            random_prompts(16, 8, 128), stop=stop)
    assert m["stopped"] and m["completed"] == 0 and m["not_sent_or_cancelled"] == 16
    assert loopback.requests == 4  # type: ignore[attr-defined]


def test_read_api_key_from_env_or_file_never_a_literal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from console.cli.bench import ApiKeyError, read_api_key

    monkeypatch.setenv("BENCH_KEY", "sekrit-123")
    assert read_api_key("env:BENCH_KEY") == "sekrit-123"
    (tmp_path / "k").write_text("sekrit-123\n")
    assert read_api_key(f"file:{tmp_path / 'k'}") == "sekrit-123"
    for bad in ("sekrit-123", "env:UNSET_VAR_X", f"file:{tmp_path / 'missing'}"):
        with pytest.raises(ApiKeyError) as err:
            read_api_key(bad)
        assert "sekrit" not in str(err.value)


async def test_api_key_is_sent_and_never_printed_or_saved(faulty: str, tmp_path: Path) -> None:
    out = tmp_path / "b.jsonl"
    env = {**__import__("os").environ, "BENCH_KEY": "sekrit-123"}
    dataset = tmp_path / "auth.json"
    dataset.write_text(json.dumps([{"conversations": [{"from": "human", "value": "auth please"},
                                                      {"from": "gpt", "value": "one two three four"}]}] * 3))
    for key, expect_rc in (("env:BENCH_KEY", 0), ("env:WRONG_KEY", 1)):
        env["WRONG_KEY"] = "sekrit-999"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "console", "bench", "--url", faulty, "--dataset", str(dataset), "--num-prompts", "3",
            "--concurrency", "2", "--output-file", str(out), "--api-key", key, "--warmup", "0",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
        text = stdout.decode() + stderr.decode() + out.read_text()
        assert proc.returncode == expect_rc, text
        assert "sekrit" not in text, text
    assert "HTTP 401" in text and "***" in text  # the server echoed the key: redacted in the example


def test_before_after_pairs_runs_of_one_host_and_the_demo_keeps_its_own_file(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    runs = [{"host": "gpu1", "model": "qwen3.5-397b", "timestamp": 1.0},
            {"host": "laptop", "model": "mock", "timestamp": 2.0},
            {"host": "gpu1", "model": "qwen3.5-122b", "timestamp": 3.0}]
    before, after = compare_pair(runs) or ({}, {})
    assert (before["model"], after["model"]) == ("qwen3.5-397b", "qwen3.5-122b")
    assert compare_pair(runs, host="laptop") is None  # one model only there: nothing to compare
    assert compare_pair(runs + [{"host": "laptop", "model": "other", "timestamp": 4.0}]) == (runs[1], {
        "host": "laptop", "model": "other", "timestamp": 4.0})
    from console.domain.bench.store import default_path

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_path(demo=True) != default_path() and default_path(demo=True).parent == tmp_path / "gpuconsole"


def test_chart_labels_are_whole_and_the_axes_honest() -> None:
    from console.domain.analysis.bench_view import BenchView
    from console.ui.panes.bench import chart, nice_ticks, sweep_chart, tick_label

    assert nice_ticks(0, 85) == [0, 25, 50, 75, 100] and tick_label(1500) == "1.5k" and tick_label(90, "%") == "90%"
    view = BenchView()
    for i in range(30):
        view.add_gpu(970.0 + i, 0.0)  # idle GPUs: a flat 0 % line
    idle = chart(view, 60, 8, 1000.0).plain
    import re

    right_labels = [line.split()[-1] for line in idle.splitlines()[:-1] if line.strip()]
    assert not any(re.fullmatch(r"-[\d.]+%?", label) for label in right_labels), idle  # no -1…1 axis
    assert "100%" in idle and "0%" in idle
    for i in range(30):
        view.add_gpu(1000.0 + i, 85.0 + i % 10)
        view.client_bins[1000 + i] = 1200 + 7 * i
    busy = chart(view, 60, 10, 1031.0).plain
    assert "85." not in busy and "100%" in busy and "1.5k" in busy
    for c, tok, p99 in ((1, 100.0, 40.0), (4, 380.0, 55.0), (16, 1200.0, 90.0), (64, 2100.0, 400.0)):
        view.finish({"max_concurrency": c, "output_throughput": tok, "p99_ttft_ms": p99})
    sweep = sweep_chart(view, 60, 10).plain.splitlines()
    assert any("400ms" in line for line in sweep), "right labels whole"
    ticks = next(line for line in sweep if line.strip().startswith("1 "))
    p1, p4, p16, p64 = (ticks.index(" " + x + " ") if x != "1" else ticks.index("1") for x in ("1", "4", "16", "64"))
    assert abs((p4 - p1) - (p16 - p4)) <= 2 and abs((p16 - p4) - (p64 - p16)) <= 2, "log scale: evenly spaced"


def test_the_swap_is_marked_on_the_time_chart() -> None:
    from console.domain.analysis.bench_view import BenchView
    from console.domain.analysis.log_state import BootStep
    from console.ui.panes.bench import chart

    class Summary:
        def __init__(self, *steps: tuple[str, str]) -> None:
            self.boot = tuple(BootStep(p, at, None, "") for p, at in steps)

    view = BenchView()
    view.note_log(Summary(("launch", "10:00:00"), ("ready", "10:02:00")), 900.0)  # the old server, already up
    assert not view.marks
    view.note_log(Summary(("launch", "11:00:00")), 950.0)
    view.note_log(Summary(("launch", "11:00:00"), ("weights loading", "11:00:05")), 960.0)
    view.note_log(Summary(("launch", "11:00:00"), ("ready", "11:01:10")), 990.0)
    assert [label for _, label in view.marks] == ["new server launching", "new server ready"]
    for i in range(60):
        view.add_gpu(940.0 + i, 50.0)
    assert "new server ready" in chart(view, 80, 10, 1000.0).plain


def test_a_stopped_run_says_what_stop_did() -> None:
    from rich.console import Console

    from console.domain.analysis.bench_view import BenchView
    from console.ui.panes.bench import results_table

    view = BenchView()
    view.finish({"max_concurrency": 4, "stopped": True, "not_sent_or_cancelled": 12, "completed": 4,
                 "output_throughput": 10.0})
    console = Console(width=50, record=True)
    console.print(results_table(view, 50))
    out = console.export_text()
    assert "stopped (x): 12 requests not sent or cancelled in flight" in " ".join(out.split())
    for label in ("out tok/s", "TTFT p50 ms", "TTFT p99 ms"):
        assert label in out


@pytest.mark.parametrize("loopback", [{"itl_ms": 50.0}], indirect=True)
async def test_the_consoles_bench_runs_in_a_worker_process_and_stops_on_x(loopback: object) -> None:
    """The app's runs go through BenchThread -> `python -m console.domain.bench.worker`: progress and the
    result come back; `x` (stop) ends the run within seconds, the in-flight requests cancelled."""
    import contextlib
    import threading

    from console.domain.bench.runner import BenchThread

    @contextlib.asynccontextmanager
    async def url():  # type: ignore[no-untyped-def]
        yield loopback.url  # type: ignore[attr-defined]

    got: dict[str, object] = {"progress": 0}
    finished = threading.Event()
    runs = [(BenchConfig("", concurrency=2, warmup=0), random_prompts(2, 8, 4)),
            (BenchConfig("", concurrency=4, warmup=0), random_prompts(16, 8, 128))]

    def on_progress(i: int, p: object) -> None:
        got["progress"] = int(got["progress"]) + 1  # type: ignore[call-overload]

    def on_result(i: int, m: dict[str, object]) -> None:
        got[f"result{i}"] = m
        if i == 0:
            threading.Timer(1.0, bench.stop.set).start()

    bench = BenchThread(runs, url, on_progress, on_result, lambda err: (got.update(done=err), finished.set()))
    bench.start()
    while not finished.is_set():
        await asyncio.sleep(0.05)
    assert got["done"] is None and got["progress"] == 2
    assert got["result0"]["completed"] == 2  # type: ignore[index]
    second = got["result1"]
    # stopped, none of its 16 completed: 26 s if it had run to the end (no wall-clock bound; issue 27)
    assert second["stopped"] and second["not_sent_or_cancelled"] == 16  # type: ignore[index]
    assert second["completed"] == 0  # type: ignore[index]


def test_swap_marks_never_overwrite_the_legend_nor_each_other() -> None:
    from console.domain.analysis.bench_view import BenchView
    from console.ui.panes.bench import chart

    view = BenchView()
    now = 10_000.0
    for i in range(120):
        view.add_gpu(now - 120 + i, 20.0 + (i % 30))
    view.add_server_points([(now - 120 + i, 400.0 + 10 * (i % 20), None) for i in range(120)])
    view.mark(now - 62, "old server stopped")
    view.mark(now - 58, "new server launching")
    view.mark(now - 30, "new server ready")
    text = chart(view, 110, 14, now).plain
    for words in ("server gen tok/s", "GPU util %", "old server stopped", "new server launching",
                  "new server ready"):
        assert words in text, (words, text)
