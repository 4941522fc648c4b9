"""The help of a console nobody shared said 'From the palette (ctrl+p): set the shared note, ask to
drive, accept a request, hand over…': its palette has none of them (they come with --share). Alone,
the help says the session is not shared and how to share it; shared, it lists the palette's pairing
commands."""

from __future__ import annotations

from textual.widgets import Markdown

from console.core.state import HostState
from console.ui.host_screen import HelpScreen, help_text

PALETTE_ONLY_SHARED = ("hand over", "accept a request", "set the shared note")


def test_alone_the_help_names_no_pairing_command_and_says_how_to_share() -> None:
    text = " ".join(help_text(shared=False).split())
    assert not [w for w in PALETTE_ONLY_SHARED if w in text], text
    assert "not shared" in text and "`gpuconsole --share`" in text and "`gpuconsole attach`" in text
    assert "benchmarks, pairing" not in text


def test_shared_the_help_lists_the_palettes_pairing_commands() -> None:
    text = " ".join(help_text(shared=True).split())
    assert all(w in text for w in PALETTE_ONLY_SHARED), text


async def test_the_help_of_an_unshared_console_is_the_alone_one() -> None:
    from console.ui.app import ConsoleApp

    app = ConsoleApp(HostState("gpu-01"), None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause(0.3)
        assert isinstance(app.screen, HelpScreen) and not app.screen.shared
        source = app.screen.query_one(Markdown).source
        assert "not shared" in source and "hand over" not in source
