"""The load generator: streaming requests over aiohttp, fixed concurrency or Poisson arrivals, with
warm-up; failures are counted by kind with one example each, and the run always completes.

Why aiohttp here and httpx everywhere else: this is the one hot path of the console (tens of
thousands of SSE chunks a second at concurrency 32), and a profile showed httpx's per-chunk
machinery (anyio streams, line decoding, the pool) as the largest cost; aiohttp's C parser hands
over whatever bytes arrived in one wakeup. The console's own HTTP (health, /server_info, a Hub
lookup) is a few requests a second where httpx's timeouts and SSH-forward handling matter more.

Connections are kept: each stream is read to the end of its HTTP body (past `[DONE]`), so the
connection goes back to the pool instead of being dropped.

`BenchThread` runs it on its own thread and event loop, so a heavy run neither freezes the UI
nor is distorted by it."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import aiohttp

try:  # 3-5x faster than json on the small chunks a stream is made of; the same results
    from orjson import JSONDecodeError as _JsonError
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - a dependency; absent, the json module
    from json import JSONDecodeError as _JsonError
    from json import loads as _loads
try:  # fewer microseconds per wakeup; a dependency wherever a wheel exists (not on Windows)
    import uvloop
except ImportError:  # pragma: no cover - the platforms without it
    uvloop = None  # type: ignore[assignment]

import sys

import msgspec

from console.domain.bench.metrics import RequestResult, calculate_metrics, client_headroom, token_times
from console.domain.bench.tokens import Counter
from console.domain.bench.workload import Prompt
from console.units import seconds

# What one response may make the client hold: a line, the whole body, and the tokens a chunk may
# claim (the request's max_tokens, with room for servers that count a little over).
MAX_LINE_BYTES = 1 << 20
MAX_BODY_BYTES = 64 << 20
TOKEN_SLACK = 16


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


class _Fail(Exception):
    def __init__(self, kind: str, example: str) -> None:
        super().__init__(kind)
        self.kind, self.example = kind, example


def _content(obj: dict[str, Any]) -> tuple[str, bool]:
    """The chunk's text and whether it said finish_reason "length"."""
    choices = obj.get("choices")
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
        return "", False
    c = choices[0]
    delta = c.get("delta")
    if isinstance(delta, dict):
        text = delta.get("content") or delta.get("reasoning_content") or ""
    else:
        text = c.get("text") or ""
    return (text if isinstance(text, str) else ""), c.get("finish_reason") == "length"


class _Stream:
    """The per-request parse state: chunk arrival times and the tokens each carried."""

    __slots__ = ("start", "max_tokens", "times", "tokens", "texts", "usage_seen", "usage_total",
                 "prompt_tokens", "length_finish", "done")

    def __init__(self, start: float, max_tokens: int) -> None:
        self.start = start
        self.max_tokens = max_tokens
        self.times: list[float] = []
        self.tokens: list[int] = []  # per content chunk; 0 = not said (no per-chunk usage)
        self.texts: list[str] = []
        self.usage_seen = 0  # the last completion_tokens a chunk reported
        self.usage_total: int | None = None
        self.prompt_tokens: int | None = None
        self.length_finish = False
        self.done = False

    def event(self, data: bytes, now: float) -> None:
        if data == b"[DONE]":
            self.done = True
            return
        try:
            obj = _loads(data)
        except (_JsonError, ValueError, TypeError, RecursionError):  # deep nesting: json (no orjson) recursed out
            raise _Fail("malformed SSE", f"not JSON: {data[:60]!r}") from None
        if not isinstance(obj, dict):
            raise _Fail("malformed SSE", f"not an object: {data[:60]!r}")
        usage = obj.get("usage")
        count = None
        if isinstance(usage, dict):
            prompt = usage.get("prompt_tokens")
            if type(prompt) is int and prompt >= 0:
                self.prompt_tokens = prompt
            c = usage.get("completion_tokens")
            if type(c) is int:
                if c < 0 or c > self.max_tokens + TOKEN_SLACK:
                    raise _Fail("bad usage", f"completion_tokens {c} for max_tokens {self.max_tokens}")
                count = c
        text, length = _content(obj)
        self.length_finish = self.length_finish or length
        if count is not None:
            self.usage_total = count
        if not text:
            return
        if count is not None and count > self.usage_seen:
            self.tokens.append(count - self.usage_seen)
            self.usage_seen = count
        else:
            self.tokens.append(0)
        self.times.append(now)
        self.texts.append(text)


