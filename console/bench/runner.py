"""The load generator: streaming requests over httpx, fixed concurrency or Poisson arrivals, with
warm-up; failures are counted with their reason and the run always completes.

`BenchThread` runs it on its own thread and event loop, so a heavy run neither freezes the UI
nor is distorted by it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import httpx

from console.bench.metrics import RequestResult, calculate_metrics
from console.bench.workload import Prompt


@dataclass(frozen=True, slots=True)
class BenchConfig:
    base_url: str
    model: str | None = None
    endpoint: str = "/v1/chat/completions"
    num_prompts: int = 64
    input_len: int = 1024
    output_len: int = 1024
    concurrency: int | None = None
    request_rate: float = float("inf")
    duration_s: float | None = None  # stop issuing new requests after this long
    warmup: int = 1
    seed: int = 42
    timeout_s: float = 600.0
    api_key: str | None = field(default=None, repr=False)  # never printed or saved


@dataclass
class Progress:
    """What a live chart needs while a run is going: one event per finished request."""

    done: int
    failed: int
    total: int
    token_times_s: list[float]  # this request's token arrival times, relative to the run's start
    ttft_ms: float | None
    itl_ms: list[float]
    run_started_wall_s: float = 0.0  # time.time() when the measured run started (after warm-up)


def _chunk_text(obj: dict[str, Any]) -> str:
    choices = obj.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return ""
    c = choices[0]
    delta = c.get("delta")
    if isinstance(delta, dict):
        return str(delta.get("content") or delta.get("reasoning_content") or "")
    return str(c.get("text") or "")


async def send_one(client: httpx.AsyncClient, cfg: BenchConfig, model: str, prompt: Prompt, t0: float,
                   max_tokens: int | None = None) -> RequestResult:
    r = RequestResult(prompt_len=prompt.prompt_len)
    chat = "chat" in cfg.endpoint
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens or prompt.output_len, "temperature": 0.0,
                            "stream": True, "ignore_eos": True,
                            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    if chat:
        body["messages"] = [{"role": "user", "content": prompt.text}]
    else:
        body["prompt"] = prompt.text
    headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
    start = time.perf_counter()
    r.start_s = start - t0
    last = start
    tokens_seen = 0
    got_done = False
    try:
        async with client.stream("POST", cfg.endpoint, json=body, headers=headers) as resp:
            if resp.status_code != 200:
                text = (await resp.aread())[:200].decode("utf-8", "replace")
                r.error = f"HTTP {resp.status_code}: {text.strip()}"
                return r
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    got_done = True
                    break
                try:
                    obj = json.loads(data)
                except json.JSONDecodeError:
                    r.error = f"malformed SSE data: {data[:60]!r}"
                    return r
                now = time.perf_counter()
                usage = obj.get("usage") if isinstance(obj, dict) else None
                if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
                    r.prompt_len = usage["prompt_tokens"]
                text = _chunk_text(obj) if isinstance(obj, dict) else ""
                if not text:
                    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
                        r.output_len = usage["completion_tokens"]
                    continue
                count = usage.get("completion_tokens") if isinstance(usage, dict) else None
                new = (count - tokens_seen) if isinstance(count, int) and count > tokens_seen else 1
                if r.ttft_s == 0.0:
                    r.ttft_s = now - start
                    new_after_first = new - 1
                    r.itl_s.extend([0.0] * max(0, new_after_first))
                else:
                    gap = now - last
                    r.itl_s.extend([gap / new] * new)  # a multi-token chunk's gap spread over its tokens
                tokens_seen += new
                last = now
            if not got_done:
                r.error = "stream ended without [DONE]"
                return r
    except httpx.TimeoutException:
        r.error = f"timeout after {cfg.timeout_s:g}s"
        return r
    except httpx.RemoteProtocolError as exc:
        r.error = f"stream cut: {str(exc)[:80]}"
        return r
    except httpx.HTTPError as exc:
        r.error = f"{type(exc).__name__}: {str(exc)[:80]}"
        return r
    if r.ttft_s == 0.0:
        r.error = "no tokens in the stream"
        return r
    r.latency_s = last - start
    r.output_len = max(r.output_len, tokens_seen)
    r.success = True
    return r


async def discover_model(client: httpx.AsyncClient) -> str:
    resp = await client.get("/v1/models")
    resp.raise_for_status()
    data = resp.json().get("data") or []
    if not data:
        raise ValueError("the server lists no models")
    return str(data[0]["id"])


async def accept_length(client: httpx.AsyncClient) -> float | None:
    try:
        resp = await client.get("/server_info", timeout=5)
        states = resp.json().get("internal_states") or []
        value = states[0].get("avg_spec_accept_length") if states else None
        return float(value) if isinstance(value, (int, float)) else None
    except (httpx.HTTPError, ValueError, AttributeError, IndexError):
        return None


async def run_benchmark(cfg: BenchConfig, prompts: list[Prompt],
                        on_progress: Callable[[Progress], None] | None = None,
                        stop: threading.Event | None = None) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=max(cfg.concurrency or len(prompts), 1) + 4, max_keepalive_connections=64)
    timeout = httpx.Timeout(cfg.timeout_s, connect=10.0)
    async with httpx.AsyncClient(base_url=cfg.base_url, timeout=timeout, limits=limits) as client:
        model = cfg.model or await discover_model(client)
        sem = asyncio.Semaphore(cfg.concurrency) if cfg.concurrency else None
        if cfg.warmup:
            warm = await asyncio.gather(*[send_one(client, cfg, model, prompts[0], time.perf_counter(),
                                                   max_tokens=min(prompts[0].output_len, 32))
                                          for _ in range(cfg.warmup)])
            if not any(w.success for w in warm):
                raise RuntimeError(f"warm-up failed: {warm[0].error}")
            await asyncio.sleep(1.0)
        rng = random.Random(cfg.seed)
        results: list[RequestResult] = []
        done = failed = 0
        t0 = time.perf_counter()
        t0_wall = time.time()

        async def one(p: Prompt) -> None:
            nonlocal done, failed
            if sem is not None:
                async with sem:
                    r = await send_one(client, cfg, model, p, t0)
            else:
                r = await send_one(client, cfg, model, p, t0)
            results.append(r)
            done += r.success
            failed += not r.success
            if on_progress is not None:
                from console.bench.metrics import token_times

                on_progress(Progress(done, failed, len(prompts), token_times(r),
                                     r.ttft_s * 1000 if r.success else None, [g * 1000 for g in r.itl_s], t0_wall))

        tasks = []
        for p in prompts:
            if stop is not None and stop.is_set():
                break
            if cfg.duration_s is not None and time.perf_counter() - t0 >= cfg.duration_s:
                break
            tasks.append(asyncio.ensure_future(one(p)))
            if cfg.request_rate != float("inf"):
                await asyncio.sleep(rng.expovariate(cfg.request_rate))  # Poisson arrivals
        await asyncio.gather(*tasks)
        duration = time.perf_counter() - t0
        metrics = calculate_metrics(results, duration, accept_length=await accept_length(client))
    metrics.update({
        "model": model, "endpoint": cfg.endpoint, "num_prompts": len(prompts),
        "random_input_len": cfg.input_len, "random_output_len": cfg.output_len,
        "max_concurrency": cfg.concurrency,
        "request_rate": None if cfg.request_rate == float("inf") else cfg.request_rate,
    })
    return metrics


class BenchThread:
    """Runs on their own thread and event loop; progress and results come back through callbacks
    (which must be thread-safe: the app's post_message is). `url` opens whatever reaches the
    server from that loop (for SSH: a connection of the bench's own, so its bytes never cross
    the UI's event loop) and closes it afterwards."""

    def __init__(self, runs: list[tuple[BenchConfig, list[Prompt]]],
                 url: Callable[[], contextlib.AbstractAsyncContextManager[str]],
                 on_progress: Callable[[int, Progress], None],
                 on_result: Callable[[int, dict[str, Any]], None], on_done: Callable[[str | None], None]) -> None:
        self.runs = runs
        self.url = url
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="bench", daemon=True)
        self.on_progress, self.on_result, self.on_done = on_progress, on_result, on_done

    def start(self) -> None:
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    async def _all(self) -> None:
        async with self.url() as base_url:
            for i, (cfg, prompts) in enumerate(self.runs):
                if self.stop.is_set():
                    break
                run_cfg = replace(cfg, base_url=base_url)
                result = await run_benchmark(run_cfg, prompts, lambda p, i=i: self.on_progress(i, p), self.stop)
                self.on_result(i, result)

    def _main(self) -> None:
        try:
            asyncio.run(self._all())
        except Exception as exc:  # noqa: BLE001 - a failed run is reported, never raised into the UI
            self.on_done(f"{type(exc).__name__}: {exc}"[:300])
            return
        self.on_done(None)


def public_config(cfg: BenchConfig) -> dict[str, Any]:
    d = asdict(cfg)
    d.pop("api_key", None)
    return d
