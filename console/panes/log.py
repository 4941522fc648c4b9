"""The SGLang log pane: server status, boot timeline and the latest batch statistics on top; the
tail below, bounded (Textual's `Log` prunes even while hidden), coloured by severity.

Keys: `/` filter, `n`/`N` next/previous error, space pause/resume following."""

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
from console.redact import redact_text
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


class SeverityHighlighter(Highlighter):
    """Colours a whole line by what it says; cheap enough for a flood (substring checks only)."""

    def highlight(self, text: Text) -> None:
        s = text.plain
        if ("Traceback" in s or "Error" in s or "error" in s or "exception" in s or "out of memory" in s
                or "Not enough" in s or "sigquit" in s or "failed" in s or "FAILURE" in s):
            text.stylize("bold red")
        elif "WARNING" in s or "Warning" in s or "deprecated" in s or "Retract" in s or "larger than the profiled" in s:
            text.stylize("yellow")
        elif "fired up and ready to roll" in s:
            text.stylize("bold green")
        elif "Decode batch" in s or "Prefill batch" in s:
            text.stylize("grey62")
        elif "INFO:" in s:
            text.stylize("grey42")
        elif "Load weight" in s or "Cache is allocated" in s or "graph" in s or "max_total_num_tokens" in s:
            text.stylize("cyan")


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
        t.append(f" · last: {last.kind}: {redact_text(last.message)[-max(10, width - 30):]}", style="dim")
    return t


class LogPane(PaneFrame, Vertical, can_focus=True):
    DEFAULT_CSS = """
    LogPane { border: round $primary 40%; border-title-color: $text; border-title-style: bold;
        height: 1fr; padding: 0 1; }
    LogPane:focus-within { border: round $accent; }
    LogPane.-stale { border: round $warning 60%; }
    LogPane.-error { border: round $error 70%; }
    LogPane #log-status { height: auto; max-height: 5; }
    LogPane #log-lines { height: 1fr; border: none; padding: 0; background: $surface 0%; scrollbar-size: 1 1; }
    LogPane #log-filter { display: none; height: 1; border: none; padding: 0; }
    LogPane.-filtering #log-filter { display: block; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("n", "next_error", "Next error"),
        Binding("N", "previous_error", "Prev error", key_display="N"),
        Binding("space", "toggle_pause", "Pause"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]
    PANE_KEY = "4"
    PANE_TITLE = "SGLang log"

    paused: reactive[bool] = reactive(False)
    summary: reactive[Reading[LogSummary] | None] = reactive(None)
    server: reactive[Reading[ServerStatus] | None] = reactive(None)

    def __init__(self, source_label: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source_label = source_label
        self.lines: deque[tuple[str, str]] = deque(maxlen=MAX_LINES)  # (text, severity)
        self.filter_text = ""
        self._shown: list[int] = []  # severity "error" positions in what the Log shows

    def compose(self) -> ComposeResult:
        yield Static(id="log-status")
        log = Log(max_lines=MAX_LINES, highlight=True, id="log-lines")
        log.highlighter = SeverityHighlighter()
        yield log
        yield Input(placeholder="filter: text to keep (enter), escape clears", id="log-filter")

    def on_mount(self) -> None:
        self.border_title = f"{self.PANE_KEY} {self.PANE_TITLE}"
        self.border_subtitle = self.source_label
        self._redraw_status()

    @property
    def log_widget(self) -> Log:
        return self.query_one("#log-lines", Log)

    def add_events(self, events: tuple[LogEvent, ...]) -> None:
        """Append a batch: one write for the whole batch (the widget repaints once)."""
        new = [(redact_text(display_text(e.text)), e.severity) for e in events]
        self.lines.extend(new)
        shown = [text for text, _ in new if not self.filter_text or self.filter_text in text]
        if shown:
            self.log_widget.write_lines(shown)

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
        status = self.server.data.status if self.server and self.server.data else None
        self.set_class(status in ("dead",), "-error")
        self.set_class(status in ("degraded",), "-stale")

    def update_age(self, now_s: float) -> None:
        """Once a second, like the other panes: a quiet log while serving is worth a word."""
        s = self.summary.data if self.summary else None
        if s is None or s.last_line_at_s is None:
            return
        quiet = now_s - s.last_line_at_s
        label = self.source_label + (f" · quiet {duration(quiet)}" if quiet > 30 else "")
        label += " · PAUSED" if self.paused else ""
        if self.border_subtitle != label:
            self.border_subtitle = label

    # -- actions -------------------------------------------------------------------------
    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        self.log_widget.auto_scroll = not self.paused
        if not self.paused:
            self.log_widget.scroll_end(animate=False)
        self.update_age(0)

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

    def _rebuild(self) -> None:
        log = self.log_widget
        log.clear()
        log.write_lines([t for t, _ in self.lines if not self.filter_text or self.filter_text in t])
        self.border_subtitle = self.source_label + (f" · filter {self.filter_text!r}" if self.filter_text else "")

    def _error_rows(self) -> list[int]:
        shown = [(t, sev) for t, sev in self.lines if not self.filter_text or self.filter_text in t]
        offset = max(0, len(shown) - self.log_widget.line_count)
        return [i - offset for i, (_, sev) in enumerate(shown) if sev == "error" and i >= offset]

    def _jump(self, forward: bool) -> None:
        rows = self._error_rows()
        if not rows:
            self.app.notify("no errors in the log tail", timeout=3)
            return
        log = self.log_widget
        here = int(log.scroll_y)
        target = next((r for r in rows if r > here), None) if forward else next(
            (r for r in reversed(rows) if r < here), None)
        if target is None:
            target = rows[0] if forward else rows[-1]
        if not self.paused:
            self.action_toggle_pause()  # jumping means reading: stop following
        log.scroll_to(y=target, animate=False)

    def action_next_error(self) -> None:
        self._jump(True)

    def action_previous_error(self) -> None:
        self._jump(False)
