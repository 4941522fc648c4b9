"""The SGLang log pane: server status, boot timeline and the latest batch statistics on top; the
tail below, bounded (Textual's `Log` prunes even while hidden), coloured by severity.

Keys: `/` filter, `n`/`N` next/previous error, space pause/resume following, End (or G) follow again,
`w` wrap long lines."""

from __future__ import annotations

from collections import deque
from typing import Any, ClassVar

from rich.highlighter import Highlighter
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Input, Log, Static

from console.analysis.log_state import LogSummary
from console.analysis.server_status import ServerStatus
from console.model import Reading
from console.panes.base import PaneFrame
from console.parsers.sglang_log import LogEvent
from console.units import DASH, duration

MAX_LINES = 5000
STATUS_STYLE = {"ready": "bold black on green", "starting": "bold black on cyan", "degraded": "bold black on yellow",
                "dead": "bold white on red", "unknown": "bold black on grey50"}
SHORT = {"launch": "launch", "weights loading": "weights…", "weights loaded": "weights", "mamba cache": "mamba",
         "kv cache": "kv", "cuda graphs": "graphs…", "cuda graphs done": "graphs", "capacity": "pools",
         "http up": "http", "ready": "ready"}


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
    """A line cut into rows of `width` cells, continuation rows indented by two spaces."""
    if width < 8 or len(text) <= width:
        return [text]
    rows = [text[:width]]
    rest = text[width:]
    step = width - 2
    while rest:
        rows.append("  " + rest[:step])
        rest = rest[step:]
    return rows


def format_subtitle(source_label: str, *, following: bool, new_lines: int, filter_text: str,
                    quiet_s: float | None, wrap: bool, cramped: bool = False) -> str:
    """State first (a cut subtitle keeps what matters): following, filter, wrap, then the source.
    `cramped`: only a few lines fit, so say how to see more."""
    parts: list[str] = []
    if cramped:
        parts.append("4 shows more")
    if not following:
        parts.append(f"following: off, {new_lines} new line{'s' if new_lines != 1 else ''} (End resumes)")
    if filter_text:
        parts.append(f"filter {filter_text!r}")
    if wrap:
        parts.append("wrap")
    if quiet_s is not None and quiet_s > 30:
        parts.append(f"quiet {duration(quiet_s)}")
    parts.append(source_label)
    return " · ".join(parts)


class _RowStyles(Highlighter):
    """Colours the row being rendered with the style stored beside it (see `TailLog`)."""

    def __init__(self, log: TailLog) -> None:
        self.log = log

    def highlight(self, text: Text) -> None:
        y = self.log.styling_row
        styles = self.log.row_styles
        if 0 <= y < len(styles) and styles[y]:
            text.stylize(styles[y])