def _finish(r: RequestResult, st: _Stream, counter: Counter | None) -> None:
    """Tokens per chunk, the total, TTFT, ITL (bench_serving's: the first chunk left out, a
    later chunk's gap spread over its tokens) and the chunk times for the peaks."""
    tokens = st.tokens
    if all(tokens):
        r.token_count = "usage"
    elif counter is not None:
        tokens = [n or counter.count(t) for n, t in zip(tokens, st.texts, strict=True)]
        r.token_count = counter.name
    else:
        total = st.usage_total if st.usage_total is not None else (st.max_tokens if st.length_finish else None)
        if total is None:
            tokens = [n or 1 for n in tokens]
            r.token_count = "chunks"
        else:
            # Spread the known total over the chunks by their share of the text.
            known = sum(tokens)
            rest = max(total - known, 0)
            weights = [len(t) if n == 0 else 0 for n, t in zip(tokens, st.texts, strict=True)]
            wsum = sum(weights) or 1
            spread = [n or max(1, round(rest * w / wsum)) for n, w in zip(tokens, weights, strict=True)]
            tokens = spread
            r.token_count = "usage (final)" if st.usage_total is not None else "finish_reason=length"
    total = sum(tokens)
    if st.usage_total is not None and r.token_count != "usage":
        total = max(st.usage_total, 1)
    elif r.token_count == "finish_reason=length":
        total = st.max_tokens
    r.output_len = total
    r.ttft_s = st.times[0] - st.start
    r.latency_s = st.times[-1] - st.start
    itl: list[float] = []
    for i in range(1, len(st.times)):
        gap = st.times[i] - st.times[i - 1]
        n = max(1, tokens[i])
        itl.extend([gap / n] * n)
    r.itl_s = itl
    r.chunk_times_s = [t - st.start for t in st.times]
    r.chunk_tokens = tokens
    if st.prompt_tokens is not None:
        r.prompt_len = st.prompt_tokens


def _body(cfg: BenchConfig, model: str, prompt: Prompt, max_tokens: int) -> bytes:
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "temperature": 0.0,
                            "stream": True, "ignore_eos": True,
                            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    if "chat" in cfg.endpoint:
        body["messages"] = [{"role": "user", "content": prompt.text}]
    else:
        body["prompt"] = prompt.text
    return json.dumps(body).encode()


def _redact(text: str, key: str | None) -> str:
    return text.replace(key, "***") if key else text


