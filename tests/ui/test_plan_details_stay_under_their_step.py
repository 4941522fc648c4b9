"""The swap plan at 80x24: a step's detail ("… ready 13:22:11, 11s after the start: serving") stays
under its step, indented and whole; the plan is drawn at the width it really has (inside the border,
padding and scrollbar), so nothing wraps at column 0 (the pattern of tests/ui/test_plan_narrow.py)."""

from __future__ import annotations

from textual.widgets import Static

from console.core.state import HostState
from console.ui.panes.swap import SwapScreen, format_plan
from console.core.derive.swap_view import GateChanged, GateCheck, SwapStep, SwapStepChanged
from tests.kit.swap import PlanHost as Host
from tests.kit.swap import narrow_plan_state as narrow_state

READY = ("sglang-qwen122b-bf16.service started 13:22:00 (outside the console); ready 13:22:11, "
         "11s after the start: serving")


def _state() -> HostState:
    """test_plan_narrow's swap, its new server seen ready on the host (the long detail) and a gate."""
    state = narrow_state()
    state.apply(SwapStepChanged("h", SwapStep("start_new", "Start the new service and follow it to ready",
                                              "done", 104.5, 166.4, READY, observed=True)))
    state.apply(GateChanged("h", tuple(GateCheck(f"check{i}", True, "fine " * 8) for i in range(12))))
    return state


def test_a_steps_long_detail_wraps_under_its_step_whole() -> None:
    for width in (60, 72):
        lines = format_plan(_state().swap, 200.0, width=width).plain.splitlines()
        assert all(len(ln) <= width for ln in lines), (width, [ln for ln in lines if len(ln) > width])
        at = next(i for i, ln in enumerate(lines) if "Start the new" in ln)
        detail = []
        for ln in lines[at + 1:]:
            if not ln.startswith("     "):
                break
            detail.append(ln.strip())
        assert " ".join(detail) == READY, (width, detail)  # every word, under the step


async def test_at_80x24_the_plan_is_drawn_at_the_width_it_has() -> None:
    app = Host(SwapScreen(_state(), object(), "ana"))  # a control: the keys are listed too
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        from tests.kit.hosts import wait_for

        screen = app.screen
        assert isinstance(screen, SwapScreen)
        static = screen.query_one("#swap-plan", Static)

        def drawn() -> list[str]:
            return str(static.render()).splitlines()

        # the refresh after the first layout draws the plan at the width the layout gave it
        await wait_for(lambda: static.content_region.width > 0 and any(ln.startswith("d download") for ln in drawn())
                       and all(len(ln) <= static.content_region.width for ln in drawn()), 30, 0.1)
        have = static.content_region.width
        plain = drawn()  # what the screen drew
        assert any(ln.startswith("d download") for ln in plain)
        assert all(len(ln) <= have for ln in plain), (have, [ln for ln in plain if len(ln) > have][:3])
        # the Static wrapped nothing: as many rows as the plan has lines
        assert static.size.height == len(plain), (static.size.height, len(plain))
        assert "11s after the start: serving" in " ".join(ln.strip() for ln in plain)  # wrapped under its step
