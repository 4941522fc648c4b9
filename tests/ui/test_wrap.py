"""Continuation rows hang under their own text (issue 22 item 18): the fit view's warnings and
assumptions, wrapped at words, never at column 0."""

from __future__ import annotations

from rich.text import Text

from console.ui.panes.wrap import hang


def test_long_lines_wrap_at_words_under_their_bullet() -> None:
    warning = "⚠ " + " ".join(f"word{i}" for i in range(30))
    assumed = "  · assumed " + " ".join(f"thing{i}" for i in range(20))
    text = Text("title\n\n" + warning + "\n" + assumed)
    text.stylize("yellow", 7, 7 + len(warning))
    rows = hang(text, 40).plain.splitlines()
    assert all(len(r) <= 40 for r in rows)
    warn_rows = rows[2:rows.index(next(r for r in rows if r.startswith("  · ")))]
    assert len(warn_rows) > 1 and all(r.startswith("  word") for r in warn_rows[1:])  # under the text, not col 0
    assert " ".join(r.strip().removeprefix("⚠ ") for r in warn_rows) == warning.removeprefix("⚠ ")  # no word cut
    assumed_rows = rows[rows.index(next(r for r in rows if r.startswith("  · "))):]
    assert all(r.startswith("    thing") for r in assumed_rows[1:])
    assert any("yellow" in str(s.style) for s in hang(text, 40).spans)  # styles kept


async def test_the_fit_screen_hangs_its_continuation_rows() -> None:
    from textual.app import App

    from console.ui.panes.fit import FitScreen

    body = Text("⚠ " + " ".join(f"word{i}" for i in range(60)))

    class One(App[None]):
        def on_mount(self) -> None:
            self.push_screen(FitScreen(body))

    app = One()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        shown = str(app.screen.query_one("#fit-text").render()).splitlines()
        assert len(shown) > 1 and all(r.startswith("  ") for r in shown[1:])
