"""The log tail as a virtual view over the state's one line store (`HostState.log_lines`), with
Textual's Line API (toolong's `LogLines` does the same over a file's offsets): it holds only an
index of rows, `(absolute line number, row within the line)`, and renders the visible rows when
Textual asks for them. Filter, wrap, follow and n/N work on the store; nothing is copied, so
memory stays flat, and a flood costs one `sync` and one repaint per frame (the host screen's
flush), whatever the number of lines.

Rows of a line that left the store (the store keeps the newest 5,000) are dropped from the
front; a reader who scrolled up keeps the same lines in view.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import islice
from typing import Any, ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.host.parsers.sglang_log import LogEvent

# The console's own polls through its port forward (console/host/sources/server.py): a third of the
# tail on a quiet server. Hidden by default (issue 22 item 13); `a` shows them.
OWN_POLL = re.compile(r'"GET /(?:server_info|get_server_info|metrics|health|health_generate|get_model_info|v1/models)'
                      r'[ ?"]')


def is_own_poll(event: LogEvent) -> bool:
    return event.kind == "access" and OWN_POLL.search(event.text) is not None


def display_text(line: str) -> str:
    """`[2026-04-08 14:05:21 TP0] …` shown as `[14:05:21 TP0] …`: the date is noise in a live tail."""
    if len(line) > 12 and line[0] == "[" and line[5] == "-" and line[11] == " ":
        return "[" + line[12:]
    return line


def event_style(event: LogEvent) -> str:
    """A line's colour, from the parser's verdict only (`parse_line` decides severity once): a red line
    is always an `n`/`N` target and an `n`/`N` target is always red."""
    if event.severity == "error":
        return "bold red"
    if event.severity == "warning":
        return "yellow"
    if event.phase == "ready":
        return "bold green"
    if event.kind in ("decode", "prefill"):
        return "grey62"
    if event.kind == "access":
        return "grey42"
    if event.kind == "boot":
        return "cyan"
    return ""


def wrap_rows(text: str, width: int) -> list[str]:
    """A line cut into rows of at most `width` cells, at a space where one is near the end of the
    row (a word is not split unless it is longer than half a row); continuation rows indented by
    two spaces. Every character is kept: joining the rows (less the indent) gives the line."""
    if width < 8 or len(text) <= width:
        return [text]
    rows: list[str] = []
    rest = text
    room = width
    while len(rest) > room:
        cut = rest.rfind(" ", 0, room)
        if cut < room // 2:
            cut = room  # no space near the end: a hard cut
        else:
            cut += 1  # the space stays at the end of its row
        rows.append(("  " if rows else "") + rest[:cut])
        rest = rest[cut:]
        room = width - 2
    rows.append(("  " if rows else "") + rest)
    return rows


@lru_cache(maxsize=64)
def _style(spec: str) -> Style:
    return Style.parse(spec) if spec else Style()


def smart_match(needle: str) -> Callable[[str], bool]:
    """Smart case: a filter in lower case matches any case; one capital makes it exact."""
    if needle != needle.lower():
        return lambda text: needle in text
    return lambda text: needle in text.lower()


class LogLines(ScrollView, can_focus=True):
    """The rows of the store that pass the filter, rendered on demand. Follow by intent: the
    view keeps the end in view after every sync while following; only the user's own scrolling
    up stops following (`on_user_scroll(up)`), and End resumes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("G", "scroll_end", "Follow", show=False)]
    DEFAULT_CSS = """
    LogLines { background: $surface 0%; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.store: Sequence[LogEvent] = ()
        self.total = 0  # the store's absolute line count at the last sync
        self._store_total: Callable[[], int] = lambda: self.total  # the store's count now (the state's)
        self.rows: list[tuple[int, int]] = []  # (absolute line number, row within the line)
        self.filter_text = ""
        self._matches: Callable[[str], bool] | None = None
        self.wrap = False
        self.wrap_width = 0
        self.show_own = False
        self._own: deque[int] = deque()  # absolute numbers of the own polls hidden (bounded by the store)
        self.following = True
        self.on_user_scroll: Callable[[bool], None] | None = None
        self._width = 0
        self._wrapped: dict[int, list[str]] = {}  # absolute line → its rows (wrap only; bounded by the store)
        self.syncs = 0
        self.layouts_saved = 0  # rows added without a layout of the screen (tests read it)
        self._frame_style: tuple[int, Style] | None = None  # set while a frame renders its rows
        self.on_size_change: Callable[[], None] | None = None  # the pane's subtitle says "4 shows more" by it

    # -- the index -------------------------------------------------------------------------
    @property
    def base(self) -> int:
        """The absolute number of the store's first line now (the store may have moved on since
        the last sync: rows are found by absolute number, so a row never shows another line)."""
        return self._store_total() - len(self.store)

    @property
    def line_count(self) -> int:
        """Rows in the view (what the old `Log.line_count` said)."""
        return len(self.rows)

    def event(self, absolute: int) -> LogEvent | None:
        i = absolute - self.base
        return self.store[i] if 0 <= i < len(self.store) else None

    def _keeps(self, event: LogEvent) -> bool:
        if not self.show_own and is_own_poll(event):
            return False
        return self._matches is None or self._matches(display_text(event.text))

    def _row_texts(self, absolute: int, event: LogEvent) -> list[str]:
        text = display_text(event.text)
        if not self.wrap:
            return [text]
        rows = self._wrapped.get(absolute)
        if rows is None:
            rows = self._wrapped[absolute] = wrap_rows(text, self.wrap_width)
        return rows

    def _index(self, start: int, events: Sequence[LogEvent] | Any) -> int:
        """Add the rows of `events` (absolute numbers from `start`); returns lines shown. The hot
        path of a flood: a few operations per line, no copy of its text."""
        shown = 0
        rows = self.rows
        own = self._own
        hide_own = not self.show_own
        matches = self._matches
        wrap = self.wrap
        width = self._width
        for absolute, event in enumerate(events, start):
            if hide_own and event.kind == "access" and OWN_POLL.search(event.text) is not None:
                own.append(absolute)
                continue
            if matches is not None and not matches(display_text(event.text)):
                continue
            shown += 1
            if wrap:
                rows.extend((absolute, k) for k in range(len(self._row_texts(absolute, event))))
            else:
                rows.append((absolute, 0))
                n = len(event.text)
                if n > width:
                    width = n
        self._width = width
        return shown

    def sync(self, store: Sequence[LogEvent], total: int, store_total: Callable[[], int] | None = None) -> int:
        """Take the store's new lines (and forget the ones it dropped). `store_total` says the
        store's absolute count at any time (`lambda: state.log_lines_total`). Returns how many
        new lines are shown (for "following: off, N new lines")."""
        self.syncs += 1
        if store is not self.store:
            self.store, self.total = store, total
            if store_total is not None:
                self._store_total = store_total
            self.rebuild()
            return 0
        new = total - self.total
        if new <= 0:
            return 0
        old_total = self.total
        self.total = total
        base = self.base
        first_new = max(old_total, base)
        shown = self._index(first_new, islice(store, first_new - base, None))
        dropped = self._drop_before(base)
        self._resized(dropped)
        return shown

    @property
    def own_hidden(self) -> int:
        """The console's own polls in the store, hidden (0 while shown)."""
        return len(self._own)

    def _drop_before(self, base: int) -> int:
        own = self._own
        while own and own[0] < base:
            own.popleft()
        if not self.rows or self.rows[0][0] >= base:
            return 0
        cut = bisect_left(self.rows, (base, -1))
        del self.rows[:cut]
        if self._wrapped:
            for absolute in [a for a in self._wrapped if a < base]:
                del self._wrapped[absolute]
        return cut

    def rebuild(self) -> None:
        """Index the whole store again (filter, wrap, width or own polls changed)."""
        self.rows = []
        self._wrapped.clear()
        self._width = 0
        self._own.clear()
        self._matches = smart_match(self.filter_text) if self.filter_text else None
        self._index(self.base, self.store)
        self._resized(0, rebuilt=True)

    def _resized(self, dropped: int, *, rebuilt: bool = False) -> None:
        width = self.wrap_width if self.wrap else self._width
        self._set_virtual_size(Size(width, len(self.rows)))
        if self.following:
            self.scroll_to_end()
        elif dropped and not rebuilt:
            self.scroll_to(y=max(0, self.scroll_y - dropped), animate=False, immediate=True, force=True)
        self.refresh()

    def _set_virtual_size(self, size: Size) -> None:
        """The view's size comes from the grid, never from its rows: a new row needs no layout of
        the whole screen (Textual's `virtual_size` asks for one; in the demo it was every line,
        33 layouts in 20 s) unless a scrollbar appears or goes, which changes the view's room.
        Otherwise the scrollbars are updated in place, as Textual does for a scroll-only change."""
        old = self.virtual_size
        if size == old:
            return
        room = self.container_size
        same_bars = bool(room) and (size.height > room.height) == (old.height > room.height) and (
            size.width > room.width) == (old.width > room.width)
        if not same_bars or not self.is_mounted:
            self.virtual_size = size
            return
        self.layouts_saved += 1
        self.set_reactive(LogLines.virtual_size, size)
        self._scroll_update(size)

    # -- settings ----------------------------------------------------------------------------
    def set_filter(self, text: str) -> None:
        self.filter_text = text
        self.rebuild()

    def set_wrap(self, wrap: bool, width: int) -> None:
        self.wrap, self.wrap_width = wrap, max(8, width)
        self.rebuild()

    def set_show_own(self, show: bool) -> None:
        self.show_own = show
        self.rebuild()

    # -- what the operator sees --------------------------------------------------------------
    def row(self, y: int) -> tuple[str, str]:
        """The text and style of row `y` (absolute in the view)."""
        if not 0 <= y < len(self.rows):
            return "", ""
        absolute, k = self.rows[y]
        event = self.event(absolute)
        if event is None:
            return "", ""
        texts = self._row_texts(absolute, event)
        return (texts[k] if k < len(texts) else ""), event_style(event)

    @property
    def lines(self) -> list[str]:
        """Every row's text (tests; the view itself renders only what is visible)."""
        return [self.row(y)[0] for y in range(len(self.rows))]

    @property
    def row_styles(self) -> list[str]:
        return [self.row(y)[1] for y in range(len(self.rows))]

    def error_rows(self) -> list[int]:
        """Rows where an error line starts: the `n`/`N` targets (the red lines, and only them)."""
        out = []
        for y, (absolute, k) in enumerate(self.rows):
            if k == 0:
                event = self.event(absolute)
                if event is not None and event.severity == "error":
                    out.append(y)
        return out

    def on_resize(self) -> None:
        """Its room settles after its pane's (the status line's height first): the pane's subtitle
        ("4 shows more" when only a few rows fit) is said again for the room it has now."""
        if self.on_size_change is not None:
            self.on_size_change()

    def render_lines(self, crop: Any) -> list[Strip]:
        """One frame's rows: the view's width and style worked out once for all of them, not per
        row (Textual's `rich_style` walks the widget's ancestors: 218 rows in the demo's 30 s cost
        as much as the rest of the rows' rendering)."""
        self._frame_style = (self.scrollable_content_region.width or self.size.width, self.rich_style)
        try:
            return super().render_lines(crop)
        finally:
            self._frame_style = None

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        if not self.rows and y == 0 and self.filter_text:
            base_style = self.rich_style
            return Strip([Segment("no line matches", base_style + Style(dim=True, italic=True))]
                         ).crop_extend(0, self.size.width, base_style)
        return self.row_strip(scroll_y + y, scroll_x)

    def row_strip(self, index: int, scroll_x: int = 0) -> Strip:
        """Row `index` of the view as drawn (only visible rows are ever asked for)."""
        if self._frame_style is not None:  # within a frame (`render_lines`): its width and style
            width, base_style = self._frame_style
        else:
            width = self.scrollable_content_region.width or self.size.width  # not under the scrollbar
            base_style = self.rich_style
        text, style = self.row(index)
        if not text:
            return Strip.blank(width, base_style)
        # No horizontal scrollbar (it cost a dark row and a stub under the last line): a row cut at
        # the right edge ends in "…" instead; ←/→ still scroll, `w` wraps.
        cut = not self.wrap and len(text) - scroll_x > width > 1
        if cut:
            text = text[: scroll_x + width - 1]
        strip = Strip([Segment(text, base_style + _style(style))])
        if scroll_x and not self.wrap:
            strip = strip.crop(scroll_x, scroll_x + width)
        if cut:
            strip = Strip([*strip, Segment("…", base_style + Style(dim=True))])
        return strip.crop_extend(0, width, base_style)

    # -- follow by intent ----------------------------------------------------------------------
    def _user_scrolled(self, up: bool) -> None:
        if self.on_user_scroll is not None:
            self.on_user_scroll(up)

    def scroll_to_end(self) -> None:
        # force: the scrollbars are worked out at the next layout; until then Textual refuses a
        # scroll of a view that had no vertical scrollbar yet (the first lines of a flood).
        self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True, force=True)

    def action_scroll_up(self) -> None:
        super().action_scroll_up()
        self._user_scrolled(True)

    def action_page_up(self) -> None:
        super().action_page_up()
        self._user_scrolled(True)

    def action_scroll_home(self) -> None:
        super().action_scroll_home()
        self._user_scrolled(True)

    def action_scroll_end(self) -> None:
        self.scroll_to_end()
        self._user_scrolled(False)

    def action_scroll_down(self) -> None:
        super().action_scroll_down()
        if self.scroll_target_y >= self.max_scroll_y:
            self._user_scrolled(False)

    def action_page_down(self) -> None:
        super().action_page_down()
        if self.scroll_target_y >= self.max_scroll_y:
            self._user_scrolled(False)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if self.is_vertical_scrollbar_grabbed:  # dragging the scrollbar is reading too
            self._user_scrolled(new < self.max_scroll_y)

    def _on_mouse_scroll_up(self, event: Any) -> None:
        super()._on_mouse_scroll_up(event)
        self._user_scrolled(True)

    def _on_mouse_scroll_down(self, event: Any) -> None:
        super()._on_mouse_scroll_down(event)
        if self.scroll_target_y >= self.max_scroll_y:
            self._user_scrolled(False)
