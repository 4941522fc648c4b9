"""The pane base: a focusable Static that renders the latest Reading through a pure function."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from console.model import Reading
from console.units import duration


class ReadingPane(Static, can_focus=True):
    """A pane that shows one source's Reading; `-stale` and `-error` classes show its health."""

    DEFAULT_CSS = """
    ReadingPane {
        border: round $primary 40%;
        border-title-color: $text;
        border-title-style: bold;
        padding: 0 1;
        height: 1fr;
        overflow-y: auto;
    }
    ReadingPane:focus { border: round $accent; }
    ReadingPane.-stale { border: round $warning 60%; }
    ReadingPane.-error { border: round $error 70%; }
    """

    PANE_TITLE: ClassVar[str] = ""
    PANE_KEY: ClassVar[str] = ""
    STALE_AFTER_S: ClassVar[float] = 10.0

    reading: reactive[Reading[Any] | None] = reactive(None)

    def on_mount(self) -> None:
        self.border_title = f"{self.PANE_KEY} {self.PANE_TITLE}".strip()
        self.show(self.render_reading(None))

    def watch_reading(self, reading: Reading[Any] | None) -> None:
        self.show(self.render_reading(reading))
        self.update_age()

    def on_resize(self) -> None:
        """Panes lay their text out for their size (columns, how many rows): re-render on resize."""
        self.show(self.render_reading(self.reading))

    def show(self, renderable: RenderableType) -> None:
        """Update only when what is shown changed: an identical update still repaints."""
        key = (renderable.plain, tuple(renderable.spans)) if isinstance(renderable, Text) else None
        if key is not None and key == getattr(self, "_shown_key", None):
            return
        self._shown_key = key
        self.update(renderable)

    def update_age(self, now_s: float | None = None) -> None:
        """Called once a second: the subtitle says how fresh the data is, without a repaint of the body."""
        reading = self.reading
        now = time.time() if now_s is None else now_s
        stale = reading is not None and reading.data is not None and reading.is_stale(self.STALE_AFTER_S, now)
        self.set_class(stale and (reading.error is None), "-stale")
        self.set_class(reading is not None and reading.error is not None, "-error")
        subtitle = ""
        if reading is not None:
            if reading.error is not None:
                subtitle = "error"
            elif stale:
                subtitle = f"stale {duration(reading.age_s(now))}"
            elif reading.data is not None:
                subtitle = "live"
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle

    def render_reading(self, reading: Reading[Any] | None) -> RenderableType:
        return Text("waiting for the first poll…", style="dim")


class PlaceholderPane(ReadingPane):
    """A pane whose source does not exist yet: it says so plainly."""

    def __init__(self, title: str, key: str, message: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.PANE_TITLE = title  # type: ignore[misc]
        self.PANE_KEY = key  # type: ignore[misc]
        self._message = message

    def render_reading(self, reading: Reading[Any] | None) -> RenderableType:
        return Text(self._message, style="dim italic")
