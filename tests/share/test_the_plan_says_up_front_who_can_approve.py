"""With the two-person rule on, the swap plan says who can approve this person's stop and start
before anything is asked (the plan showed only "[two-person rule]"; who could approve was said
only once a request waited), and updates as people attach."""

from __future__ import annotations

import pytest
from textual.app import App

from console.core.events import SwapSetup
from console.core.state import Client, HostState, Presence
from tests.kit.hosts import wait_for


class _Host(App[None]):
    def __init__(self, screen) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self._first = screen

    def on_mount(self) -> None:
        self.push_screen(self._first)


class _Seat:
    client_id, who = 1, "ana"

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return lambda *a, **k: None


def _plan(app: App[None]) -> str:
    return " ".join(str(app.screen.query_one("#swap-plan").render()).split())


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
async def test_the_plan_says_who_can_approve_before_anything_is_asked(size) -> None:
    from console.ui.panes.swap import SwapScreen

    state = HostState("h", label="h")
    state.apply(SwapSetup("h", "old.service", "new.service", None, "/m", require_approval=True))
    state.apply(Presence("h", (Client(1, "ana", "driver", "unix", person="uid 1000"),)))
    screen = SwapScreen(state, _Seat(), "ana")
    app = _Host(screen)
    async with app.run_test(size=size):
        await wait_for(lambda: app.screen.query("#swap-plan") and "approvals:" in _plan(app), 30)
        assert "approvals: nobody attached can approve" in _plan(app), _plan(app)
        state.apply(Presence("h", (Client(1, "ana", "driver", "unix", person="uid 1000"),
                                   Client(2, "bob", "observer", "unix", person="invite bob"))))
        screen.refresh_plan()  # what the host screen does on a presence change
        await wait_for(lambda: "approvals: bob can approve" in _plan(app), 30)


async def test_a_shared_console_alone_is_pointed_at_its_own_address_not_told_to_share() -> None:
    from console.ui.panes.swap import SwapScreen

    state = HostState("h", label="h")
    state.apply(SwapSetup("h", "old.service", "new.service", None, "/m", require_approval=True))
    state.apply(Presence("h", (Client(1, "ana", "driver", "unix", person="uid 1000"),)))
    app = _Host(SwapScreen(state, _Seat(), "ana"))
    app.share_address = "/run/user/1000/gpuconsole/h-1.sock"  # type: ignore[attr-defined]
    async with app.run_test(size=(120, 40)):
        await wait_for(lambda: app.screen.query("#swap-plan") and "approvals:" in _plan(app), 30)
        assert "nobody attached can approve yet: another person attaches with the header's command" in _plan(app)
        assert "--share --invite" not in _plan(app)


async def test_without_the_rule_the_plan_says_nothing_of_approvals() -> None:
    from console.ui.panes.swap import SwapScreen

    state = HostState("h", label="h")
    state.apply(SwapSetup("h", "old.service", "new.service", None, "/m"))
    app = _Host(SwapScreen(state, _Seat(), "ana"))
    async with app.run_test(size=(120, 40)):
        await wait_for(lambda: app.screen.query("#swap-plan") and "old.service" in _plan(app), 30)
        assert "approvals:" not in _plan(app)
