"""The demo at 80x24: the plan, opened, first showed every step broken at column 0 (" · Download the
model" then "pending" on the next row), for as long as nothing moved: drawn before its first layout
at the screen's width less 6 (72 columns) inside a strip 46 wide (40 inside). Before the layout it is
drawn at the docked strip's own width."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import Static

from console.ui.panes import swap as swap_pane
from console.ui.panes.swap import SwapScreen
from tests.kit.hosts import wait_for
from tests.kit.swap import PlanHost as Host
from tests.kit.swap import narrow_plan_state


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_every_frame_of_the_plan_fits_the_strip_it_is_drawn_in(size: tuple[int, int],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    widths: list[int] = []
    real = swap_pane.format_plan

    def recorded(*args: Any, **kwargs: Any) -> Any:
        widths.append(kwargs["width"])
        return real(*args, **kwargs)

    monkeypatch.setattr(swap_pane, "format_plan", recorded)
    app = Host(SwapScreen(narrow_plan_state(), object(), "ana"))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        static = app.screen.query_one("#swap-plan", Static)
        await wait_for(lambda: static.content_region.width > 0 and widths[-1] == static.content_region.width, 30, 0.1)
        have = static.content_region.width
    assert widths and all(w <= have for w in widths), (size, have, widths)
