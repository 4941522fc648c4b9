"""A toast quoting host text shows it as text: a bind mount like `/srv/x[/]y` in an in-place
refusal raised MarkupError and the console exited (issue 34, item 5). Every `notify` that can carry
host text (the swap pane's refusals and busy notes, a failed worker's error, the demo operator's
line) is sent with markup off."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from textual.app import App
from textual.worker import WorkerState

HOSTILE = "in place refused: the bind mount /srv/x[/]y [bold red]is read-only[/] [link=http://evil/]here[/link]"


class _Quiet(App[None]):
    pass


def _toasts(app: App[Any]) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def _say_in_a_running_console(say: Any) -> list[str]:
    app = _Quiet()
    async with app.run_test(notifications=True) as pilot:
        say(app)
        await pilot.pause()
        await pilot.pause()
        shown = _toasts(app)
    return shown


@pytest.mark.asyncio
async def test_a_swap_refusal_quoting_a_bind_mount_with_brackets_is_shown_as_it_is() -> None:
    from console.ui.panes.swap import SwapScreen

    shown = await _say_in_a_running_console(lambda app: SwapScreen(None, None, "ana")._say(HOSTILE))
    assert shown == [HOSTILE]


@pytest.mark.asyncio
async def test_a_busy_step_whose_detail_holds_markup_is_shown_as_it_is() -> None:
    from console.ui.panes.swap import SwapScreen

    detail = "copying /srv/x[/]y"
    state = SimpleNamespace(info=SimpleNamespace(read_only=False), swap=SimpleNamespace(
        setup=SimpleNamespace(busy="download", read_only=False),
        steps={"download": SimpleNamespace(detail=detail)}))

    def act(app: App[Any]) -> None:
        SwapScreen(state, object(), "ana").action_act("stop_old")

    shown = await _say_in_a_running_console(act)
    assert len(shown) == 1 and detail in shown[0]


@pytest.mark.asyncio
async def test_a_failed_worker_whose_error_quotes_host_text_is_shown_as_it_is() -> None:
    from console.ui.host_screen import worker_failed

    event = SimpleNamespace(state=WorkerState.ERROR, worker=SimpleNamespace(
        error=RuntimeError(HOSTILE), group="swap-preview"))
    shown = await _say_in_a_running_console(lambda app: worker_failed(app, event))  # type: ignore[arg-type]
    assert len(shown) == 1 and "/srv/x[/]y" in shown[0] and "[bold red]" in shown[0]
