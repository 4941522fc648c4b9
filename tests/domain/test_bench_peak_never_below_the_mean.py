"""The benchmark's peak output rate is a peak of the same quantity as the mean output throughput
(tok/s): never below it, whatever the run's length or how its tokens bunch (issue 35 item 5: the
pane showed "out tok/s 761" beside "peak tok/s 610")."""

from __future__ import annotations

import random

import pytest

from console.domain.bench.metrics import RequestResult, calculate_metrics


def _run(rng: random.Random, duration_s: float) -> list[RequestResult]:
    results = []
    for _ in range(rng.randint(1, 12)):
        start = rng.uniform(0, duration_s * 0.8)
        latency = rng.uniform(0.01, duration_s - start)
        n = rng.randint(1, 40)
        ttft = latency * rng.uniform(0.0, 0.5)
        gaps = [(latency - ttft) / max(1, n - 1)] * (n - 1)
        results.append(RequestResult(True, 8, n, ttft_s=ttft, latency_s=latency, itl_s=gaps, start_s=start))
    return results


@pytest.mark.parametrize("seed", range(200))
def test_the_peak_rate_is_never_below_the_mean_rate(seed: int) -> None:
    rng = random.Random(seed)
    duration = rng.choice([0.3, 0.9, 1.2, 1.5, 1.99, 2.4, 3.7, 10.2])
    m = calculate_metrics(_run(rng, duration), duration_s=duration)
    assert m["max_output_tokens_per_s"] >= m["output_throughput"] * (1 - 1e-9), m


def test_tokens_at_both_ends_of_a_short_run_peak_at_the_mean_not_below_it() -> None:
    """Half the tokens in the first half second, half in the last: bench_serving's whole-second
    bins give 1,500 tok/s beside a mean of 2,143; here the last 0.4 s joins the second before it."""
    a = RequestResult(True, 8, 1500, ttft_s=0.1, latency_s=0.4, itl_s=[0.3 / 1499] * 1499, start_s=0.0)
    b = RequestResult(True, 8, 1500, ttft_s=0.1, latency_s=0.4, itl_s=[0.3 / 1499] * 1499, start_s=1.0)
    m = calculate_metrics([a, b], duration_s=1.4)
    assert m["output_throughput"] == pytest.approx(3000 / 1.4)
    assert m["max_output_tokens_per_s"] == pytest.approx(3000 / 1.4)


def test_a_busy_second_is_still_the_peak() -> None:
    """Whole seconds stay whole: a second with 900 tokens beside quieter ones is the peak."""
    busy = RequestResult(True, 8, 900, ttft_s=0.05, latency_s=0.9, itl_s=[0.85 / 899] * 899, start_s=1.0)
    quiet = RequestResult(True, 8, 100, ttft_s=0.05, latency_s=2.9, itl_s=[2.85 / 99] * 99, start_s=0.0)
    m = calculate_metrics([busy, quiet], duration_s=3.0)
    assert 930 <= m["max_output_tokens_per_s"] <= 1000 and m["output_throughput"] == pytest.approx(1000 / 3)
