"""Under --read-only the plan said 'read-only: no action can be run from this session' while its
footer listed every action key beside it (d download, s stop old, p run the rest of the plan, o
override…). A read-only plan's footer lists only what can be done (close, quit, the audit); a key
pressed anyway says why nothing runs and asks the control for nothing."""

from __future__ import annotations

from typing import Any

import pytest

from console.core.derive.swap_view import SwapSetup
from console.core.state import HostState
from console.ui.panes.swap import KEYS, SwapScreen
from tests.kit.swap import PlanHost

ACTION_KEYS = {"o", "a", "c", *(k for k, _, _ in KEYS)}


class Control:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def swap_preview(self, key: str) -> Any:
        self.asked.append(key)
        raise AssertionError(f"a read-only plan asked for {key}")


def _state(read_only: bool) -> HostState:
    state = HostState("h", label="h")
    state.apply(SwapSetup("h", "old.service", "new.service", "o/new", "/m/new", read_only))
    return state


def _shown_keys(screen: SwapScreen) -> set[str]:
    return {key for key, active in screen.active_bindings.items() if active.binding.show and active.enabled}


@pytest.mark.parametrize("read_only", [True, False])
async def test_the_footer_lists_action_keys_only_when_they_can_run(read_only: bool) -> None:
    control = Control()
    app = PlanHost(SwapScreen(_state(read_only), control, "ana"))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, SwapScreen)
        shown = _shown_keys(screen)
        assert {"escape", "q", "A"} <= shown, shown
        if not read_only:
            assert shown >= ACTION_KEYS, shown
            return
        assert not shown & ACTION_KEYS, shown & ACTION_KEYS
        await pilot.press("s")
        await pilot.pause()
        assert control.asked == []
        said = [n.message for n in app._notifications]
        assert any("read-only" in m for m in said), said