class TailLog(Log):
    """Textual's `Log` (bounded, prunes while hidden) with one style per row and follow by intent:
    the pane scrolls to the end after every write while following, whatever resized it; only the
    user's own scrolling up stops following, and End resumes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("G", "scroll_end", "Follow", show=False)]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(highlight=True, **kwargs)
        self.row_styles: list[str] = []
        self.styling_row = -1
        self.highlighter = _RowStyles(self)
        self.on_user_scroll: Any = None  # callable(up: bool), set by the pane

    def append_rows(self, rows: list[tuple[str, str]]) -> None:
        if not rows:
            return
        self.row_styles.extend(style for _, style in rows)
        self.write_lines([text for text, _ in rows], scroll_end=False)

    def _prune_max_lines(self) -> None:
        if self.max_lines is not None:
            extra = len(self._lines) - self.max_lines
            if extra > 0:
                del self.row_styles[:extra]
        super()._prune_max_lines()

    def clear(self) -> TailLog:
        self.row_styles.clear()
        super().clear()
        return self

    def _render_line_strip(self, y: int, rich_style: Any) -> Any:
        self.styling_row = y
        return super()._render_line_strip(y, rich_style)

    def _user_scrolled(self, up: bool) -> None:
        if self.on_user_scroll is not None:
            self.on_user_scroll(up)

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
        super().action_scroll_end()
        self._user_scrolled(False)

    def action_scroll_down(self) -> None:
        super().action_scroll_down()
        if self.scroll_y >= self.max_scroll_y:
            self._user_scrolled(False)

    def action_page_down(self) -> None:
        super().action_page_down()
        if self.scroll_y >= self.max_scroll_y:
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


def format_status(server: Reading[ServerStatus] | None, log: Reading[LogSummary] | None, width: int = 56,
                  now_s: float | None = None) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    st = server.data if server else None
    if st is not None:
        t.append(f" {st.status.upper()} ", style=STATUS_STYLE.get(st.status, "bold"))
        t.append(f" {st.reason}"[: max(0, width - len(st.status) - 3)])
    elif server is not None and server.error:
        t.append(" UNKNOWN ", style=STATUS_STYLE["unknown"])
        t.append(f" {server.error}")
    else:
        t.append("server status: waiting…", style="dim")
    s = log.data if log else None
    if s is None:
        if log is not None and log.error:
            t.append(f"\n{log.error}", style="red")
        return t
    if s.boot:
        t.append("\n")
        line = Text()
        for i, step in enumerate(s.boot):
            if i:
                line.append(" › ", style="dim")
            line.append(SHORT.get(step.phase, step.phase), style="bold green" if step.phase == "ready" else "cyan")
            if step.seconds is not None and step.phase not in ("launch",):
                line.append(f" {step.seconds:.0f}s", style="dim")
        line.truncate(width, overflow="ellipsis")
        t.append_text(line)
    d = s.last_decode
    if d:
        t.append("\n")
        gen = d.gen_tokens_per_s
        t.append("gen ", style="dim")
        t.append(f"{gen:,.0f} tok/s" if gen is not None else DASH, style="bold")
        t.append("  run ", style="dim")
        t.append(str(d.running_reqs if d.running_reqs is not None else DASH))
        t.append("  queue ", style="dim")
        q = d.queue_reqs
        t.append(str(q if q is not None else DASH), style="yellow" if q else "")
        usage = d.kv_usage
        if usage is not None:
            t.append("  kv ", style="dim")
            t.append(f"{usage:.0%}", style="yellow" if usage > 0.9 else "")
        if d.mamba_usage is not None:
            t.append("  mamba ", style="dim")
            t.append(f"{d.mamba_usage:.0%}", style="yellow" if d.mamba_usage > 0.9 else "")
        if d.accept_len is not None:
            t.append("  accept ", style="dim")
            t.append(f"{d.accept_len:.2f}")
    if s.errors:
        t.append("\n")
        last = s.errors[-1]
        t.append(f"{len(s.errors)} errors/warnings", style="bold red" if any(
            e.kind in ("exception", "oom", "crash", "watchdog", "nan", "health") for e in s.errors) else "yellow")
        t.append(f" · last: {last.kind}: {last.message[-max(10, width - 30):]}", style="dim")
    return t


class LogPane(PaneFrame, Vertical, can_focus=True):
    DEFAULT_CSS = """
    LogPane { border: round $primary 40%; border-title-color: $text; border-title-style: bold;
        height: 1fr; padding: 0 1; }
    LogPane:focus-within { border: round $accent; }
    LogPane.-stale { border: round $warning 60%; }
    LogPane.-error { border: round $error 70%; }
    LogPane #log-status { height: auto; max-height: 5; text-wrap: nowrap; text-overflow: ellipsis; }
    LogPane #log-lines { height: 1fr; border: none; padding: 0; background: $surface 0%; scrollbar-size: 1 1; }
    LogPane #log-filter { display: none; height: 1; border: none; padding: 0; }
    LogPane.-filtering #log-filter { display: block; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("n", "next_error", "Next error"),
        Binding("N", "previous_error", "Prev error", key_display="N"),
        Binding("space", "toggle_pause", "Pause"),
        Binding("end,G", "follow", "Follow", key_display="End"),
        Binding("w", "toggle_wrap", "Wrap"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]
    PANE_KEY = "4"
    PANE_TITLE = "SGLang log"
    MIN_LOG_ROWS = 3  # the status block gives way so that a small terminal still shows some lines

    following: reactive[bool] = reactive(True)
    # repaint=False: their watchers redraw the status line; the pane itself need not repaint
    summary: reactive[Reading[LogSummary] | None] = reactive(None, repaint=False)
    server: reactive[Reading[ServerStatus] | None] = reactive(None, repaint=False)

    def __init__(self, source_label: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source_label = source_label
        self.lines: deque[tuple[str, str, str]] = deque(maxlen=MAX_LINES)  # (text, severity, style)
        self.filter_text = ""
        self.wrap = False
        self.new_lines = 0  # shown lines that arrived while not following
        self._quiet_s: float | None = None
        self._wrap_width = 0

    @property
    def paused(self) -> bool:
        return not self.following

    def compose(self) -> ComposeResult:
        yield Static(id="log-status")
        log = TailLog(max_lines=MAX_LINES, id="log-lines")
        log.on_user_scroll = self._user_scrolled
        yield log
        yield Input(placeholder="filter: text to keep (enter), escape clears", id="log-filter")

    def on_mount(self) -> None:
        self.border_title = f"{self.PANE_KEY} {self.PANE_TITLE}"
        self._update_subtitle()
        self._redraw_status()

    @property
    def log_widget(self) -> TailLog:
        return self.query_one("#log-lines", TailLog)

    # -- lines ---------------------------------------------------------------------------
    def _shows(self, text: str) -> bool:
        return not self.filter_text or self.filter_text in text

    def _rows_of(self, text: str, style: str) -> list[tuple[str, str]]:
        if not self.wrap:
            return [(text, style)]
        return [(row, style) for row in wrap_rows(text, self._wrap_width)]

    def add_events(self, events: tuple[LogEvent, ...]) -> None:
        """Append a batch: one write for the whole batch (the widget repaints once)."""
        new = [(display_text(e.text), e.severity, event_style(e)) for e in events]  # redacted at the source
        self.lines.extend(new)
        rows: list[tuple[str, str]] = []
        shown = 0
        for text, _, style in new:
            if self._shows(text):
                shown += 1
                rows.extend(self._rows_of(text, style))
        if not rows:
            return
        log = self.log_widget
        log.append_rows(rows)
        if self.following:
            log.scroll_end(animate=False, immediate=True, x_axis=False)
        else:
            self.new_lines += shown
            self._update_subtitle()

    def state_changed(self, state: Any, source: str) -> None:
        """The host's state changed: its log summary or server status (lines come by add_events)."""
        if not getattr(self, "_primed", False):
            self._primed = True  # a view opened late (attach, replay) starts from the state's tail
            if state.log_lines:
                self.add_events(tuple(state.log_lines))
        if source == "log":
            self.summary = state.reading("log")
        elif source == "server":
            self.server = state.reading("server")

    def _rebuild(self) -> None:
        log = self.log_widget
        log.clear()
        rows: list[tuple[str, str]] = []
        for text, _, style in self.lines:
            if self._shows(text):
                rows.extend(self._rows_of(text, style))
        log.append_rows(rows)
        if self.following:
            log.scroll_end(animate=False, immediate=True, x_axis=False)
        self._update_subtitle()

    def on_resize(self) -> None:
        status = self.query_one("#log-status", Static)
        room = self.content_size.height - self.MIN_LOG_ROWS
        status.styles.max_height = max(1, min(5, room))
        self._redraw_status()
        self.call_after_refresh(self._after_resize)

    def _after_resize(self) -> None:
        self._update_subtitle()
        log = self.log_widget
        width = max(8, log.size.width - 1)
        if self.wrap and width != self._wrap_width:
            self._wrap_width = width
            self._rebuild()
        elif self.following:
            log.scroll_end(animate=False, immediate=True, x_axis=False)

    # -- status and subtitle ---------------------------------------------------------------
    def watch_summary(self) -> None:
        self._redraw_status()

    def watch_server(self) -> None:
        self._redraw_status()

    def _redraw_status(self) -> None:
        width = self.content_size.width or 56
        status = format_status(self.server, self.summary, width)
        key = (status.plain, tuple(status.spans))
        if key != getattr(self, "_status_key", None):
            self._status_key = key
            self.query_one("#log-status", Static).update(status)
            if self.following and self.is_mounted:  # the status block may have grown: keep the tail in view
                self.call_after_refresh(self._keep_following)
        state = self.server.data.status if self.server and self.server.data else None
        self.set_class(state in ("dead",), "-error")
        self.set_class(state in ("degraded",), "-stale")

    def _keep_following(self) -> None:
        if self.following:
            self.log_widget.scroll_end(animate=False, immediate=True, x_axis=False)

    def _update_subtitle(self) -> None:
        cramped = self.is_mounted and self.screen.maximized is not self and 0 < self.log_widget.size.height < 5
        label = format_subtitle(self.source_label, following=self.following, new_lines=self.new_lines,
                                filter_text=self.filter_text, quiet_s=self._quiet_s, wrap=self.wrap, cramped=cramped)
        if self.border_subtitle != label:
            self.border_subtitle = label

    def update_age(self, now_s: float) -> None:
        """Once a second, like the other panes: a quiet log while serving is worth a word."""
        s = self.summary.data if self.summary else None
        self._quiet_s = None if s is None or s.last_line_at_s is None else now_s - s.last_line_at_s
        self._update_subtitle()

    # -- follow ------------------------------------------------------------------------------
    def watch_following(self, following: bool) -> None:
        if following:
            self.new_lines = 0
            if self.is_mounted:
                self.log_widget.scroll_end(animate=False, immediate=True, x_axis=False)
        if self.is_mounted:
            self._update_subtitle()

    def _user_scrolled(self, up: bool) -> None:
        log = self.log_widget
        if up and log.max_scroll_y > 0:
            self.following = False
        elif not up:
            self.following = True

    # -- actions -------------------------------------------------------------------------
    def action_toggle_pause(self) -> None:
        self.following = not self.following

    def action_follow(self) -> None:
        self.following = True

    def action_toggle_wrap(self) -> None:
        self.wrap = not self.wrap
        self._wrap_width = max(8, self.log_widget.size.width - 1)
        self._rebuild()

    def action_filter(self) -> None:
        self.add_class("-filtering")
        self.query_one("#log-filter", Input).focus()

    def action_clear_filter(self) -> None:
        self.remove_class("-filtering")
        if self.filter_text:
            self.filter_text = ""
            self._rebuild()
        self.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.filter_text = event.value.strip()
        self._rebuild()
        if not self.filter_text:
            self.remove_class("-filtering")
        self.focus()

    def error_rows(self) -> list[int]:
        """Rows (in what the Log holds now) where an error line starts: the `n`/`N` targets."""
        rows: list[tuple[int, str]] = []
        row = 0
        for text, severity, _ in self.lines:
            if not self._shows(text):
                continue
            rows.append((row, severity))
            row += len(wrap_rows(text, self._wrap_width)) if self.wrap else 1
        offset = row - self.log_widget.line_count
        return [r - offset for r, severity in rows if severity == "error" and r >= offset]

    def _jump(self, forward: bool) -> None:
        rows = self.error_rows()
        if not rows:
            self.app.notify("no errors in the log tail", timeout=3)
            return
        log = self.log_widget
        here = int(log.scroll_y)
        target = next((r for r in rows if r > here), None) if forward else next(
            (r for r in reversed(rows) if r < here), None)
        if target is None:
            target = rows[0] if forward else rows[-1]
        self.following = False  # jumping means reading: stop following
        log.scroll_to(y=target, animate=False, immediate=True)

    def action_next_error(self) -> None:
        self._jump(True)

    def action_previous_error(self) -> None:
        self._jump(False)
