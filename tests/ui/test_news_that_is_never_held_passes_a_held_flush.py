"""The swap's, the connection's and the pairing's news is never held for the busy second: it goes out
at the next frame also while a flush of streaming news is held. The screen posted one wake-up until
its next flush, so news that came while a flush was held waited for that flush (a second, two on a
steady host) like the GPUs'. The host summary, a reading every few seconds, is streaming news: it
is held with the rest (it went out at the next frame each time, a repaint of its own)."""

from __future__ import annotations

from typing import Any

from console.core.derive.swap_view import SwapStep, SwapStepChanged
from console.core.state import ConnectionChanged, HostInfo, HostState, ReadingChanged
from console.host.transport.base import ConnectionState
from console.model import HostSummary, Reading
from tests.kit.hosts import wait_for

HOUR_S = 3600.0  # a held flush that does not come while the test runs


def _gpu_error(i: int) -> ReadingChanged:
    return ReadingChanged("gpu-01", "gpu", Reading("gpu", error=f"nvidia-smi: failure {i}", error_at_s=1.0 + i))


def _host(load: float) -> ReadingChanged:
    summary = HostSummary("gpu-01", "6.8", 3600.0, load, 0.1, 0.1, 2, ())
    return ReadingChanged("gpu-01", "host", Reading("host", summary, 1000.0))


def _held_screen(monkeypatch: Any) -> tuple[HostState, Any]:
    from console.ui import host_screen
    from console.ui.app import ConsoleApp

    monkeypatch.setattr(host_screen, "BUSY_FLUSH_S", HOUR_S)
    monkeypatch.setattr(host_screen, "STEADY_FLUSH_S", HOUR_S)
    state = HostState("gpu-01", label="gpu-01")
    state.apply(HostInfo("gpu-01", "gpu-01", log_label="journal: sglang.service"))
    return state, ConsoleApp(state, None)


async def _hold_a_flush(state: HostState, screen: Any, pilot: Any) -> None:
    """The first news goes out at once; the next is held (for an hour here)."""
    flushes = screen.flushes
    state.apply(_gpu_error(1))
    await wait_for(lambda: screen.flushes == flushes + 1, timeout=30)
    state.apply(_gpu_error(2))
    await pilot.pause()
    assert screen._flush_timer is not None and screen.flushes == flushes + 1


async def test_the_swaps_news_is_not_kept_waiting_by_a_held_flush(monkeypatch: Any) -> None:
    state, app = _held_screen(monkeypatch)
    async with app.run_test(size=(200, 60)) as pilot:
        screen = app.host_screen
        await pilot.pause()
        await _hold_a_flush(state, screen, pilot)
        flushes = screen.flushes
        state.apply(SwapStepChanged("gpu-01", SwapStep("stop_old", "Stop the old server", "running")))
        await wait_for(lambda: screen.flushes == flushes + 1, timeout=30)
        assert screen.flush_causes["swap"] >= 1
        assert "failure 2" in str(screen.pane("gpu").reading.error)  # the held news goes with it


async def test_the_connection_is_not_kept_waiting_by_a_held_flush(monkeypatch: Any) -> None:
    state, app = _held_screen(monkeypatch)
    async with app.run_test(size=(200, 60)) as pilot:
        screen = app.host_screen
        await pilot.pause()
        await _hold_a_flush(state, screen, pilot)
        flushes = screen.flushes
        state.apply(ConnectionChanged("gpu-01", ConnectionState("gpu-01", "reconnecting", 1000.0, detail="connection lost")))
        await wait_for(lambda: screen.flushes == flushes + 1, timeout=30)
        assert screen.header.state is not None and screen.header.state.status == "reconnecting"


async def test_the_host_summary_is_held_with_the_streaming_news(monkeypatch: Any) -> None:
    state, app = _held_screen(monkeypatch)
    async with app.run_test(size=(200, 60)) as pilot:
        screen = app.host_screen
        await pilot.pause()
        flushes = screen.flushes
        state.apply(_gpu_error(1))
        await wait_for(lambda: screen.flushes == flushes + 1, timeout=30)
        state.apply(_host(0.5))  # a flush went out a moment ago: the summary waits for the next one
        for _ in range(3):
            await pilot.pause()
        assert screen.flushes == flushes + 1 and screen._flush_timer is not None
        screen.flush()  # the held flush: the header draws the summary then
        assert screen.header.summary is not None and screen.header.summary.data.load_1m == 0.5
