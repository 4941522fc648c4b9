"""A pane shown again (restored from behind a maximized one) renders what it missed once, at its
new size: it was rendered with its news, again by the screen's relayout and once more by its
resize (three renders for one change), and every pane hidden behind a newly maximized one was
rendered by the relayout though nothing of it could be seen."""

from __future__ import annotations

from typing import Any

from console.core.state import HostState, ReadingChanged
from console.model import GpuDevice, GpuStatus, Reading


class _Clock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _gpu(state: HostState, clock: _Clock, util: int) -> None:
    gpu = GpuDevice(0, "x", "GPU-0", 1, 2, util, 40, 100.0, 600.0)
    state.apply(ReadingChanged("h", "gpu", Reading("gpu", GpuStatus("nvml", (gpu,), sampled_at_s=clock.t), clock.t)))


async def test_a_restored_pane_renders_its_news_once_and_a_hidden_one_not_at_all(monkeypatch: Any) -> None:
    from console.ui.app import ConsoleApp

    clock = _Clock()
    state = HostState("h", label="h", clock=clock)
    _gpu(state, clock, 10)
    app = ConsoleApp(state, None)
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.pause()
        screen = app.host_screen
        pane = screen.pane("gpu")
        rendered: list[int] = []
        real = pane.render_reading

        def render(reading: Any) -> Any:
            rendered.append(reading.data.gpus[0].utilization_pct if reading is not None and reading.data else -1)
            return real(reading)

        monkeypatch.setattr(pane, "render_reading", render)
        screen.action_toggle_max("log")
        for _ in range(4):
            await pilot.pause()
        for util in (11, 12, 13):  # news while hidden: not rendered
            clock.t += 1.0
            _gpu(state, clock, util)
            await pilot.pause()
        assert rendered == [], "a pane hidden behind a maximized one was rendered"
        screen.action_toggle_max("log")  # restored
        for _ in range(6):
            await pilot.pause()
        assert rendered == [13], "restored: its news rendered once, at its new size"
        assert real(pane.reading).plain == pane._shown_key[0]  # what it shows is the newest reading's