async def send_one(session: aiohttp.ClientSession, cfg: BenchConfig, model: str, prompt: Prompt, t0: float,
                   max_tokens: int | None = None, counter: Counter | None = None,
                   scheduled: float | None = None) -> RequestResult:
    """`scheduled`: the perf_counter time the request was due to leave (its send lag is measured
    from there to the moment this coroutine starts sending it)."""
    r = RequestResult(prompt_len=prompt.prompt_len)
    limit = max_tokens or prompt.output_len
    data = _body(cfg, model, prompt, limit)
    headers = {"Content-Type": "application/json"}
    if cfg.api_key:
        headers["Authorization"] = f"Bearer {cfg.api_key}"
    url = cfg.base_url + cfg.endpoint
    start = time.perf_counter()
    if scheduled is not None:
        r.send_lag_s = max(0.0, start - scheduled)
    try:
        try:
            resp = await session.post(url, data=data, headers=headers)
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
            # A kept connection the server had closed meanwhile (idle timeout; a server that closes
            # without saying so): nothing was answered, so the request is sent again, once, afresh.
            start = time.perf_counter()
            resp = await session.post(url, data=data, headers=headers)
    except aiohttp.ClientConnectorError as exc:
        r.error_kind, r.error = "ConnectError", _redact(f"ConnectError: {str(exc)[:120]}", cfg.api_key)
        return r
    except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
        r.error_kind, r.error = "timeout", f"timeout after {seconds(cfg.timeout_s)}"
        return r
    except aiohttp.ClientError as exc:
        kind = type(exc).__name__
        r.error_kind, r.error = kind, _redact(f"{kind}: {str(exc)[:120]}", cfg.api_key)
        return r
    r.start_s = start - t0
    st = _Stream(start, limit)
    try:
        async with resp:
            if resp.status != 200:
                text = (await resp.content.read(300)).decode("utf-8", "replace").strip()
                raise _Fail(f"HTTP {resp.status}", f"HTTP {resp.status}: {text[:200]}")
            buf = b""
            received = 0
            async for piece in resp.content.iter_any():
                now = time.perf_counter()
                received += len(piece)
                if received > MAX_BODY_BYTES:
                    raise _Fail("oversized response", f"body over {MAX_BODY_BYTES >> 20} MiB")
                if st.done:
                    continue  # read to the end of the body, so the connection is kept
                buf += piece
                if b"\n" not in piece:
                    if len(buf) > MAX_LINE_BYTES:
                        raise _Fail("oversized response", f"an SSE line over {MAX_LINE_BYTES >> 20} MiB")
                    continue
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if line.startswith(b"data:"):
                        st.event(line[5:].strip(), now)
                        if st.done:
                            break
                if len(buf) > MAX_LINE_BYTES:
                    raise _Fail("oversized response", f"an SSE line over {MAX_LINE_BYTES >> 20} MiB")
            if not st.done:
                raise _Fail("stream ended without [DONE]", f"stream ended without [DONE] after {len(st.times)} chunks")
    except _Fail as exc:
        r.error_kind, r.error = exc.kind, _redact(exc.example, cfg.api_key)
        return r
    except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
        r.error_kind, r.error = "timeout", f"timeout after {seconds(cfg.timeout_s)}"
        return r
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as exc:
        r.error_kind, r.error = "stream cut", _redact(f"stream cut: {str(exc)[:120]}", cfg.api_key)
        return r
    except aiohttp.ClientConnectorError as exc:
        r.error_kind, r.error = "ConnectError", _redact(f"ConnectError: {str(exc)[:120]}", cfg.api_key)
        return r
    except aiohttp.ClientError as exc:
        kind = type(exc).__name__
        r.error_kind, r.error = kind, _redact(f"{kind}: {str(exc)[:120]}", cfg.api_key)
        return r
    if not st.times:
        r.error_kind, r.error = "no tokens", "no tokens in the stream"
        return r
    _finish(r, st, counter)
    r.success = True
    return r


def _headers(cfg: BenchConfig) -> dict[str, str]:
    return {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}


async def discover_model(session: aiohttp.ClientSession, cfg: BenchConfig) -> str:
    async with session.get(cfg.base_url + "/v1/models", headers=_headers(cfg)) as resp:
        if resp.status != 200:
            raise ValueError(f"/v1/models answered HTTP {resp.status}")
        body = await resp.content.read(1 << 20)
    try:
        data = json.loads(body).get("data") or []
        return str(data[0]["id"])
    except (ValueError, AttributeError, LookupError, TypeError):
        raise ValueError("the server lists no models") from None


async def accept_length(session: aiohttp.ClientSession, cfg: BenchConfig) -> float | None:
    try:
        async with session.get(cfg.base_url + "/server_info", headers=_headers(cfg),
                               timeout=aiohttp.ClientTimeout(total=5)) as resp:
            body = await resp.content.read(1 << 20)
        states = json.loads(body).get("internal_states") or []
        value = states[0].get("avg_spec_accept_length") if states else None
        return float(value) if isinstance(value, (int, float)) else None
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, AttributeError, IndexError, TypeError):
        return None


