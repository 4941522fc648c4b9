"""The pane frame every pane shares (border, title, what stale and error mean), and the pane base:
a focusable Static that renders the latest Reading of its source through a pure function."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any, ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual.geometry import Region
from textual.reactive import reactive
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual.widgets import Static

from console.model import Reading
from console.units import duration

log = logging.getLogger("gpuconsole.panes")


def label_due_s(since_s: float, now_s: float) -> float:
    """When `duration(now - since_s)` next reads differently, on the same clock: the next second
    while it shows seconds (under an hour), the next minute under a day, else the next hour. The
    screen's one age timer asks a pane again only then (issue 23: nothing done while nothing changes)."""
    age = max(0.0, now_s - since_s)
    step = 1.0 if age < 3600 else 60.0 if age < 86400 else 3600.0
    return since_s + (math.floor(age / step) + 1) * step


def limit_due_s(since_s: float, limit_s: float) -> float:
    """The first moment an age measured from `since_s` is past `limit_s` (ages compare with `>`)."""
    return since_s + limit_s + 1e-3


class PaneFrame:
    """What every pane's frame means, whatever the pane: `N Title` on the border, `-stale`
    (yellow) when its data is older than it should be, `-error` (red) when its last poll or its
    own rendering failed, and the subtitle saying which. The look is in `styles/console.tcss`
    under `.pane`."""

    border_title: Any
    border_subtitle: Any
    render_error: str | None = None
    _clock: Callable[[], float] | None = None
    # When (on the pane's clock) what `update_age` draws may next change: the host screen's one
    # age timer calls `update_age` only once that time has come; None: only an event changes it.
    # 0.0 (a pane that does not say): every tick, as before.
    _age_due: float | None = 0.0
    # The host screen's hook (`HostScreen._age_due_changed`): told each new due time, so its timer
    # is armed for it when it comes sooner than the timer would.
    on_age_due: Callable[[float | None], None] | None = None

    @property
    def age_due_s(self) -> float | None:
        return self._age_due

    @age_due_s.setter
    def age_due_s(self, due: float | None) -> None:
        self._age_due = due
        if self.on_age_due is not None:
            self.on_age_due(due)

    # -- the one clock of every pane (issue 20) -------------------------------------------------
    def use_clock(self, clock: Callable[[], float]) -> None:
        """Measure ages against `clock`: the host screen gives every pane its state's `now`."""
        self._clock = clock

    def now(self) -> float:
        """The pane's "now" for every age it draws ("12s ago", "stale 16s", "STALLED for 1m"): the
        state's clock (the wall clock live, the recording's in a replay), so a replay seeked to T
        draws what the live screen drew at T. A pane on its own, with no state, uses the wall clock."""
        return self._clock() if self._clock is not None else time.time()

    # The host screen's one refresh path calls these on every pane (console/ui/host_screen.py);
    # a pane overrides what it needs. No probing: every pane has all three.
    def state_changed(self, state: Any, source: str) -> None:
        """The host's state changed `source` (one of the pane's registry `sources`)."""

    def update_age(self, now_s: float | None = None) -> None:
        """Ages and staleness move without events: called by the screen's age timer once
        `age_due_s` has come (every second for a pane that leaves it at 0)."""

    def relayout(self) -> None:
        """The pane's size changed (maximized, restored): lay its text out again now."""

    def set_title(self, number: str, title: str) -> None:
        self.border_title = f"{number} {title}".strip()

    def set_health(self, *, stale: bool, error: bool, subtitle: str) -> None:
        widget: Any = self
        if self.render_error is not None:
            error, subtitle = True, f"render error: {self.render_error}"
        widget.set_class(stale and not error, "-stale")
        widget.set_class(error, "-error")
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle

    def render_safely(self, render: Any) -> Any:
        """`render()`, or None when it failed: the failure is shown in the subtitle and the app's
        log, and the pane keeps its last good frame. Never swallowed."""
        try:
            result = render()
        except Exception as exc:  # a bug in a pane must show, not freeze it silently
            self.render_error = f"{type(exc).__name__}: {exc}"[:120]
            log.exception("rendering %s failed", type(self).__name__)
            widget: Any = self
            if widget.is_attached:
                widget.app.log.error(f"{type(self).__name__}: {self.render_error}")
                widget.set_class(True, "-error")
                self.border_subtitle = f"render error: {self.render_error}"
            return None
        self.render_error = None
        return result


