"""A stream that gives each answer in one chunk has no gap between tokens: its ITL is unknown, never
0.00 ms (issue 35 item 9: every path's report said "median ITL 0.00 ms")."""

from __future__ import annotations

from console.domain.bench.metrics import RequestResult, calculate_metrics, format_table


def test_one_chunk_per_answer_leaves_the_inter_token_latency_unknown() -> None:
    one_chunk = [RequestResult(True, 8, 64, ttft_s=0.4, latency_s=0.4, itl_s=[], start_s=0.1 * i) for i in range(4)]
    m = calculate_metrics(one_chunk, duration_s=1.0)
    assert m["median_itl_ms"] is None and m["p99_itl_ms"] is None and m["max_itl_ms"] is None
    table = format_table(m)
    assert "Median ITL (ms):                         unknown" in table and "0.00" not in table.split("Inter-Token")[1]
    # With gaps, figures as before.
    streamed = [RequestResult(True, 8, 3, ttft_s=0.1, latency_s=0.3, itl_s=[0.1, 0.1], start_s=0.0)]
    assert calculate_metrics(streamed, duration_s=1.0)["median_itl_ms"] == 100.0
