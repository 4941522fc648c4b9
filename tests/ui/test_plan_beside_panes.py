"""The swap plan beside the panes, never over them (issue 35 item 1): the operator opening the
plan during a swap still sees the GPUs drain and the log boot. A strip docked on the right; the
grid makes room (on a narrow screen only the GPUs and the log stay); the plan's own footer shows
the plan's keys. At 80x24, 120x40 and 200x60."""

from __future__ import annotations

import pytest

from tests.kit.screens import offline_state, screen_text

SIZES = [(80, 24), (120, 40), (200, 60)]


def _overlaps(a: object, b: object) -> bool:
    return bool(a.overlaps(b))  # type: ignore[attr-defined]


@pytest.mark.parametrize("size", SIZES)
async def test_the_swap_plan_opens_beside_the_gpu_and_log_panes_not_over_them(size: tuple[int, int]) -> None:
    from console.ui.app import ConsoleApp
    from console.ui.panes.swap import SwapScreen

    app = ConsoleApp(offline_state(), None)
    async with app.run_test(size=size) as pilot:
        await pilot.press("p")
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.screen, SwapScreen)
        strip = app.screen.query_one("#swap-strip").region
        assert strip.width >= 44 and strip.right == size[0]  # docked on the right, wide enough to read
        for key in ("gpu", "log"):
            pane = app.host_screen.pane(key)
            assert pane.display and pane.region.width >= 30 and pane.region.height >= 8, (key, pane.region)
            assert not _overlaps(pane.region, strip), (key, pane.region, strip)
        text = screen_text(app)
        assert "GPUs" in text and "SGLang log" in text and "downtime" in text
        if size[0] >= 200:  # room for every pane beside the plan
            for key in ("download", "service", "bench"):
                pane = app.host_screen.pane(key)
                assert pane.display and not _overlaps(pane.region, strip), key
        await pilot.press("escape")
        await pilot.pause()
        await pilot.pause()
        assert not isinstance(app.screen, SwapScreen)
        for key in ("gpu", "download", "service", "log", "bench"):  # the grid as it was
            assert app.host_screen.pane(key).display
        assert app.host_screen.pane("download").region.right > size[0] - 5


@pytest.mark.parametrize("size", SIZES)
async def test_the_plans_footer_shows_the_plans_keys_not_the_log_panes(size: tuple[int, int]) -> None:
    from console.ui.app import ConsoleApp

    app = ConsoleApp(offline_state(), None)
    async with app.run_test(size=size) as pilot:
        await pilot.press("4")  # the log pane focused (maximized), then the plan over it
        await pilot.press("4")
        app.host_screen.pane("log").focus()
        await pilot.press("p")
        await pilot.pause()
        await pilot.pause()
        footer = screen_text(app).rstrip("\n").splitlines()[-1]
        assert "Close" in footer and "filter" not in footer.lower(), footer


async def test_q_in_the_docked_plan_leaves_the_console_as_on_the_panes_beside_it() -> None:
    """Walked in the operator demo: after the swap, the first `q` only closed the docked plan (it
    looks part of the main screen) and a second one quit; esc is the plan's close."""
    from console.ui.app import ConsoleApp
    from console.ui.panes.swap import SwapScreen

    app = ConsoleApp(offline_state(), None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(app.screen, SwapScreen)
        left: list[bool] = []
        real_exit = app.exit
        app.exit = lambda *a, **k: left.append(True)  # type: ignore[method-assign]
        await pilot.press("q")
        await pilot.pause()
        assert left == [True], "q in the plan did not leave the console"
        app.exit = real_exit  # type: ignore[method-assign]
