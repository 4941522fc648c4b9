"""The host screen's age timer runs when something on screen next reads differently, not every
second (issue 36: 30 wake-ups in the quiet host's 30 s, for nothing): with fresh GPUs and a
fresh host summary it is armed for the moment the first of them would go stale, and at that
moment the stale one is marked stale, as before."""

from __future__ import annotations

import time

from console.core.freshness import stale_after_s
from console.core.state import HostState, ReadingChanged
from console.model import GpuDevice, GpuStatus, HostSummary, Reading
from tests.kit.hosts import wait_for


def _gpus(at: float) -> ReadingChanged:
    gpu = GpuDevice(0, "NVIDIA H200", "GPU-0", 1024, 143_771, 7, 31, 74.0, 700.0)
    return ReadingChanged("gpu-01", "gpu", Reading("gpu", GpuStatus("nvidia-smi-stream", (gpu,), sampled_at_s=at), at))


def _host(at: float) -> ReadingChanged:
    summary = HostSummary("gpu-01", "6.8", 3600.0, 0.1, 0.1, 0.1, 2, ())
    return ReadingChanged("gpu-01", "host", Reading("host", summary, at))


async def test_the_age_timer_is_armed_for_the_next_stale_moment_and_marks_it() -> None:
    from console.ui.app import ConsoleApp

    state = HostState("gpu-01", label="gpu-01")  # the wall clock: live
    app = ConsoleApp(state, None)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.host_screen
        now = time.time()
        state.apply(_host(now))
        state.apply(_gpus(now))
        pane = screen.pane("gpu")
        await wait_for(lambda: pane.border_subtitle == "live", timeout=30)
        await pilot.pause()
        # Nothing reads differently before the GPUs' or the host summary's stale moment.
        first_stale = min(stale_after_s("gpu"), stale_after_s("host"))  # type: ignore[type-var]
        assert screen._ages_wait_s() > first_stale - 2.0 > 1.0
        # A sample about to go stale: the timer comes at that moment and says so.
        old = time.time() - stale_after_s("gpu") + 3.0  # type: ignore[operator]
        state.apply(_gpus(old))
        await wait_for(lambda: str(pane.border_subtitle).startswith("stale"), timeout=30)
        assert pane.has_class("-stale") and screen.age_ticks >= 1
