"""The confirmation of a stop while the preflight gate refuses: it listed the failing checks and
still offered "enter: run once" (pressed, the core refused: nothing ran). It says what enter does
then: asks the core, which checks the gate again and refuses while it fails."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from textual.app import App

from tests.kit.hosts import wait_for


class _Host(App[None]):
    def __init__(self, screen) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self._first = screen

    def on_mount(self) -> None:
        self.push_screen(self._first)


def _preview(gate):  # type: ignore[no-untyped-def]
    return SimpleNamespace(id="p1", key="stop_old", title="Stop the old service, drain GPU memory",
                           lines=("# Stop old.service", "timeout -k 5 120 systemctl stop -- old.service"),
                           needs_approval=False, gate=gate)


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
async def test_a_refusing_gate_changes_what_enter_offers(size) -> None:
    from console.ui.panes.swap import ConfirmScreen

    failing = (SimpleNamespace(name="download", passes=False, reason="incomplete: 0/39 shards"),)
    app = _Host(ConfirmScreen(_preview(failing)))
    async with app.run_test(size=size):
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen), 30)
        shown = str(app.screen.query_one("#confirm-text").render())
        assert "enter: run once" not in shown
        assert "enter: ask anyway (the gate is checked again: while it fails, nothing runs)" in shown
        assert "escape: cancel" in shown


async def test_a_passing_gate_still_offers_run_once() -> None:
    from console.ui.panes.swap import ConfirmScreen

    passing = (SimpleNamespace(name="download", passes=True, reason="complete"),)
    app = _Host(ConfirmScreen(_preview(passing)))
    async with app.run_test(size=(120, 40)):
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen), 30)
        assert "enter: run once   escape: cancel" in str(app.screen.query_one("#confirm-text").render())
