"""One host screen for every view (issue 20 item 2): the console, the fleet's Enter, an attached
client and replay show `console.ui.host_screen.HostScreen`; one `HostControl` protocol implemented
in full; one refresh path, coalesced per frame. Rendered text at 80x24 and 120x40."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from console.core.control import HostControl, NoControl, protocol_methods
from console.core.state import LogAppended, Notice, ReadingChanged
from console.model import Reading
from console.host.parsers.sglang_log import parse_line
from tests.kit.screens import offline_state, screen_text

ROOT = Path(__file__).resolve().parent.parent.parent


# -- one screen ---------------------------------------------------------------------------------
def test_there_is_one_host_screen_class_and_every_view_imports_it() -> None:
    defined = [p.relative_to(ROOT) for p in (ROOT / "console").rglob("*.py")
               if re.search(r"^class HostScreen\b", p.read_text(), re.M)]
    assert defined == [Path("console/ui/host_screen.py")]
    from console.ui import fleet_screen as fleet
    from console.ui.host_screen import HostScreen

    assert fleet.HostScreen is HostScreen
    for module in ("console/ui/app.py", "console/ui/fleet_screen.py"):
        assert "from console.ui.host_screen import" in (ROOT / module).read_text(), module


def test_views_do_not_probe_their_control() -> None:
    for module in ("console/ui/app.py", "console/ui/host_screen.py", "console/ui/fleet_screen.py", "console/ui/attach_app.py"):
        text = (ROOT / module).read_text()
        assert "hasattr(" not in text and "getattr(" not in text, module


def test_every_control_implements_the_whole_protocol() -> None:
    from console.core.runner import HostRunner
    from console.share.client import RemoteControl
    from console.share.server import LocalSeat

    names = protocol_methods()
    assert {"verify", "swap_preview_async", "swap_approve", "set_note", "hand_over", "set_view", "who"} <= set(names)
    for impl in (HostRunner, LocalSeat, RemoteControl, NoControl):
        missing = [n for n in names if not hasattr(impl, n) and n not in ("client_id",)]
        assert not missing, f"{impl.__name__} lacks {missing}"
    assert isinstance(NoControl(), HostControl)


async def test_console_fleet_and_replay_show_the_same_host_screen_with_help_and_plan() -> None:
    from console.ui.app import ConsoleApp, FleetApp
    from console.ui.host_screen import HelpScreen, HostScreen
    from console.ui.panes.swap import SwapScreen

    for size in ((80, 24), (120, 40)):
        texts = {}
        state = offline_state()
        console = ConsoleApp(state, None, mode=None)
        async with console.run_test(size=size) as pilot:
            await pilot.pause()
            assert isinstance(console.screen, HostScreen)
            texts["console"] = screen_text(console)
        fleet = FleetApp([state], host_for=lambda key, state=state: (state, None, None))
        async with fleet.run_test(size=size) as pilot:
            await pilot.pause()
            fleet.open_host("gpu-01")
            await pilot.pause()
            assert isinstance(fleet.screen, HostScreen) and fleet.screen.back
            texts["fleet"] = screen_text(fleet)
            await pilot.press("question_mark")  # help: the fleet's host view had none
            await pilot.pause()
            assert isinstance(fleet.screen, HelpScreen)
            await pilot.press("escape")
            await pilot.press("p")  # the swap plan: the fleet's host view had none
            await pilot.pause()
            assert isinstance(fleet.screen, SwapScreen)
            assert "read-only: no action can be run" in str(fleet.screen.query_one("#swap-plan").render())
            await pilot.press("escape")
            await pilot.pause()
            titles = [c.title for c in fleet.get_system_commands(fleet.screen)]
            assert "Swap plan" in titles and "Help" in titles and "Fit planner for the new unit" in titles
            await pilot.press("escape")  # back to the fleet
            await pilot.pause()
            assert not isinstance(fleet.screen, HostScreen)
        for name, text in texts.items():
            for title in ("1 GPUs", "2 Download", "3 Service diff", "4 SGLang log", "5 Benchmark"):
                assert title in text, (name, size, title)
        # the same panes, the same footer: one screen (the header's line aside)
        assert texts["console"].splitlines()[1:] == texts["fleet"].splitlines()[1:], size


async def test_a_prometheus_row_opens_a_screen_that_says_why_nothing_can_be_asked() -> None:
    from console.ui.app import FleetApp

    state = offline_state()
    fleet = FleetApp([state], host_for=lambda key: (state, None, None))
    async with fleet.run_test(size=(120, 40)) as pilot:
        fleet.open_host("gpu-01")
        await pilot.pause()
        fleet.screen.query_one("#bench-pane").focus()
        await pilot.press("b")
        await pilot.pause()
        assert any("no SSH session to this host" in n.message for n in fleet._notifications)


# -- one refresh path ---------------------------------------------------------------------------
async def test_a_burst_of_events_costs_one_flush_and_the_panes_show_the_newest() -> None:
    from console.ui.app import ConsoleApp
    from console.ui.panes.download import DownloadPane

    state = offline_state()
    app = ConsoleApp(state, None)
    calls: list[str] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.host_screen
        pane = app.pane("download")
        assert isinstance(pane, DownloadPane)
        original = pane.state_changed

        def counting(st: object, source: str) -> None:
            calls.append(source)
            original(st, source)

        pane.state_changed = counting  # type: ignore[method-assign]
        flushes = screen.flushes
        for i in range(300):  # one burst, in one turn of the loop
            state.apply(ReadingChanged(state.host, "download", Reading("download", None, time.time(),
                                                                       f"poll {i} failed")))
            state.apply(LogAppended(state.host, (parse_line(f"[2026-01-01 10:00:00] line {i}"),)))
        await pilot.pause(0.2)
        assert screen.flushes == flushes + 1
        assert calls == ["download"]  # one call for the whole burst, with the newest reading
        assert pane.reading is not None and pane.reading.error == "poll 299 failed"


async def test_notices_from_another_thread_context_are_shown() -> None:
    """A benchmark thread's callback applies events outside Textual's context: the screen must
    neither raise nor drop them."""
    import contextvars

    from console.ui.app import ConsoleApp

    state = offline_state()
    app = ConsoleApp(state, None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        contextvars.Context().run(state.apply, Notice(state.host, "benchmark failed", "[red]boom[/] x", "error"))
        await pilot.pause(0.2)
        assert any(n.message == "[red]boom[/] x" for n in app._notifications)  # markup not interpreted


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_ctrl_s_saves_a_screenshot_on_the_swap_plan_too(size: tuple[int, int], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from console.ui.app import ConsoleApp
    from console.ui.panes.swap import SwapScreen

    monkeypatch.chdir(tmp_path)
    app = ConsoleApp(offline_state(), None)
    async with app.run_test(size=size) as pilot:
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(app.screen, SwapScreen)
        await pilot.press("ctrl+s")
        await pilot.pause()
        import os

        shots = list((Path(os.environ["XDG_DATA_HOME"]) / "gpuconsole" / "screenshots").glob("*.svg"))
        assert len(shots) == 1 and "downtime" in shots[0].read_text()  # the plan is in the picture


async def test_a_maximized_pane_lays_out_again_at_once() -> None:
    """Issue 22 item 14: the chart was drawn for the grid's width until its next throttled redraw
    (5 s idle); maximized, it is drawn for the whole width at once."""
    from console.ui.app import ConsoleApp

    state = offline_state()
    now = time.time()
    for i in range(60):
        state.bench.add_gpu(now - 60 + i, 40.0 + i % 20)
    app = ConsoleApp(state, None)
    async with app.run_test(size=(120, 40)) as pilot:
        chart = app.query_one("#bench-chart")

        def drawn_rows() -> int:  # the pane spans the grid's width: maximized, it grows in height
            return len(getattr(chart.render(), "plain", "").splitlines())

        await pilot.pause(0.3)
        narrow = drawn_rows()
        app.pane("bench").focus()
        await pilot.press("5")
        await pilot.pause(0.3)
        assert app.screen.maximized is app.pane("bench")
        from tests.kit.hosts import wait_for

        await wait_for(lambda: drawn_rows() > narrow + 10, 2.0)
