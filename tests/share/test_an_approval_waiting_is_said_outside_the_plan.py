"""The two-person rule, tried by two people: the person who can approve hears of a request on the
main screen (a bell and a notice saying who asks, what, and that `p` opens it), not only once they
happen to open the swap plan; the requester on another connection is never told to approve."""

from __future__ import annotations

import pytest

from console.core.events import ApprovalChanged, SwapSetup
from console.core.state import Client, HostState, Presence
from tests.kit.hosts import wait_for

PRESENCE = Presence("h", (Client(1, "ana", "driver", "unix", person="uid 1000"),
                          Client(2, "ana2", "observer", "unix", person="uid 1000"),
                          Client(3, "bob", "observer", "unix", person="invite bob")))


class _Seat:
    """A shared session's control for one person; asks nothing of a host."""

    def __init__(self, client_id: int, who: str) -> None:
        self.client_id, self.who = client_id, who

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return lambda *a, **k: None


def _state() -> HostState:
    state = HostState("h", label="h")
    state.apply(SwapSetup("h", "old.service", "new.service", None, "/m", require_approval=True))
    state.apply(PRESENCE)
    return state


def _ask(state: HostState, request_id: str = "r1") -> None:
    state.apply(ApprovalChanged("h", request_id, "stop_old", ("timeout -k 5 120 systemctl stop -- old.service",),
                                "ana", 5.0))


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
async def test_the_person_who_can_approve_is_told_on_the_main_screen(size) -> None:
    from console.ui.app import ConsoleApp
    from console.ui.panes.swap import ApproveScreen

    state = _state()
    app = ConsoleApp(state, _Seat(3, "bob"))  # type: ignore[arg-type]
    bells: list[int] = []
    async with app.run_test(size=size) as pilot:
        app.bell = lambda: bells.append(1)  # type: ignore[method-assign]
        _ask(state)
        await wait_for(lambda: any("asks for your approval" in n.message for n in app._notifications), 30)
        said = [n.message for n in app._notifications if "asks for your approval" in n.message]
        assert said == ["ana asks for your approval: stop the old service, drain GPU memory (request r1); "
                        "p opens the swap plan, where enter approves"], said
        assert bells == [1]
        _ask(state)  # the same request again (a re-sent state): said once
        await pilot.press("p")
        await wait_for(lambda: isinstance(app.screen, ApproveScreen), 30)
        assert len([n for n in app._notifications if "asks for your approval" in n.message]) == 1


async def test_the_requester_on_another_connection_is_not_told_to_approve() -> None:
    from console.ui.app import ConsoleApp

    state = _state()
    app = ConsoleApp(state, _Seat(2, "ana2"))  # type: ignore[arg-type]
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        before = app.screen.flushes
        _ask(state)
        await wait_for(lambda: app.screen.flushes > before, 30)  # the request has been drawn
        await pilot.pause()
        assert not [n for n in app._notifications if "asks for your approval" in n.message]