class ReadingPane(PaneFrame, Static, can_focus=True):
    """A pane that shows one source's Reading; `-stale` and `-error` classes show its health."""

    DEFAULT_CSS = """
    ReadingPane { padding: 0 1; height: 1fr; overflow-y: auto; }
    """

    PANE_TITLE: ClassVar[str] = ""
    PANE_KEY: ClassVar[str] = ""
    STALE_AFTER_S: ClassVar[float] = 10.0

    # No repaint of its own: `show` updates the body only when the rendered text changed (a new
    # Reading every second whose text is the same must not repaint the pane).
    reading: reactive[Reading[Any] | None] = reactive(None, repaint=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._line_stale: set[int] = set()  # the lines whose text changed since they were drawn
        self._rendered_for: tuple[Any, Any] | None = None  # the reading and the size last rendered

    def on_mount(self) -> None:
        if not self.border_title:
            self.set_title(self.PANE_KEY, self.PANE_TITLE)
        self._render_now()

    def state_changed(self, state: Any, source: str) -> None:
        """The host's state changed `source`: show its latest reading (and read the state's clock)."""
        self.use_clock(state.now)
        self.reading = state.reading(source)

    def watch_reading(self, reading: Reading[Any] | None) -> None:
        self._render_now()
        self.update_age()

    def _render_now(self) -> None:
        reading, size = self.reading, self.content_size
        frame = self.render_safely(lambda: self.render_reading(reading))
        if frame is not None:
            self._rendered_for = (reading, size)
            self.show(frame)

    def _render_for_size(self) -> None:
        """Rendered again for a new size, unless the last render was of this reading at this size
        already: a restored pane handed its news (after the layout, at its new size) was rendered
        again by the screen's relayout and once more by its resize, three renders for one change."""
        drawn = self._rendered_for
        if drawn is not None and drawn[0] is self.reading and drawn[1] == self.content_size:
            return
        self._render_now()

    def on_resize(self) -> None:
        """Panes lay their text out for their size (columns, how many rows): re-render on resize."""
        self._render_for_size()

    def relayout(self) -> None:
        self._render_for_size()

    def show(self, renderable: RenderableType) -> None:
        """Update only when what is shown changed: an identical update still repaints. A new
        text with as many lines as the last one repaints the pane alone, without a layout of the
        whole screen (the pane's size comes from the grid; only its line count can change its
        scrollable height), and of the pane only the lines whose text changed (`render_line`: a
        GPU sample moves the figures of a few rows, not the processes under them)."""
        key = (renderable.plain, tuple(renderable.spans)) if isinstance(renderable, Text) else None
        if key is not None and key == getattr(self, "_shown_key", None):
            return
        lines = renderable.plain.count("\n") + 1 if isinstance(renderable, Text) else None
        layout = lines is None or lines != getattr(self, "_shown_lines", None)
        texts = self._line_texts
        new = self._lines_of(renderable)
        self._shown_key, self._shown_lines = key, lines
        if not layout and texts is not None and new is not None and len(texts) == len(new) \
                and self._line_strips is not None and self.is_mounted:
            changed = [y for y, (was, now) in enumerate(zip(texts, new))
                       if was.plain != now.plain or was.spans != now.spans or was.style != now.style]
            self._line_texts = new
            self._line_stale.update(changed)
            self._rows_text = renderable  # what a whole render draws (a resize, a style): `render`
            if changed:
                width = self.size.width
                self.refresh(*(Region(0, y, width, 1) for y in changed))
            return
        self._line_strips = self._rows_text = None
        Static.update(self, renderable, layout=layout)
        self._line_texts = new

    def update(self, content: Any = "", *, layout: bool = True) -> None:
        """Shown other than through `show`: drawn whole, and the next `show` as well."""
        self._line_texts = self._line_strips = self._rows_text = None
        self._shown_key = self._shown_lines = None
        super().update(content, layout=layout)

    def render(self) -> Any:
        # Static's content setter lays the screen out again: a text drawn row by row is kept here.
        return self._rows_text if self._rows_text is not None else super().render()

    # -- the pane's lines, drawn one at a time -------------------------------------------------
    _line_texts: list[Text] | None = None  # the shown text's lines, when it can be drawn line by line
    _line_strips: list[Strip] | None = None  # each line as drawn, for `_line_key`
    _line_key: object = None
    _rows_text: Text | None = None  # the text shown, when `show` drew only its changed rows
    lines_drawn = 0  # text lines turned into strips (tests read it)

    def _lines_of(self, renderable: RenderableType) -> list[Text] | None:
        """The text's lines, when each line draws as one row whatever the others are: a text that
        does not wrap, no taller than the pane (never scrolled), laid out left and top."""
        if not isinstance(renderable, Text) or not renderable.no_wrap or not self.is_mounted:
            return None
        if renderable.justify not in (None, "default", "left") or self.styles.content_align != ("left", "top"):
            return None
        lines = renderable.split("\n", allow_blank=True)
        return list(lines) if len(lines) <= self.size.height else None

    def render_line(self, y: int) -> Strip:
        """A row of the pane: drawn again only when its text changed (`show`) or the whole pane
        must be (its size or style changed, a selection over it, a text that is not line by line)."""
        texts = self._line_texts
        if texts is None or self.text_selection is not None or len(texts) > self.size.height:
            self._line_strips = None
            return super().render_line(y)
        width, height = self.size
        style = self.visual_style
        key = (width, height, style)
        strips = self._line_strips
        if strips is None or key != self._line_key:
            strips = list(Visual.to_strips(self, self._render(), width, height, style))
            self.lines_drawn += len(strips)
            self._line_stale.clear()
            if len(strips) != len(texts):
                # Not row for line (at a new size Textual draws the last text before the pane lays
                # it out for that size: it may wrap): drawn whole, as Textual does, until the next text.
                self._line_texts = self._line_strips = None
                return super().render_line(y)
            self._line_strips, self._line_key = strips, key
        elif y in self._line_stale and y < len(texts):
            self._line_stale.discard(y)
            strip = Visual.to_strips(self, visualize(self, texts[y]), width, 1, style)[0]
            # Each cell carries its place in the text (Textual's selection and clicks read it): the
            # line drawn alone was row 0.
            strips[y] = strip.apply_offsets(0, y) if y else strip
            self.lines_drawn += 1
        return strips[y] if y < len(strips) else Strip.blank(width, style.rich_style)

    def update_age(self, now_s: float | None = None) -> None:
        """The subtitle says how fresh the data is, without a repaint of the body; `age_due_s`
        says when it would next read differently (going stale, or the next second of "stale 12s")."""
        reading = self.reading
        now = self.now() if now_s is None else now_s
        stale = reading is not None and reading.data is not None and reading.is_stale(self.STALE_AFTER_S, now)
        subtitle = ""
        due: float | None = None  # an error, no data, nothing yet: only the next reading changes it
        if reading is not None:
            if reading.error is not None:
                subtitle = "error"
            elif stale:
                subtitle = f"stale {duration(reading.age_s(now))}"
                due = label_due_s(reading.ok_at_s, now) if reading.ok_at_s is not None else None
            elif reading.data is not None:
                subtitle = "replay" if self._in_replay() else "live"  # a recording is not live
                due = limit_due_s(reading.ok_at_s, self.STALE_AFTER_S) if reading.ok_at_s is not None else None
        self.age_due_s = due
        self.set_health(stale=bool(stale), error=reading is not None and reading.error is not None,
                        subtitle=subtitle)

    def _in_replay(self) -> bool:
        """Whether the state this pane shows is a recording played back (its replayer set it)."""
        try:
            state = getattr(self.screen, "state", None)
        except Exception:  # noqa: BLE001 - no screen yet or any more: not a replay we know of
            return False
        return getattr(state, "replay", None) is not None

    def render_reading(self, reading: Reading[Any] | None) -> RenderableType:
        return Text("waiting for the first poll…", style="dim")


class PlaceholderPane(ReadingPane):
    """A pane whose source does not exist yet: it says so plainly."""

    def __init__(self, title: str, key: str, message: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.PANE_TITLE = title  # type: ignore[misc]
        self.PANE_KEY = key  # type: ignore[misc]
        self._message = message

    def state_changed(self, state: Any, source: str) -> None:
        """Nothing feeds a placeholder."""

    def render_reading(self, reading: Reading[Any] | None) -> RenderableType:
        return Text(self._message, style="dim italic")
