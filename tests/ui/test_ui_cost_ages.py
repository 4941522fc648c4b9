"""Issue 23 item 3, the console's own cost: nothing is done while nothing changes. The screen's one
age timer asks a pane only once what it draws could read differently ("live" until the moment it
goes stale, "stale 12s" the next second), never a pane hidden behind a maximized one; a download
polled every 10 s once complete is not drawn stale between two polls on time."""

from __future__ import annotations

from collections import Counter
from typing import Any

from console.domain.analysis.log_state import LogSummary
from console.core.freshness import is_stale
from console.core.state import HostState, ReadingChanged
from console.model import GpuDevice, GpuStatus, Reading
from tests.kit.clocks import Clock


def _gpu(state: HostState, at: float) -> None:
    gpu = GpuDevice(0, "x", "GPU-0", 1, 2, 5, 40, 100.0, 600.0)
    state.apply(ReadingChanged("h", "gpu", Reading("gpu", GpuStatus("nvml", (gpu,), sampled_at_s=at), at)))


def _spy(screen: Any, keys: tuple[str, ...]) -> tuple[Counter[str], Counter[str]]:
    """Count each pane's `update_age` calls and its repaints (`refresh`)."""
    asked: Counter[str] = Counter()
    repaints: Counter[str] = Counter()
    for key in keys:
        pane = screen.pane(key)

        def ask(now_s: float | None = None, _pane: Any = pane, _key: str = key, _f: Any = pane.update_age) -> None:
            asked[_key] += 1
            _f(now_s)

        def refresh(*a: Any, _key: str = key, _f: Any = pane.refresh, **k: Any) -> Any:
            repaints[_key] += 1
            return _f(*a, **k)

        pane.update_age = ask
        pane.refresh = refresh
    return asked, repaints


async def test_a_live_pane_is_not_asked_until_its_label_would_change() -> None:
    """Before: every pane's ages were worked out every second, whatever they said (a GPU pane
    saying "live" was asked 4 times in 4 s; its label could only change at 5 s)."""
    from console.ui.app import ConsoleApp

    clock, state, t0 = _gpu_state()
    app = ConsoleApp(state, None)
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.pause()
        screen = app.host_screen
        pane = screen.pane("gpu")
        asked, repaints = _spy(screen, ("gpu",))
        for dt in (1.0, 2.0, 3.0, 4.0, 4.9):  # "live" all along: the GPUs go stale after 5 s
            clock.t = t0 + dt
            screen._tick()
        assert asked["gpu"] == 0 and repaints["gpu"] == 0
        assert str(pane.border_subtitle) == "live"
        clock.t = t0 + 6.0
        screen._tick()
        assert asked["gpu"] == 1 and str(pane.border_subtitle) == "stale 6s"
        assert pane.has_class("-stale")
        clock.t = t0 + 6.6  # still "stale 6s": not asked
        screen._tick()
        assert asked["gpu"] == 1
        clock.t = t0 + 7.1
        screen._tick()
        assert asked["gpu"] == 2 and str(pane.border_subtitle) == "stale 7s"
        _gpu(state, clock.t)  # a new reading: live again, and quiet until 5 s after it
        await pilot.pause()
        assert str(pane.border_subtitle) == "live" and not pane.has_class("-stale")
        asked.clear()
        for _ in range(3):
            clock.t += 1.0
            screen._tick()
        assert asked["gpu"] == 0


def _clocked_state() -> tuple[Clock, HostState, float]:
    clock = Clock()
    return clock, HostState("h", label="h", clock=clock), clock.t


def _gpu_state() -> tuple[Clock, HostState, float]:
    """A state on a test clock with a GPU reading taken now."""
    clock, state, t0 = _clocked_state()
    _gpu(state, t0)
    return clock, state, t0


def _quiet_log_state(quiet_s: float) -> tuple[Clock, HostState, float]:
    """A state on a test clock whose log's last line was `quiet_s` ago."""
    clock, state, t0 = _clocked_state()
    summary = LogSummary("log", "serving", (), None, None, None, None, None, None, (), 10, t0 - quiet_s)
    state.apply(ReadingChanged("h", "log", Reading("log", summary, t0)))
    return clock, state, t0


