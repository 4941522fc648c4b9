"""The server poll's cadence follows what changes on the host (issue 36): a host where nothing
answers, no unit runs and the log is still is asked every 15 s, not every 5; a booting server
every 2 s; the log moving again wakes a slowed poll at once; and the cadence, when it is not the
usual, is said on screen beside the server's status."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

from console.domain.analysis.log_state import LogTracker
from console.domain.analysis.server_status import HttpFacts, ServerStatus, combine
from console.host.parsers.sglang_log import parse_line
from console.host.sources.server import poll_every_s, server_source
from console.ui.panes.log import format_status
from tests.kit.hosts import wait_for


def _nothing_answers(now: float, log: LogTracker | None = None) -> ServerStatus:
    return combine(None, None, None, log.summary() if log else None,
                   HttpFacts(server_info_error="connection refused"), now)


def _line(now: float) -> list:
    stamp = datetime.fromtimestamp(now).strftime("%Y-%m-%d %H:%M:%S")
    return [parse_line(f"[{stamp}] Load weight begin. avail mem=78.12 GB")]


def test_the_cadence_is_slower_on_a_quiet_host_and_faster_while_it_boots() -> None:
    now = time.time()
    quiet = _nothing_answers(now)
    assert poll_every_s(quiet, None, now, 5.0) == 15.0  # nothing answers, no unit, no log
    assert poll_every_s(quiet, now - 300, now, 5.0) == 15.0  # the log still for five minutes
    assert poll_every_s(quiet, now - 3, now, 5.0) == 5.0  # the log moving: something may be coming up
    tracker = LogTracker("file")
    tracker.feed(_line(now), now)
    booting = _nothing_answers(now, tracker)
    assert booting.phase == "weights loading"  # no unit, no answer yet: the log says it boots
    assert poll_every_s(booting, now, now, 5.0) == 2.0
    serving = combine(None, None, None, None, HttpFacts(server_info={"version": "0.5.5"}, health_ok=True,
                                                        health_at_s=now, health_ever_ok=True), now)
    assert poll_every_s(serving, now - 300, now, 5.0) == 5.0


class _Watcher:
    def __init__(self, log: LogTracker, unit: str | None = None) -> None:
        self.log = log
        self.unit = unit
        self.container = None
        self.polls = 0
        self.answers = False  # a server answers on its port

    async def poll(self) -> ServerStatus:
        self.polls += 1
        if self.answers:
            return combine(None, None, None, None, HttpFacts(server_info={"version": "0.5.5"}), time.time())
        return _nothing_answers(time.time(), self.log)


async def test_a_slowed_poll_says_its_cadence_and_is_woken_by_the_log() -> None:
    tracker = LogTracker("file")
    watcher = _Watcher(tracker)
    source = server_source(watcher, interval_s=5.0, quiet_after_s=0.0)  # type: ignore[arg-type]
    readings = source.readings()
    first = await anext(readings)
    assert first.detail == "polled every 15s" and source.interval_s == 15.0
    # Said on screen, beside the status.
    shown = format_status(first, None, width=100).plain
    assert "polled every 15s" in shown
    # The log moves (a server starting by hand): the poll comes at once, not 15 s later.
    second = asyncio.ensure_future(anext(readings))
    await asyncio.sleep(0)
    tracker.feed(_line(time.time()))
    await wait_for(second.done, timeout=10)
    reading = second.result()
    assert reading.data is not None and reading.data.phase == "weights loading"
    assert reading.detail == "polled every 2s" and "polled every 2s" in format_status(reading, None, width=100).plain
    await readings.aclose()


async def test_a_host_just_gone_quiet_is_polled_at_the_usual_cadence_for_a_minute() -> None:
    """A unit just stopped (a swap under way) is not a quiet host yet: polled every 5 s until it
    has been quiet for `quiet_after_s`."""
    watcher = _Watcher(LogTracker("file"), unit="sglang-qwen.service")
    source = server_source(watcher, interval_s=5.0)  # type: ignore[arg-type]
    readings = source.readings()
    first = await anext(readings)
    assert first.data is not None and first.detail is None and source.interval_s == 5.0
    await readings.aclose()


async def test_a_server_seen_answering_then_gone_is_polled_at_the_usual_cadence_for_a_minute() -> None:
    """No unit, but a server answered (one started by hand, now stopped): it may be restarting."""
    watcher = _Watcher(LogTracker("file"))
    watcher.answers = True
    source = server_source(watcher, interval_s=5.0)  # type: ignore[arg-type]
    readings = source.readings()
    await anext(readings)
    watcher.answers = False
    second = asyncio.ensure_future(anext(readings))
    await asyncio.sleep(0)
    source.wake()  # the next poll now, not 5 s later
    await wait_for(second.done, timeout=10)
    gone = second.result()
    assert gone.data is not None and gone.detail is None and source.interval_s == 5.0
    await readings.aclose()


async def test_a_host_with_no_unit_where_nothing_ever_answered_is_slowed_from_its_first_poll() -> None:
    """Nothing there could have just stopped: 15 s from the first poll, said on screen (the quiet
    host polled its server 6 times in its first 30 s, for nothing)."""
    watcher = _Watcher(LogTracker("file"))
    source = server_source(watcher, interval_s=5.0)  # type: ignore[arg-type]
    readings = source.readings()
    first = await anext(readings)
    assert first.detail == "polled every 15s" and source.interval_s == 15.0
    await readings.aclose()
