"""Aggregate metrics exactly as `sglang.bench_serving.calculate_metrics` defines them (0.5.23):

- duration: from just before the first measured request until every request finished;
- request/input/output/total throughput: counts over that duration;
- TTFT and E2E latency: over successful requests; TPOT = (latency - ttft) / (output_len - 1) for
  output_len > 1 (excludes the first token); ITL: every gap between content chunks pooled, the
  first chunk left out (its tokens arrive with TTFT), a multi-token chunk's gap spread over its
  tokens (as the native backend does);
- concurrency = sum of E2E latencies / duration;
- peak output tokens/s and peak concurrent requests: per 1-second bin of when tokens arrived,
  each chunk counted with the tokens it carried (not as one); unlike bench_serving, a bin's rate is
  its tokens over its own length (the last bin is shorter or longer), so the peak is never below
  the mean output throughput;
- percentiles: linear interpolation (numpy's default).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RequestResult:
    success: bool = False
    prompt_len: int = 0
    output_len: int = 0
    ttft_s: float = 0.0
    latency_s: float = 0.0
    itl_s: list[float] = field(default_factory=list)
    start_s: float = 0.0  # perf_counter at send, relative to the run's start
    error: str | None = None  # one example of what went wrong
    error_kind: str | None = None  # what failures are grouped by: "HTTP 500", "timeout", "stream cut", ...
    chunk_times_s: list[float] = field(default_factory=list)  # content chunks' arrival, from the send
    chunk_tokens: list[int] = field(default_factory=list)  # tokens each chunk carried
    token_count: str = "usage"  # how output tokens were counted: usage, a tokenizer, finish_reason=length, chunks
    send_lag_s: float | None = None  # how late the client began sending it, after its scheduled time


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return 0.0
    return percentile_sorted(sorted(values), pct)


def percentile_sorted(ordered: list[float], pct: float) -> float:
    """As `percentile`, of values already sorted (sort once, read several)."""
    if not ordered:
        return 0.0
    k = (len(ordered) - 1) * pct / 100.0
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _stats(prefix: str, values_s: list[float], *, unknown_when_empty: bool = False) -> dict[str, float | None]:
    """mean/median/std/p90/p95/p99 in ms. With `unknown_when_empty`, no values is unknown (None),
    not 0: a stream of one chunk per request has no gap between tokens to measure (issue 35)."""
    if unknown_when_empty and not values_s:
        return {f"{stat}_{prefix}_ms": None for stat in ("mean", "median", "std", "p90", "p95", "p99")}
    ms = [v * 1000 for v in values_s]
    return {
        f"mean_{prefix}_ms": statistics.fmean(ms) if ms else 0.0,
        f"median_{prefix}_ms": statistics.median(ms) if ms else 0.0,
        f"std_{prefix}_ms": statistics.pstdev(ms) if len(ms) > 1 else 0.0,
        f"p90_{prefix}_ms": percentile(ms, 90),
        f"p95_{prefix}_ms": percentile(ms, 95),
        f"p99_{prefix}_ms": percentile(ms, 99),
    }


MAX_TOKEN_TIMES = 1 << 16  # one request's token times handed to a live chart, at most


def token_times(r: RequestResult) -> list[float]:
    """When each output token arrived, relative to the run's start (a chunk's tokens at its arrival)."""
    if not r.success or r.output_len == 0:
        return []
    if r.chunk_times_s:
        times = []
        for t, n in zip(r.chunk_times_s, r.chunk_tokens, strict=False):
            times.extend([r.start_s + t] * max(1, min(n, MAX_TOKEN_TIMES - len(times))))
            if len(times) >= MAX_TOKEN_TIMES:
                break
        return times
    t = r.start_s + r.ttft_s
    times = [t]
    for gap in r.itl_s:
        t += gap
        times.append(t)
    return times


def _token_bins(r: RequestResult) -> list[tuple[float, int]]:
    """(arrival relative to the run's start, tokens) per chunk; the chunks' counts add up to output_len."""
    if not r.success or r.output_len == 0:
        return []
    if r.chunk_times_s:
        pairs = [(r.start_s + t, max(1, n)) for t, n in zip(r.chunk_times_s, r.chunk_tokens, strict=False)]
        counted = sum(n for _, n in pairs)
        if counted != r.output_len and counted:
            # The final usage said otherwise: put the difference on the last chunk.
            t, n = pairs[-1]
            pairs[-1] = (t, max(0, n + r.output_len - counted))
        return pairs
    return [(t, 1) for t in token_times(r)]


def peaks(results: list[RequestResult], duration_s: float) -> tuple[float, int]:
    """The peak output rate (tok/s) and the most requests in flight, per 1-second bin of the run.

    The bins cover the run's duration exactly: whole seconds, the last one stretched over the
    remainder (a remainder under half a second joins the second before it; a run under a second
    is one bin). Each bin's rate is its tokens over its own length, so the mean output rate is the
    bins' rates weighted by their lengths and the peak is never below it. (bench_serving divides
    every bin by a whole second: a 1.5 s run of 3,000 tokens had a "peak" of 1,500 beside a mean
    of 2,000; 761 tok/s mean beside a 610 "peak" in the demo.)"""
    if duration_s <= 0:
        duration_s = max((t for r in results for t, _ in _token_bins(r)), default=0.0)
    whole = int(duration_s)
    rest = duration_s - whole
    if whole == 0:
        lengths = [max(duration_s, 1e-9)]
    elif rest < 0.5:
        lengths = [1.0] * (whole - 1) + [1.0 + rest]
    else:
        lengths = [1.0] * whole + [rest]
    bins = len(lengths)
    tokens = [0] * bins
    concurrent = [0] * (max(1, int(duration_s) + 1))
    for r in results:
        for t, n in _token_bins(r):
            tokens[min(bins - 1, max(0, int(t)))] += n
        if r.success:
            for b in range(max(0, int(r.start_s)), min(len(concurrent), int(r.start_s + r.latency_s) + 1)):
                concurrent[b] += 1
    return max(n / length for n, length in zip(tokens, lengths, strict=True)), max(concurrent)


def calculate_metrics(results: list[RequestResult], duration_s: float, *, accept_length: float | None = None
                      ) -> dict[str, Any]:
    ok = [r for r in results if r.success]
    total_input = sum(r.prompt_len for r in ok)
    total_output = sum(r.output_len for r in ok)
    dur = duration_s if duration_s > 0 else float("nan")
    tpots = [(r.latency_s - r.ttft_s) / (r.output_len - 1) for r in ok if r.output_len > 1]
    itls = [gap for r in ok for gap in r.itl_s]
    peak_tokens, peak_concurrency = peaks(results, duration_s)
    out: dict[str, Any] = {
        "completed": len(ok),
        "failed": len(results) - len(ok),
        "duration": duration_s,
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "request_throughput": len(ok) / dur,
        "input_throughput": total_input / dur,
        "output_throughput": total_output / dur,
        "total_throughput": (total_input + total_output) / dur,
        **_stats("e2e_latency", [r.latency_s for r in ok]),
        **_stats("ttft", [r.ttft_s for r in ok]),
        **_stats("tpot", tpots),
        **_stats("itl", itls, unknown_when_empty=True),
        "max_itl_ms": max(itls) * 1000 if itls else None,
        "concurrency": sum(r.latency_s for r in ok) / dur,
        "max_output_tokens_per_s": peak_tokens,
        "max_concurrent_requests": peak_concurrency,
        "accept_length": accept_length,
    }
    errors: dict[str, int] = {}
    examples: dict[str, str] = {}
    for r in results:
        if not r.success:
            kind = r.error_kind or r.error or "unknown"
            errors[kind] = errors.get(kind, 0) + 1
            examples.setdefault(kind, r.error or kind)
    out["errors"] = errors  # by kind: "HTTP 500", "timeout", "stream cut", "malformed SSE", ...
    out["error_examples"] = examples  # the first failure of each kind, verbatim (secrets redacted)
    counted = sorted({r.token_count for r in ok})
    out["token_count"] = ", ".join(counted) if counted else None
    return out


# When the client itself is the limit (issue 23 item 4): its event loop busy this much of the run
# (one loop, one core: past it requests queue in the client, uncounted), or requests leaving late
# enough to add more than 5 % to the median TTFT (the most a benchmark in the console may add).
CLIENT_BOUND_CPU_PCT = 80.0
CLIENT_BOUND_LAG_OF_TTFT = 0.05
CLIENT_BOUND_LAG_MIN_MS = 1.0


def client_headroom(results: list[RequestResult], duration_s: float, client_cpu_s: float | None,
                    median_ttft_ms: float) -> dict[str, Any]:
    """How far the client was from being the bottleneck: the lag between each request's
    scheduled and actual send time, the client loop's CPU, and whether either made it the limit."""
    lags = sorted(r.send_lag_s * 1000 for r in results if r.send_lag_s is not None)
    cpu_pct = 100 * client_cpu_s / duration_s if client_cpu_s is not None and duration_s > 0 else None
    out: dict[str, Any] = {
        "client_send_lag_p50_ms": percentile_sorted(lags, 50) if lags else None,
        "client_send_lag_p99_ms": percentile_sorted(lags, 99) if lags else None,
        "client_send_lag_max_ms": lags[-1] if lags else None,
        "client_cpu_pct": cpu_pct,
    }
    reasons = []
    if cpu_pct is not None and cpu_pct >= CLIENT_BOUND_CPU_PCT:
        reasons.append(f"the client's event loop was busy {cpu_pct:.0f} % of the run "
                       f"(>= {CLIENT_BOUND_CPU_PCT:.0f} % of its one core)")
    p99 = out["client_send_lag_p99_ms"]
    limit_ms = max(CLIENT_BOUND_LAG_MIN_MS, CLIENT_BOUND_LAG_OF_TTFT * median_ttft_ms)
    if p99 is not None and p99 >= limit_ms:
        reasons.append(f"requests left {p99:.1f} ms after their scheduled time (p99; >= {limit_ms:.1f} ms, "
                       f"{CLIENT_BOUND_LAG_OF_TTFT:.0%} of the median TTFT)")
    out["client_bound"] = bool(reasons)
    out["client_bound_reason"] = "; ".join(reasons) or None
    return out


