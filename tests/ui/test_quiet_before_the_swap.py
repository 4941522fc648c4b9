"""The normal state before a swap reads as normal (issue 35 item 9): the diff pane before the new
unit is installed says "not installed yet", never "(error) · 1 error" in red; the unit picker
never promises a start that has already happened. At 80x24, 120x40 and 200x60."""

from __future__ import annotations

import time

import pytest

from console.domain.analysis.service_report import ServiceReport, ServiceSide
from console.core.state import ReadingChanged
from console.model import Reading
from tests.kit.hosts import wait_for
from tests.kit.screens import offline_state, screen_text

SIZES = [(80, 24), (120, 40), (200, 60)]
NEW = "sglang-qwen122b.service"


@pytest.mark.parametrize("size", SIZES)
async def test_the_diff_pane_before_the_install_is_not_an_error(size: tuple[int, int]) -> None:
    from console.ui.app import ConsoleApp

    state = offline_state()
    old = ServiceSide("sglang-qwen397b.service", "[Service]\n", None, None, active_state="active", main_pid=26722)
    new = ServiceSide(NEW, None, None, None, error=f"{NEW}: not installed yet")
    report = ServiceReport(old, new, (), (), (), (), None, (), ("sglang-qwen397b.service",), "x",
                           (f"{NEW}: not installed yet",))
    state.apply(ReadingChanged("gpu-01", "service", Reading("service", report, time.time())))
    app = ConsoleApp(state, None)
    async with app.run_test(size=size) as pilot:
        await pilot.press("3")
        await pilot.pause()
        await wait_for(lambda: NEW in screen_text(app), 10)
        text = " ".join(screen_text(app).split())
        assert "not installed" in text, text
        assert "(error)" not in text and "1 error" not in text, text
        assert "0 errors" in text, text


@pytest.mark.parametrize("size", SIZES)
async def test_the_unit_picker_does_not_promise_a_start(size: tuple[int, int]) -> None:
    from textual.app import App

    from console.ui.panes.unit_picker import UnitPicker

    class One(App[None]):
        def on_mount(self) -> None:
            self.push_screen(UnitPicker(("sglang-qwen397b.service", NEW)))

    app = One()
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        text = " ".join(screen_text(app).split())
        assert "New unit" in text and "about to start" not in text, text
