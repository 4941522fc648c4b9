"""A recording played back never reads "live" (issue 35 item 9): each pane's border says "replay"
where a live console says "live". At 80x24, 120x40 and 200x60."""

from __future__ import annotations

import time

import pytest

from console.core.state import ReadingChanged, ReplayInfo
from console.model import GpuDevice, GpuStatus, Reading
from tests.kit.hosts import wait_for
from tests.kit.screens import offline_state, screen_text

SIZES = [(80, 24), (120, 40), (200, 60)]


@pytest.mark.parametrize("size", SIZES)
async def test_the_panes_of_a_replay_say_replay_not_live(size: tuple[int, int]) -> None:
    from console.ui.app import ConsoleApp

    state = offline_state()
    now = time.time()
    state.replay = ReplayInfo(now - 60, 120.0, 1.0)
    gpus = (GpuDevice(0, "H200", "GPU-0", 1000, 97_887, 10, 40, 100.0, 700.0),)
    state.apply(ReadingChanged("gpu-01", "gpu", Reading("gpu", GpuStatus("nvml", gpus, sampled_at_s=now), now)))
    app = ConsoleApp(state, None)
    async with app.run_test(size=size) as pilot:
        await pilot.press("1")
        await pilot.pause()
        await wait_for(lambda: "replay ─" in screen_text(app), 10)
        assert "live ─" not in screen_text(app)