def format_client(m: dict[str, Any]) -> list[str]:
    """The client's headroom under the table; a clear warning when it was the limit."""
    if "client_bound" not in m:
        return []
    p50, p99, cpu = m.get("client_send_lag_p50_ms"), m.get("client_send_lag_p99_ms"), m.get("client_cpu_pct")
    lines = ["{:<40} {:<10}".format("Client send lag P50 / P99 (ms):",
                                    "–" if p50 is None else f"{p50:.2f} / {p99:.2f}"),
             "{:<40} {:<10}".format("Client CPU (% of one core):", "–" if cpu is None else f"{cpu:.1f}")]
    if m.get("client_bound"):
        lines.append(f"WARNING: client-bound: {m.get('client_bound_reason')}. These figures measure "
                     "the client as much as the server.")
    return lines


TABLE_ROWS = [
    ("Successful requests:", "completed", "{}"), ("Failed requests:", "failed", "{}"),
    ("Benchmark duration (s):", "duration", "{:.2f}"), ("Total input tokens:", "total_input_tokens", "{}"),
    ("Total generated tokens:", "total_output_tokens", "{}"),
    ("Request throughput (req/s):", "request_throughput", "{:.2f}"),
    ("Input token throughput (tok/s):", "input_throughput", "{:.2f}"),
    ("Output token throughput (tok/s):", "output_throughput", "{:.2f}"),
    ("Peak output token throughput (tok/s):", "max_output_tokens_per_s", "{:.2f}"),
    ("Peak concurrent requests:", "max_concurrent_requests", "{}"),
    ("Total token throughput (tok/s):", "total_throughput", "{:.2f}"),
    ("Concurrency:", "concurrency", "{:.2f}"), ("Accept length:", "accept_length", "{:.2f}"),
]


