"""`v` on the download pane asks before it re-hashes the model on the host (issue 35 item 10): the
command and how much it reads come first; escape hashes nothing, enter starts it. At 80x24,
120x40 and 200x60."""

from __future__ import annotations

import time
from typing import Any

import pytest

from console.domain.analysis.download import DownloadProgress
from console.core.state import ReadingChanged
from console.model import Reading
from tests.kit.screens import offline_state, screen_text

SIZES = [(80, 24), (120, 40), (200, 60)]


class Counting:
    """A control that counts what it was asked (everything else: nothing)."""

    def __init__(self) -> None:
        self.verifies = 0

    def verify(self) -> str | None:
        self.verifies += 1
        return None

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


@pytest.mark.parametrize("size", SIZES)
async def test_v_shows_what_it_will_hash_and_waits_for_a_yes(size: tuple[int, int]) -> None:
    from console.ui.app import ConsoleApp
    from console.ui.panes.download import VerifyQuestion

    state = offline_state()
    progress = DownloadProgress("/shared/models/Qwen3.5-122B-A10B", "Qwen/Qwen3.5-122B-A10B", "hub",
                                249_000_000_000, 249_000_000_000, 39, 39, 40, 40, (), None, None, None, None,
                                None, True, (), time.time())
    state.apply(ReadingChanged("gpu-01", "download", Reading("download", progress, time.time())))
    control = Counting()
    app = ConsoleApp(state, control)
    async with app.run_test(size=size) as pilot:
        app.host_screen.pane("download").focus()
        await pilot.press("v")
        await pilot.pause()
        assert isinstance(app.screen, VerifyQuestion) and control.verifies == 0
        text = " ".join(screen_text(app).split())
        assert "sha256sum" in text and "249.0 GB" in text and "40" in text, text
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, VerifyQuestion) and control.verifies == 0
        await pilot.press("v")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert control.verifies == 1
