"""Issue 23 item 3, the flood's lag: a full collection of the garbage collector walked every object
of the console (the interpreter, Textual, Rich, the screen), 70-120 ms with the UI's loop held,
every few seconds of a 20k lines/s log flood. Once started, the console freezes what is alive out
of the collector's sight; later collections walk only what was made since."""

from __future__ import annotations

import gc
from typing import Any

import pytest


def test_settling_the_heap_leaves_the_collector_only_new_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    import console.ui.app as app_module

    monkeypatch.setattr(app_module, "_heap_settled", False)
    before = len(gc.get_objects())
    try:
        assert app_module.settle_heap() is True
        walked = len(gc.get_objects())  # what a full collection walks now
        assert walked < before // 10, (before, walked)
        assert app_module.settle_heap() is False  # once per process: a second app freezes nothing
    finally:
        gc.unfreeze()  # the test process as it was


async def test_the_console_settles_its_heap_once_it_has_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    import console.ui.app as app_module
    from console.core.state import HostState

    calls: list[Any] = []
    monkeypatch.setattr(app_module, "settle_heap", lambda: calls.append(1) or True)
    app = app_module.ConsoleApp(HostState("h"), None)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.pause()
    assert calls == [1]