def _ms(value: Any) -> str:
    """A latency figure, or "unknown" (no gap between tokens was seen: one chunk per request)."""
    return f"{value:.2f}" if isinstance(value, (int, float)) else "unknown"


def format_table(m: dict[str, Any], *, backend: str = "gpuconsole", rate: str = "inf",
                 max_concurrency: str = "not set") -> str:
    """The result table in sglang.bench_serving's layout ("{:<40} {:<10}", banner width 50)."""
    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="),
             "{:<40} {:<10}".format("Backend:", backend), "{:<40} {:<10}".format("Traffic request rate:", rate),
             "{:<40} {:<10}".format("Max request concurrency:", max_concurrency)]
    for label, key, fmt in TABLE_ROWS:
        if m.get(key) is None:
            continue
        lines.append(f"{label:<40} {fmt.format(m[key]):<10}")
    for title, key in (("End-to-End Latency", "e2e_latency"), ("Time to First Token", "ttft"),
                       ("Time per Output Token (excl. 1st token)", "tpot"), ("Inter-Token Latency", "itl")):
        lines.append("{s:{c}^{n}}".format(s=title, n=50, c="-"))
        short = {"e2e_latency": "E2E Latency", "ttft": "TTFT", "tpot": "TPOT", "itl": "ITL"}[key]
        for stat, label in (("mean", "Mean"), ("median", "Median"), ("p90", "P90"), ("p95", "P95"), ("p99", "P99")):
            lines.append("{:<40} {:<10}".format(f"{label} {short} (ms):", _ms(m.get(f"{stat}_{key}_ms"))))
        if key == "itl":
            lines.append("{:<40} {:<10}".format("Max ITL (ms):", _ms(m.get("max_itl_ms"))))
    lines.append("=" * 50)
    lines.extend(format_client(m))
    return "\n".join(lines)
