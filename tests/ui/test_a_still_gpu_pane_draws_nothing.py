"""A still GPU's sample every second draws nothing: the GPU pane lays its text out again only when
what it shows moved (a value, a process, the histories' visible tail, its size), not at every
sample (issue 36: 30 layouts in the quiet host's 30 s, 25 of them the same text). Its ages still
move: "live" while the samples come, stale once they stop, and a value that moves is drawn."""

from __future__ import annotations

from typing import Any

from console.core.state import HostState, ReadingChanged
from console.model import GpuDevice, GpuStatus, Reading
from tests.kit.hosts import wait_for
from tests.kit.screens import gpu_pane_on_clocks


def _sample(state: HostState, at: float, util: int = 7) -> Reading[GpuStatus]:
    gpus = tuple(GpuDevice(i, "NVIDIA H200", f"GPU-{i}", 1024, 143_771, util, 31, 74.0, 700.0) for i in range(2))
    reading = Reading("gpu", GpuStatus("nvidia-smi-stream", gpus, sampled_at_s=at), at)
    state.apply(ReadingChanged("gpu-01", "gpu", reading))
    return reading


async def test_a_still_gpu_pane_draws_nothing_in_30_s_of_quiet_samples(monkeypatch: Any) -> None:
    from console.ui.panes import gpu as gpu_pane

    laid_out: list[int] = []
    real = gpu_pane.format_gpu_status
    monkeypatch.setattr(gpu_pane, "format_gpu_status", lambda *a, **k: (laid_out.append(1), real(*a, **k))[1])
    # Every sample two seconds after the last on the flush's clock: each one flushed to the pane at
    # once, also once the news has kept coming long enough to be held two seconds (HostScreen.hold_s).
    flush_clock, clock, state, app = gpu_pane_on_clocks(monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.host_screen.pane("gpu")
        await pilot.pause()

        async def second(util: int = 7) -> Reading[GpuStatus]:
            clock.t += 1.0
            flush_clock.t += 2.0
            reading = _sample(state, clock.t, util)
            await wait_for(lambda: pane.reading is not None and pane.reading.ok_at_s == reading.ok_at_s, timeout=30)
            return reading

        for _ in range(pane.content_size.width + 2):  # the histories' visible tail no longer grows
            clock.t += 1.0
            _sample(state, clock.t)
        await second()
        await pilot.pause()
        before, text = len(laid_out), str(pane.render())
        for _ in range(30):
            await second()
        assert len(laid_out) == before, f"{len(laid_out) - before} layouts of the same text in 30 quiet samples"
        assert str(pane.render()) == text
        assert pane.border_subtitle == "live"
        # The samples stop: stale, said by the age timer as before.
        clock.t += 30.0
        app.host_screen._tick()  # the age timer's second
        await wait_for(lambda: str(pane.border_subtitle).startswith("stale"), timeout=30)
        assert pane.has_class("-stale")
        # A value that moves is drawn, and the pane is live again.
        await second(util=93)
        await wait_for(lambda: "93%" in str(pane.render()), timeout=30)
        assert len(laid_out) > before and pane.border_subtitle == "live"
