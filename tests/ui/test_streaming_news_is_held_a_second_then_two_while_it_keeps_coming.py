"""While the host's data keeps coming (a GPU sample each second, log batches, polls), the host
screen flushes it to the panes once a second at most, not once a frame: a second's changes cost one
repaint of each pane they touch (issue 36: the demo drew 78 frames in 30 s, its log pane 63 times).
The first change after a quiet second goes out at once, and the swap's news is never held back.
News that has kept coming for ten seconds (a serving host) is held two seconds, until it pauses."""

from __future__ import annotations

from typing import Any

from console.core.derive.swap_view import SwapStep, SwapStepChanged
from console.core.state import HostInfo, HostState, ReadingChanged
from console.model import Reading
from tests.kit.clocks import Clock
from tests.kit.hosts import wait_for


def _gpu_error(i: int) -> ReadingChanged:
    return ReadingChanged("gpu-01", "gpu", Reading("gpu", error=f"nvidia-smi: failure {i}", error_at_s=1.0 + i))


async def test_changes_that_keep_coming_are_flushed_once_a_second_and_the_swap_at_once(monkeypatch: Any) -> None:
    from console.ui import host_screen
    from console.ui.app import ConsoleApp

    held = Clock(5_000.0)  # the flush cadence's clock, held still: every change falls in one busy second
    monkeypatch.setattr(host_screen, "_monotonic", held, raising=False)
    state = HostState("gpu-01", label="gpu-01", clock=Clock())
    state.apply(HostInfo("gpu-01", "gpu-01", log_label="journal: sglang.service"))
    app = ConsoleApp(state, None)
    async with app.run_test(size=(200, 60)) as pilot:
        screen = app.host_screen
        gpu = screen.pane("gpu")
        told: list[str] = []
        original = gpu.state_changed
        monkeypatch.setattr(gpu, "state_changed", lambda st, source: (told.append(source), original(st, source)))
        await pilot.pause()
        held.t += 5.0  # quiet for five seconds: the next change goes out at once
        state.apply(_gpu_error(1))
        await wait_for(lambda: told == ["gpu"], timeout=30)
        # Two more within the same second: held for the second, not sent at the next frame.
        for i in (2, 3):
            state.apply(_gpu_error(i))
            await pilot.pause()
            assert told == ["gpu"]
            assert screen._flush_timer is not None  # a flush is due...
            assert screen._flush_at - held.t >= 0.5  # ...at the busy second's end, not the next frame
        # The swap's news is not held: it goes out at the next frame, and takes the GPU's with it.
        state.apply(SwapStepChanged("gpu-01", SwapStep("stop_old", "Stop the old server", "running")))
        await wait_for(lambda: told == ["gpu", "gpu"], timeout=30)
        assert "failure 3" in str(gpu.reading.error)
        # One more GPU change in the busy second: it comes with the next second's flush, by itself.
        state.apply(_gpu_error(4))
        await pilot.pause()
        assert told == ["gpu", "gpu"]
        await wait_for(lambda: told == ["gpu", "gpu", "gpu"], timeout=30)
        assert "failure 4" in str(gpu.reading.error)


async def test_news_that_keeps_coming_is_flushed_every_two_seconds_until_it_pauses(monkeypatch: Any) -> None:
    """A serving host's news comes every second without end: once it has kept coming for ten
    seconds, it is flushed every two (a frame is the console's largest cost on a steady host); a
    pause ends it, and the next news goes out at once, then a second apart again."""
    from console.ui import host_screen
    from console.ui.app import ConsoleApp

    held = Clock(5_000.0)  # the flush cadence's clock, moved by hand
    monkeypatch.setattr(host_screen, "_monotonic", held, raising=False)
    state = HostState("gpu-01", label="gpu-01", clock=Clock())
    app = ConsoleApp(state, None)
    async with app.run_test(size=(200, 60)) as pilot:
        screen = app.host_screen
        gpu = screen.pane("gpu")
        told: list[str] = []
        original = gpu.state_changed
        monkeypatch.setattr(gpu, "state_changed", lambda st, source: (told.append(source), original(st, source)))
        await pilot.pause()
        held.t += 5.0
        state.apply(_gpu_error(1))
        await wait_for(lambda: len(told) == 1, timeout=30)
        # A change every second for the next nine: each goes out at once (a second after the last flush).
        for i in range(2, 11):
            held.t += 1.0
            state.apply(_gpu_error(i))
            await wait_for(lambda: len(told) == i, timeout=30)
        # Ten seconds of news without a pause: the next one, a second after the last flush, is held.
        held.t += 1.0
        state.apply(_gpu_error(11))
        await pilot.pause()
        assert len(told) == 10
        assert screen._flush_timer is not None and screen._flush_at - held.t >= 0.9, "held for the second second"
        held.t += 1.0
        await wait_for(lambda: len(told) == 11, timeout=30)  # two seconds after the last flush
        assert "failure 11" in str(gpu.reading.error)
        # A pause of five seconds: the next change goes out at once, and the one after it a second later too.
        for i, gap in ((12, 5.0), (13, 1.0)):
            held.t += gap
            state.apply(_gpu_error(i))
            await wait_for(lambda: len(told) == i, timeout=30)
            assert screen._flush_timer is None
