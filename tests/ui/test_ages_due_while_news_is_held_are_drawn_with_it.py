"""An age that comes due while streaming news is held for the busy second ("stale 12s" the next
second) is drawn with the held flush when that flush comes within the age's finest step (a second):
one repaint, not one for the age and another a moment later for the news. An age due while no flush
is held, or a flush further off, is drawn at once as before."""

from __future__ import annotations

from typing import Any

from console.core.state import HostState, ReadingChanged
from console.model import GpuDevice, GpuStatus, Reading

HOUR_S = 3600.0


class _Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _gpu(at: float) -> ReadingChanged:
    gpu = GpuDevice(0, "x", "GPU-0", 1, 2, 5, 40, 100.0, 600.0)
    return ReadingChanged("h", "gpu", Reading("gpu", GpuStatus("nvml", (gpu,), sampled_at_s=at), at))


def _server_error(i: int, at: float) -> ReadingChanged:
    return ReadingChanged("h", "server", Reading("server", error=f"http: refused {i}", error_at_s=at))


async def test_an_age_due_while_a_flush_is_held_is_drawn_with_that_flush(monkeypatch: Any) -> None:
    from console.ui import host_screen
    from console.ui.app import ConsoleApp

    cadence = _Clock(5_000.0)  # the flush cadence's clock, moved by hand
    monkeypatch.setattr(host_screen, "_monotonic", cadence)
    monkeypatch.setattr(host_screen, "BUSY_FLUSH_S", HOUR_S)  # the real timer of a held flush never comes
    clock = _Clock(1_000_000.0)  # the state's clock: the ages
    state = HostState("h", label="h", clock=clock)
    t0 = clock.t
    state.apply(_gpu(t0))
    app = ConsoleApp(state, None)
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.pause()
        screen = app.host_screen
        gpu = screen.pane("gpu")
        clock.t = t0 + 12.0
        screen._tick()
        assert str(gpu.border_subtitle) == "stale 12s"  # no flush held: drawn at once
        cadence.t += 10.0
        flushes = screen.flushes
        state.apply(_server_error(1, clock.t))  # news after a pause: out at once
        await pilot.pause()
        await pilot.pause()
        assert screen.flushes == flushes + 1
        state.apply(_server_error(2, clock.t))  # and the next held
        await pilot.pause()
        assert screen._flush_timer is not None
        cadence.t = screen._flush_at - 0.5  # the held flush comes in half a second

        asked: list[float | None] = []
        real = gpu.update_age
        monkeypatch.setattr(gpu, "update_age", lambda now_s=None: (asked.append(now_s), real(now_s)))
        clock.t = t0 + 13.0  # the GPUs' age is due ("stale 13s")
        screen._tick()
        assert asked == [] and str(gpu.border_subtitle) == "stale 12s"  # not drawn on its own
        screen.flush()  # the held flush: the news and the age, one repaint
        assert len(asked) == 1 and str(gpu.border_subtitle) == "stale 13s"
        assert "refused 2" in str(state.reading("server").error)

        # A flush held further off than a second: the age is drawn at once.
        cadence.t += 10.0
        state.apply(_server_error(3, clock.t))
        await pilot.pause()
        await pilot.pause()
        state.apply(_server_error(4, clock.t))
        await pilot.pause()
        assert screen._flush_timer is not None and screen._flush_at - cadence.t > 1.0
        clock.t = t0 + 14.0
        screen._tick()
        assert len(asked) == 2 and str(gpu.border_subtitle) == "stale 14s"


async def test_the_headers_count_while_reconnecting_is_drawn_with_the_held_flush(monkeypatch: Any) -> None:
    """The header counts "reconnecting for 5s" each second (it never says when it is due next: it
    asks again each second); the age timer left to a held flush still has that flush draw it."""
    from console.core.state import ConnectionChanged
    from console.host.transport.base import ConnectionState
    from console.ui import host_screen
    from console.ui.app import ConsoleApp

    cadence = _Clock(5_000.0)
    monkeypatch.setattr(host_screen, "_monotonic", cadence)
    monkeypatch.setattr(host_screen, "BUSY_FLUSH_S", HOUR_S)
    clock = _Clock(1_000_000.0)
    state = HostState("h", label="h", clock=clock)
    state.apply(ConnectionChanged("h", ConnectionState("h", "reconnecting", clock.t, detail="connection lost")))
    app = ConsoleApp(state, None)
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.pause()
        screen = app.host_screen
        cadence.t += 10.0
        state.apply(_server_error(1, clock.t))
        await pilot.pause()
        await pilot.pause()
        state.apply(_server_error(2, clock.t))
        await pilot.pause()
        assert screen._flush_timer is not None
        cadence.t = screen._flush_at - 0.5
        ticks: list[float] = []
        real = screen.header.tick
        monkeypatch.setattr(screen.header, "tick", lambda: (ticks.append(clock.t), real()))
        clock.t += 5.0
        screen._tick()
        assert ticks == []  # left to the held flush
        screen.flush()
        assert ticks == [clock.t]
        assert "5s" in str(screen.header.render())