def _session(cfg: BenchConfig, connections: int) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=connections, limit_per_host=connections, ttl_dns_cache=None,
                                     keepalive_timeout=30)
    timeout = aiohttp.ClientTimeout(total=cfg.timeout_s, sock_connect=10.0)
    return aiohttp.ClientSession(connector=connector, timeout=timeout, read_bufsize=1 << 18,
                                 auto_decompress=False, skip_auto_headers=("User-Agent",))


async def run_benchmark(cfg: BenchConfig, prompts: list[Prompt],
                        on_progress: Callable[[Progress], None] | None = None,
                        stop: threading.Event | None = None, counter: Counter | None = None) -> dict[str, Any]:
    """One run. `stop` set: no new request from then on, and the requests in flight are cancelled
    within a tenth of a second; the run's figures cover the requests that finished."""
    if not prompts:
        raise ValueError("no prompts to send")
    async with _session(cfg, max(cfg.concurrency or len(prompts), 1) + 4) as session:
        model = cfg.model or await discover_model(session, cfg)
        sem = asyncio.Semaphore(cfg.concurrency) if cfg.concurrency else None
        if cfg.warmup:
            warm = await asyncio.gather(*[send_one(session, cfg, model, prompts[0], time.perf_counter(),
                                                   max_tokens=min(prompts[0].output_len, 32), counter=counter)
                                          for _ in range(cfg.warmup)])
            if not any(w.success for w in warm):
                raise RuntimeError(f"warm-up failed: {warm[0].error}")
            await asyncio.sleep(1.0)
        rng = random.Random(cfg.seed)
        results: list[RequestResult] = []
        done = failed = sent = 0
        stopped = False
        t0 = time.perf_counter()
        t0_wall = time.time()
        # The loop's own thread's CPU: the client is this one event loop (one core at most).
        cpu0 = time.thread_time()

        def stopping() -> bool:
            return (stop is not None and stop.is_set()) or (
                cfg.duration_s is not None and time.perf_counter() - t0 >= cfg.duration_s)

        # A request that waits for a slot is due when the slot is freed: each release made while
        # someone waits is queued here, and the waiters take them in order (both are FIFO).
        freed: collections.deque[float] = collections.deque()
        waiting = 0

        async def one(p: Prompt, due: float) -> None:
            nonlocal done, failed, waiting, sent
            if sem is not None:
                waited = sem.locked()
                waiting += waited
                try:
                    await sem.acquire()
                finally:
                    waiting -= waited
                try:
                    if stopping():
                        return
                    if waited and freed:
                        due = max(due, freed.popleft())
                    sent += 1
                    r = await send_one(session, cfg, model, p, t0, counter=counter, scheduled=due)
                finally:
                    if waiting:
                        freed.append(time.perf_counter())
                    sem.release()
            else:
                sent += 1
                r = await send_one(session, cfg, model, p, t0, counter=counter, scheduled=due)
            results.append(r)
            done += r.success
            failed += not r.success
            if on_progress is not None:
                on_progress(Progress(done, failed, len(prompts), token_times(r),
                                     r.ttft_s * 1000 if r.success else None, [g * 1000 for g in r.itl_s], t0_wall))

        async def issue() -> None:
            # Poisson arrivals on an absolute schedule: a late wakeup does not push every later
            # request back, and how late each one left is its send lag, not lost.
            due = t0
            for p in prompts:
                if stopping():
                    return
                tasks.append(asyncio.ensure_future(one(p, due)))
                if cfg.request_rate != float("inf"):
                    due += rng.expovariate(cfg.request_rate)
                    await asyncio.sleep(max(0.0, due - time.perf_counter()))

        tasks: list[asyncio.Future[None]] = []
        issuer = asyncio.ensure_future(issue())
        watcher = None
        if stop is not None:
            async def watch() -> None:
                nonlocal stopped
                while not stop.is_set():  # noqa: ASYNC110 - a threading.Event, set from the UI's thread
                    await asyncio.sleep(0.1)
                stopped = True
                issuer.cancel()
                for t in tasks:
                    t.cancel()
            watcher = asyncio.ensure_future(watch())
        with contextlib.suppress(asyncio.CancelledError):
            await issuer
        await asyncio.gather(*tasks, return_exceptions=True)
        if watcher is not None:
            watcher.cancel()
        duration = time.perf_counter() - t0
        client_cpu_s = time.thread_time() - cpu0
        metrics = calculate_metrics(results, duration, accept_length=await accept_length(session, cfg))
        metrics.update(client_headroom(results, duration, client_cpu_s, metrics["median_ttft_ms"]))
    metrics.update({
        "model": model, "endpoint": cfg.endpoint, "num_prompts": len(prompts),
        "random_input_len": cfg.input_len, "random_output_len": cfg.output_len,
        "max_concurrency": cfg.concurrency,
        "request_rate": None if cfg.request_rate == float("inf") else cfg.request_rate,
        "stopped": stopped, "not_sent_or_cancelled": len(prompts) - len(results),
        "sent": sent,  # requests that went out (a stop: the rest never did)
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
                result = await self._run_in_worker(i, run_cfg, prompts)
                self.on_result(i, result)

    async def _run_in_worker(self, i: int, cfg: BenchConfig, prompts: list[Prompt]) -> dict[str, Any]:
        """One run in `python -m console.domain.bench.worker` (see there why a process)."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "console.domain.bench.worker", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, limit=1 << 24)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        job = {"config": asdict(cfg), "prompts": [[p.text, p.prompt_len, p.output_len] for p in prompts]}
        proc.stdin.write(json.dumps(job).encode() + b"\n")
        await proc.stdin.drain()

        async def forward_stop() -> None:
            while not self.stop.is_set():  # noqa: ASYNC110 - a threading.Event, set from the UI's thread
                await asyncio.sleep(0.1)
            with contextlib.suppress(ConnectionError, RuntimeError):
                assert proc.stdin is not None
                proc.stdin.write(b"stop\n")
                await proc.stdin.drain()

        stopper = asyncio.ensure_future(forward_stop())
        result: dict[str, Any] | None = None
        error: str | None = None
        try:
            async for line in proc.stdout:
                # Progress (msgspec-written, most of the lines) decoded by msgspec, ~8x faster; the
                # result by json, which reads the NaN json.dumps may have written.
                msg = _decode(line) if line.startswith(b'{"kind":"progress"') else json.loads(line)
                if msg["kind"] == "progress":  # a batch: every request finished since the last one
                    for item in msg["items"]:
                        self.on_progress(i, Progress(**item))
                elif msg["kind"] == "result":
                    result = msg["metrics"]
                else:
                    error = str(msg.get("message"))
            await proc.wait()
        finally:
            stopper.cancel()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        if result is None:
            tail = (await proc.stderr.read())[-300:].decode("utf-8", "replace").strip()
            raise RuntimeError(error or f"the bench worker exited {proc.returncode}: {tail}")
        return result

    def _main(self) -> None:
        try:
            run_loop(self._all())
        except Exception as exc:  # noqa: BLE001 - a failed run is reported, never raised into the UI
            self.on_done(f"{type(exc).__name__}: {exc}"[:300])
            return
        self.on_done(None)


def _decode(line: bytes) -> Any:
    return msgspec.json.decode(line)


def run_loop(coro: Any) -> Any:
    """asyncio.run on uvloop when it is installed (fewer microseconds per wakeup), else asyncio's."""
    if uvloop is None:
        return asyncio.run(coro)
    return uvloop.run(coro)


def public_config(cfg: BenchConfig) -> dict[str, Any]:
    d = asdict(cfg)
    d.pop("api_key", None)
    return d
