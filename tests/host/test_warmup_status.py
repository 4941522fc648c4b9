"""Issue 20 item 5 / issue 22 item 13: an honest status through the warm-up, and what the
console's probes cost the server (a real generation only when the cheap signals disagree)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from console.domain.analysis.log_state import LogTracker
from console.domain.analysis.server_status import WARMUP_GRACE_S, HttpFacts, combine, ready_line_at
from console.host.parsers.sglang_log import parse_line

READY = "[2026-01-01 10:00:30] The server is fired up and ready to roll!"
BOOT = ["[2026-01-01 10:00:00] server_args=ServerArgs(model_path='m', tp_size=2)",
        "[2026-01-01 10:00:01 TP0] Load weight begin. avail mem=94.21 GB",
        "[2026-01-01 10:00:10 TP0] Load weight end. elapsed=9.87 s, type=X, avail mem=36.18 GB, mem usage=58.03 GB.",
        "[2026-01-01 10:00:11 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 893440, K size: 5.11 GB, "
        "V size: 5.11 GB",
        # the other rank, late: the same boot, not a step back
        "[2026-01-01 10:00:11 TP1] Load weight end. elapsed=9.90 s, type=X, avail mem=36.18 GB, mem usage=58.03 GB.",
        "[2026-01-01 10:00:20 TP0] max_total_num_tokens=893440, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=41, context_len=262144, available_gpu_mem=4.26 GB",
        READY,
        "[2026-01-01 10:00:31 TP1] max_total_num_tokens=893440, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=41, context_len=262144, available_gpu_mem=4.26 GB"]


def _tracker() -> LogTracker:
    t = LogTracker("t")
    t.feed([parse_line(x) for x in BOOT])
    return t


def test_another_ranks_late_line_is_not_a_new_boot_nor_an_earlier_phase() -> None:
    s = _tracker().summary()
    assert s.phase == "ready"
    assert [b.phase for b in s.boot][0] == "launch" and "ready" in [b.phase for b in s.boot]


def test_a_503_six_seconds_after_the_ready_line_is_the_warm_up_not_degraded() -> None:
    log = _tracker().summary()
    info = {"status": "ready"}
    r = ready_line_at(log)  # the probes' times on the line's clock (a 503 answered before it is the boot's)
    assert r is not None
    warming = HttpFacts(info, None, {}, False, r + 6, "HTTP 503", health_ever_ok=False, health_failing_since_s=r)
    st = combine("u.service", "active", 1, log, warming, r + 6)
    assert st.status == "starting" and st.reason.startswith("warm-up: the ready line is in"), st
    assert "sizing the pools" not in st.reason
    # once it has answered, a failure is a fault
    broken = HttpFacts(info, None, {}, False, r + 6, "HTTP 503", health_ever_ok=True, health_failing_since_s=r)
    assert combine("u.service", "active", 1, log, broken, r + 6).status == "degraded"
    # and a warm-up that never ends is one too
    stuck = HttpFacts(info, None, {}, False, r + 6, "HTTP 503", health_ever_ok=False, health_failing_since_s=r - 100)
    assert combine("u.service", "active", 1, log, stuck, r + WARMUP_GRACE_S).status == "degraded"
    # no HTTP yet after the ready line: the warm-up, never "sizing the pools"
    st = combine("u.service", "active", 1, log, HttpFacts(None, "refused", {}), r + 6)
    assert st.status == "starting" and "warm-up" in st.reason


async def test_a_serving_server_gets_no_generation_while_health_and_the_log_agree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from console.demo.hostsim import HostSimulator
    from console.demo.hostsim.scenario import OLD_UNIT, start_scenario
    from console.host.sources import server as server_source
    from console.host.transport.ssh import SshTransport
    from tests.kit.hosts import sim_options, wait_for

    monkeypatch.setattr(server_source, "HEALTH_EVERY_S", 0.3)  # the 25 s, shortened
    sim = HostSimulator(tmp_path / "h", speed=0.2)  # the old server serves for the whole test
    await sim.start()
    transport = SshTransport(sim_options(sim))
    try:
        await start_scenario(sim, driven=False)
        await transport.connect()
        log = LogTracker("log")
        watcher = server_source.ServerWatcher(transport, OLD_UNIT, sim.server_port, log)
        decode = ("[2026-01-01 10:00:00 TP0] Decode batch, #running-req: 4, #token: 9000, token usage: 0.01, "
                  "gen throughput (token/s): 400.00, #queue-req: 0, ")
        statuses = []
        for _ in range(12):
            log.feed([parse_line(decode)])  # the log keeps showing decode batches
            statuses.append(await watcher.poll())
            await asyncio.sleep(0.35)
        await wait_for(lambda: watcher._health_task is None or watcher._health_task.done(), 25)
        assert watcher.generate_probes == 1  # the first answer only; then /health and the log sufficed
        assert statuses[-1].status == "ready" and statuses[-1].reason == "serving: /health and the log agree"
    finally:
        await transport.close()
        await sim.stop()


def test_the_status_line_takes_gen_and_running_from_the_newest_decode_line() -> None:
    t = _tracker()
    t.feed([parse_line("[2026-01-01 10:01:00 TP0] Decode batch, #running-req: 7, #token: 9000, token usage: 0.01, "
                       "gen throughput (token/s): 812.50, #queue-req: 0, ")], now_s=500.0)
    metrics = {"sglang:gen_throughput": 120.0, "sglang:num_running_reqs": 2.0}  # a scrape of earlier
    st = combine("u.service", "active", 1, t.summary(), HttpFacts({"status": "ready"}, None, metrics, True), 505.0)
    assert (st.gen_throughput, st.running_reqs) == (812.5, 7.0)
    # a decode line of minutes ago says nothing of now: the gauge then
    st = combine("u.service", "active", 1, t.summary(), HttpFacts({"status": "ready"}, None, metrics, True), 900.0)
    assert (st.gen_throughput, st.running_reqs) == (120.0, 2.0)
