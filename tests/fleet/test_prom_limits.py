"""The Prometheus poller's limits (issue 21 item 7, issue 23 item 6): one deadline for the whole
poll, a cap on an answer's size, values that cannot overflow; and one query per metric."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

import console.domain.fleet.prom as prom
from console.domain.fleet.prom import DCGM, SGLANG, PrometheusFleet, decode_answer, gpu_status, group_samples


def _answer(samples: list[tuple[dict[str, str], str]]) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": labels, "value": [1.0, value]} for labels, value in samples]}}).encode()


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _serve(handler: Handler) -> tuple[asyncio.AbstractServer, str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


@pytest.fixture
async def trickle() -> AsyncIterator[str]:
    """Headers at once, then the body one byte every 0.3 s: each read is quick, the whole is not."""
    body = _answer([]) + b" " * 400

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % len(body))
            for i in range(len(body)):
                writer.write(body[i:i + 1])
                await writer.drain()
                await asyncio.sleep(0.3)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server, url = await _serve(handle)
    yield url
    server.close()


async def test_a_server_that_trickles_does_not_hold_the_poll(trickle: str) -> None:
    """Before: httpx's timeout is per read, so ~130 s of trickle held poll_once all that time."""
    fleet = PrometheusFleet(trickle, timeout_s=1.0)
    try:
        await asyncio.wait_for(fleet.poll_once(), 30)
    finally:
        await fleet.close()
    assert fleet.last_error is not None and "no answer within 1s" in fleet.last_error


async def test_an_answer_past_the_cap_is_refused_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prom, "MAX_ANSWER_BYTES", 1 << 20)
    sent: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            # Chunked, no length: the size shows only as it arrives. 8 MiB, then it would go on.
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            chunk = b"[" * 65536
            for _ in range(128):
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                await writer.drain()
                sent.append(len(chunk))
            await asyncio.sleep(60)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server, url = await _serve(handle)
    fleet = PrometheusFleet(url, timeout_s=20.0)
    try:
        await asyncio.wait_for(fleet.poll_once(), 60)
    finally:
        await fleet.close()
        server.close()
    assert fleet.last_error is not None and "answer larger than 1 MiB" in fleet.last_error, fleet.last_error


def test_huge_values_are_said_out_of_range_not_an_overflow() -> None:
    """Before: FB_USED + FB_FREE of 1e308 each is inf, and int(inf) raised OverflowError."""
    labels = {"gpu": "0", "UUID": "GPU-a", "Hostname": "node-1"}
    body = _answer([({**labels, "__name__": "DCGM_FI_DEV_FB_USED"}, "1e308"),
                    ({**labels, "__name__": "DCGM_FI_DEV_FB_FREE"}, "1e308"),
                    ({**labels, "__name__": "DCGM_FI_DEV_GPU_UTIL"}, "-1e308"),
                    ({**labels, "__name__": "DCGM_FI_DEV_POWER_USAGE"}, "350.5")])
    grouped = group_samples(decode_answer(body), [])
    status = gpu_status(grouped["node-1"], 1.0)
    gpu = status.gpus[0]
    assert gpu.memory_used_mib is None and gpu.memory_total_mib is None and gpu.utilization_pct is None
    assert gpu.power_w == 350.5
    assert sum("1e308" in p for p in grouped["node-1"].problems) == 3
    fleet = PrometheusFleet("http://127.0.0.1:1")
    fleet.apply(grouped, 1.0)  # into the state and its GPU history: no exception either
    assert fleet.states["node-1"].data("gpu").gpus[0].power_w == 350.5


async def test_one_exact_name_query_per_metric_all_hosts_at_once() -> None:
    """Before: two queries a cycle with a `__name__=~"A|B|C|D"` regex, which Prometheus answers
    several times slower than exact names (500 hosts: 460-680 ms against 30-80 ms each)."""
    queries: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import urllib.parse

        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                target = head.split(b" ", 2)[1].decode()
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)["query"][0]
                queries.append(query)
                name = query.split('"', 2)[1]
                labels = {"Hostname": "node-1"}
                if not query.startswith("max by"):  # an aggregation's answer has no __name__
                    labels["__name__"] = name
                if name.startswith("DCGM"):
                    labels["gpu"] = "0"
                if name == "DCGM_FI_DEV_FB_USED":
                    labels["UUID"] = "GPU-x"
                body = _answer([(labels, "3")])
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(body), body))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server, url = await _serve(handle)
    fleet = PrometheusFleet(url, match='job="gpu"', timeout_s=10)
    try:
        await asyncio.wait_for(fleet.poll_once(), 30)
    finally:
        await fleet.close()
        server.close()
    assert fleet.last_error is None
    assert len(queries) == len(DCGM + SGLANG) and not any("=~" in q for q in queries)
    for name in DCGM + SGLANG:  # each exact name once, with the --match matchers
        assert sum(f'{{__name__="{name}",job="gpu"}}' in q for q in queries) == 1, (name, queries)
    # The fields other than the identity one come without the labels nobody reads.
    assert sum(q.startswith("max by (") for q in queries) == len(DCGM) - 1
    state = fleet.states["node-1"]
    gpu = state.data("gpu").gpus[0]
    assert (gpu.memory_used_mib, gpu.memory_total_mib, gpu.utilization_pct, gpu.power_w, gpu.uuid) == \
        (3, 6, 3, 3.0, "GPU-x")
    assert state.data("server") is not None
