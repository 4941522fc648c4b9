"""The demo's operator walk: the plan's downtime clock ended at the new server's ready line ("The
server is fired up and ready to roll!") while the busy line beside it still said "warm-up: the ready
line is in, /health_generate not answering yet (HTTP 503)". Real SGLang writes that line once its
warm-up request was served and its status is up (research/sglang_logs_metrics.md; the simulator's
fake does the same), so the 503 was the answer to a probe made before the line. A refusal answered
before the ready line is the boot's: the status says so (never the warm-up, never ready before a
generation answered) and the source asks /health_generate again at once, so the next poll says
ready; a refusal after the line is still the warm-up."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import httpx

from console.domain.analysis.log_state import LogTracker
from console.domain.analysis.server_status import WARMUP_GRACE_S, HttpFacts, combine, ready_line_at
from console.host.parsers.sglang_log import parse_line
from console.host.sources import server as server_source

BOOT = ["[2026-01-01 10:00:00] server_args=ServerArgs(model_path='m', tp_size=2)",
        "[2026-01-01 10:00:01 TP0] Load weight begin. avail mem=94.21 GB",
        "[2026-01-01 10:00:10 TP0] Load weight end. elapsed=9.87 s, type=X, avail mem=36.18 GB, mem usage=58.03 GB.",
        "[2026-01-01 10:00:20 TP0] max_total_num_tokens=893440, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=41, context_len=262144, available_gpu_mem=4.26 GB",
        "[2026-01-01 10:00:30] The server is fired up and ready to roll!"]
INFO = {"status": "ready"}


def _log() -> LogTracker:
    t = LogTracker("t")
    t.feed([parse_line(x) for x in BOOT])
    return t


def _refused(at: float, since: float) -> HttpFacts:
    return HttpFacts(INFO, None, {}, False, at, "HTTP 503", health_ever_ok=False, health_failing_since_s=since)


def test_a_503_answered_before_the_ready_line_is_not_the_warm_up_after_it() -> None:
    log = _log().summary()
    ready = ready_line_at(log)
    assert ready is not None
    line = ready - 1.0  # the line's whole-second stamp: it was written within the second after it
    for answered in (line - 5.0, line + 0.4):  # the poll before the line, and one in the line's own second
        st = combine("u.service", "active", 1, log, _refused(answered, line - 20.0), line + 1.5)
        # never "ready" before a generation answered, never a warm-up the line says is over
        assert st.status == "starting" and st.reason.startswith("ready line in: /health_generate asked again"), st
        assert "came before the line" in st.reason and "HTTP 503" in st.reason and "warm-up" not in st.reason, st


def test_a_503_answered_after_the_ready_line_is_still_the_warm_up() -> None:
    log = _log().summary()
    ready = ready_line_at(log)
    assert ready is not None
    st = combine("u.service", "active", 1, log, _refused(ready + 5.0, ready - 20.0), ready + 6.0)
    assert st.status == "starting" and st.reason.startswith("warm-up: the ready line is in"), st
    stuck = combine("u.service", "active", 1, log, _refused(ready + 5.0, ready - 20.0), ready + WARMUP_GRACE_S)
    assert stuck.status == "degraded", stuck


class _Answers:
    """The server's HTTP answers: /server_info, /health_generate (a 503 until `ready`), counted."""

    def __init__(self) -> None:
        self.ready = False
        self.generates = 0

    def __call__(self, request: Any) -> Any:
        import httpx

        if request.url.path == "/health_generate":
            self.generates += 1
            return httpx.Response(200 if self.ready else 503)
        if request.url.path == "/health":
            return httpx.Response(200 if self.ready else 503)
        if request.url.path == "/server_info":
            return httpx.Response(200, json={"status": "ready"})
        return httpx.Response(404)


async def test_the_ready_line_after_a_refusal_asks_health_generate_again_at_once(monkeypatch: Any) -> None:


    answers = _Answers()
    real_client = httpx.AsyncClient

    def client(*args: Any, **kwargs: Any) -> Any:
        return real_client(*args, transport=httpx.MockTransport(answers), **kwargs)

    monkeypatch.setattr(server_source.httpx, "AsyncClient", client)

    class Transport:
        async def run(self, script: str, timeout: float = 10) -> Any:
            class R:
                text = "ActiveState=active\nSubState=running\nMainPID=4242\nNRestarts=0\n"
            return R()

        async def http_base_url(self, port: int) -> str:
            return f"http://127.0.0.1:{port}"

    log = LogTracker("t")
    log.feed([parse_line(x) for x in BOOT[:-1]])
    watcher = server_source.ServerWatcher(Transport(), "u.service", 30000, log)  # type: ignore[arg-type]
    await watcher.poll()
    await asyncio.wait_for(watcher._health_task, 5)  # type: ignore[arg-type]
    assert answers.generates == 1 and watcher._health[0] is False
    # the server is up, its ready line comes: dated after the refusal (the host's time of the line)
    answers.ready = True
    line = parse_line(BOOT[-1])
    refused_at = watcher._health[1]
    assert refused_at is not None
    log.feed([replace(line, at_s=refused_at + 0.5)])
    await watcher.poll()  # no 5 s wait for the next probe: the refusal was the boot's
    assert watcher._health_task is not None
    await asyncio.wait_for(watcher._health_task, 5)
    assert answers.generates == 2
    status = await watcher.poll()
    assert status.status == "ready" and status.http.health_ok is True, status