async def test_the_log_pane_is_asked_when_quiet_is_said_and_then_in_10_s_steps() -> None:
    """A log whose last line was 10 s ago says nothing of it until 30 s ("quiet 30s"), then counts
    in 10 s steps: before, its subtitle and status line were worked out every second, and from
    30 to 60 s the label was repainted every second (issue 36: 19 of a quiet host's 34 refreshes)."""
    from console.ui.app import ConsoleApp

    clock, state, t0 = _quiet_log_state(10.0)
    app = ConsoleApp(state, None)
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.pause()
        screen = app.host_screen
        pane = screen.pane("log")
        asked, _ = _spy(screen, ("log",))
        for dt in range(1, 20):  # quiet 11 s … 29 s: not said
            clock.t = t0 + dt
            screen._tick()
        assert asked["log"] == 0 and "quiet" not in str(pane.border_subtitle)
        clock.t = t0 + 21.0  # quiet 31 s
        screen._tick()
        assert asked["log"] == 1 and "quiet 30s" in str(pane.border_subtitle)
        for dt in range(22, 30):  # quiet 32 s … 39 s: still "quiet 30s", nothing asked
            clock.t = t0 + dt
            screen._tick()
        assert asked["log"] == 1 and "quiet 30s" in str(pane.border_subtitle)
        clock.t = t0 + 30.2  # quiet 40 s
        screen._tick()
        assert asked["log"] == 2 and "quiet 40s" in str(pane.border_subtitle)


async def test_past_a_minute_the_quiet_label_moves_in_10_s_steps() -> None:
    """A quiet host's log pane repainted its subtitle every second ("quiet 5m12s", "5m13s" …), the
    screen's last 1 Hz repaint there: past a minute it counts in 10 s steps (rounded down)."""
    from console.ui.app import ConsoleApp

    clock, state, t0 = _quiet_log_state(60.0)
    app = ConsoleApp(state, None)
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.pause()
        screen = app.host_screen
        pane = screen.pane("log")
        assert "quiet 1m00s" in str(pane.border_subtitle)
        asked, repaints = _spy(screen, ("log",))
        for dt in range(1, 10):  # quiet 1m01s … 1m09s: still "1m00s"
            clock.t = t0 + dt
            screen._tick()
        assert asked["log"] == 0 and repaints["log"] == 0
        clock.t = t0 + 10.2
        screen._tick()
        assert asked["log"] == 1 and "quiet 1m10s" in str(pane.border_subtitle)
        clock.t = t0 + 35.0
        screen._tick()
        assert "quiet 1m30s" in str(pane.border_subtitle)  # never more than it is


async def test_a_pane_behind_a_maximized_one_is_not_asked_and_is_right_after_the_restore() -> None:
    from console.ui.app import ConsoleApp

    clock, state, t0 = _gpu_state()
    app = ConsoleApp(state, None)
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.pause()
        screen = app.host_screen
        pane = screen.pane("gpu")
        screen.action_toggle_max("log")
        await pilot.pause()
        asked, _ = _spy(screen, ("gpu",))
        for dt in range(6, 12):  # stale, but hidden: nothing drawn, nothing asked
            clock.t = t0 + dt
            screen._tick()
        assert asked["gpu"] == 0
        screen.action_toggle_max("log")  # restored: its age at once
        await pilot.pause()
        await pilot.pause()
        assert str(pane.border_subtitle) == "stale 11s"


def test_a_finished_download_polled_every_10_s_is_not_stale_between_polls() -> None:
    """A complete download is polled every 10 s (console/host/sources/download.py): its pane turned
    yellow "stale 10s" for a moment every cycle, each time restyling the pane twice."""
    reading = Reading("download", object(), 1000.0)
    for late_s in (10.2, 10.5, 12.0):  # a poll on time, and one a little late
        assert not is_stale("download", reading, 1000.0 + late_s)
    assert is_stale("download", reading, 1000.0 + 60.0)  # polls that stopped still show


async def test_a_pane_hidden_behind_a_maximized_one_renders_no_data_and_shows_the_latest_after() -> None:
    """Before: every GPU reading (1 Hz) re-rendered the GPU pane behind a maximized log pane."""
    from console.ui.app import ConsoleApp

    clock, state, _ = _gpu_state()
    app = ConsoleApp(state, None)
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.pause()
        screen = app.host_screen
        pane = screen.pane("gpu")
        calls: list[str] = []
        real = pane.state_changed
        pane.state_changed = lambda s, source: (calls.append(source), real(s, source))  # type: ignore[method-assign]
        screen.action_toggle_max("log")
        await pilot.pause()
        for i in range(5):
            clock.t += 1.0
            gpu = GpuDevice(0, "x", "GPU-0", 1, 2, 10 + i, 40, 100.0, 600.0)
            state.apply(ReadingChanged("h", "gpu", Reading("gpu", GpuStatus("nvml", (gpu,), sampled_at_s=clock.t),
                                                           clock.t)))
            await pilot.pause()
        assert calls == []
        screen.action_toggle_max("log")  # restored: once, with the newest reading
        await pilot.pause()
        await pilot.pause()
        assert calls == ["gpu"]
        assert pane.reading.data.gpus[0].utilization_pct == 14
