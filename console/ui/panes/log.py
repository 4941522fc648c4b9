"""The SGLang log pane: server status, boot timeline and the latest batch statistics on top; the
tail below, a virtual view (`console.ui.panes.log_view.LogLines`) over the state's one line store,
coloured by severity.

Keys: `/` filter (smart case; escape clears, then leaves), `n`/`N` next/previous error, space
pause/resume following, End (or G) follow again, `w` wrap long lines (at word boundaries), `a`
show the console's own polls (hidden by default)."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Input, Static

from console.core.freshness import freshness, stale_after_s
from console.core.state import HostState, LogAppended
from console.domain.analysis.log_state import LogSummary
from console.domain.analysis.server_status import NOT_THE_UNITS, ServerStatus
from console.host.parsers.sglang_log import LogEvent
from console.model import Reading
from console.ui.panes.base import PaneFrame, label_due_s, limit_due_s
from console.ui.panes.log_view import (  # noqa: F401  (imported from here by tests and tools)
    LogLines,
    display_text,
    event_style,
    is_own_poll,
    wrap_rows,
)
from console.units import DASH, duration, fit_name, tail_from_word

STATUS_STYLE = {"ready": "bold black on green", "starting": "bold black on cyan", "degraded": "bold black on yellow",
                "dead": "bold white on red", "unknown": "bold black on grey50"}
QUIET_SHOWN_AFTER_S = 30.0  # a log quiet this long while serving is said in the subtitle
QUIET_STEP_S = 10.0  # the quiet time counts in 10 s steps ("quiet 40s", "quiet 2m10s", never more than it is)


def quiet_shown_s(quiet_s: float) -> float:
    """The quiet time as the subtitle says it: in 10 s steps (rounded down: never more than it is)
    from the moment it is said: a quiet host's log pane was repainted every second for a label no
    one reads by the second (issue 23 past a minute; issue 36 from 30 to 60 s, where it was 19 of a
    quiet host's 34 refreshes in 30 s)."""
    return quiet_s // QUIET_STEP_S * QUIET_STEP_S
SHORT = {"launch": "launch", "weights loading": "weights…", "weights loaded": "weights", "mamba cache": "mamba",
         "kv cache": "kv", "cuda graphs": "graphs…", "cuda graphs done": "graphs", "capacity": "pools",
         "http up": "http", "ready": "ready"}


def format_subtitle(source_label: str, *, following: bool, new_lines: int, filter_text: str,
                    quiet_s: float | None, wrap: bool, cramped: bool = False, own_hidden: int = 0) -> str:
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
    if own_hidden:
        # the server's access lines of the console's own polls (/metrics, /health): said as what they
        # are, the key as the footer says it ("17 own polls hidden (a shows)" read as jargon)
        parts.append(f"{own_hidden} console request{'s' if own_hidden != 1 else ''} hidden (a: show)")
    if quiet_s is not None and quiet_s > QUIET_SHOWN_AFTER_S:
        parts.append(f"quiet {duration(quiet_shown_s(quiet_s))}")
    parts.append(source_label)
    return " · ".join(parts)


def _cut_at_word(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    cut = text[: max(0, width - 1)]
    if " " in cut.strip():
        cut = cut[: cut.rstrip().rfind(" ")]
    return cut.rstrip(" ,;:(·") + "…"


def status_reason(prefix: str, reason: str, width: int) -> str:
    """The status's reason in `width` cells. A server that is not the followed unit's says so first
    when the whole reason does not fit ("serving · not sglang-qwen122b.service's (inactive)"), never
    "serving: /health_generate answered (not sglang-qwen" cut mid-name; else cut at a word, with "…"."""
    whole = prefix + reason
    if len(whole) <= width:
        return whole
    m = NOT_THE_UNITS.match(reason)
    if m:
        head = m.group("head").split(":", 1)[0]
        unit, state = m.group("unit"), m.group("state")
        for said in (f"{head} · not {unit}'s ({state})", f"{head} · not {unit}'s",
                     f"{head} · not {fit_name(unit, max(8, width - len(prefix) - len(head) - 9))}'s"):
            if len(prefix + said) <= width:
                return prefix + said
    return _cut_at_word(whole, width)


def format_status(server: Reading[ServerStatus] | None, log: Reading[LogSummary] | None, width: int = 56,
                  now_s: float | None = None, boot_rows: int = 1) -> Text:
    """`boot_rows`: rows the boot timeline may take (2 when the pane is maximized: the whole
    timeline, broken at a step, rather than cut)."""
    t = Text(no_wrap=True, overflow="ellipsis")
    st = server.data if server else None
    if st is not None:
        t.append(f" {st.status.upper()} ", style=STATUS_STYLE.get(st.status, "bold"))
        fresh = freshness("server", server, now_s) if now_s is not None else None
        mark = ""
        if fresh is not None and fresh.stale:
            # The one freshness rule (core/freshness.py): the fleet row and the header say it too.
            # Said before the reason, which a narrow pane cuts.
            mark = (f" stale {duration(fresh.age_s)}" if fresh.age_s is not None else " stale") + (
                ", last poll failed" if fresh.state == "error" else "")
            t.append(mark, style="yellow")
        # issue 24: the beside path moved the server: which port the console asks now, before the reason
        moved = f" port {st.port} (moved from {st.moved_from_port}) ·" if getattr(st, "moved_from_port", None) else ""
        # issue 36: the poll's cadence when it follows the host (a quiet host asked less, a boot more)
        cadence = f" {server.detail} ·" if server is not None and server.detail else ""
        t.append(status_reason(f"{moved}{cadence} ", st.reason, max(0, width - len(st.status) - 3 - len(mark))))
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
        rows_used = 1
        row_start = 0
        for i, step in enumerate(s.boot):
            piece = Text(SHORT.get(step.phase, step.phase), style="bold green" if step.phase == "ready" else "cyan")
            if step.seconds is not None and step.phase not in ("launch",):
                piece.append(f" {step.seconds:.0f}s", style="dim")
            if i:
                if rows_used < boot_rows and len(line) - row_start + 3 + len(piece) > width:
                    line.append(" ›\n  ", style="dim")  # the next step on the next row, not cut
                    rows_used += 1
                    row_start = len(line) - 2
                else:
                    line.append(" › ", style="dim")
            line.append_text(piece)
        rows = line.split("\n")
        for row in rows:
            row.truncate(width, overflow="ellipsis")
        t.append_text(Text("\n").join(rows))
    d = s.last_decode
    if d:
        t.append("\n")
        # The server status's figures when there is one (the newest decode line while it is fresh,
        # else the server's own gauges): derived once, in the core; the fleet row shows the same. A
        # decode line a minute old is no "now" (issue 20).
        gen, run, q, accept = ((st.gen_throughput, st.running_reqs, st.queue_reqs, st.accept_length) if st is not None
                               else (d.gen_tokens_per_s, d.running_reqs, d.queue_reqs, d.accept_len))
        t.append("gen ", style="dim")
        t.append(f"{gen:,.0f} tok/s" if gen is not None else DASH, style="bold")
        t.append("  run ", style="dim")
        t.append(f"{run:.0f}" if run is not None else DASH)
        t.append("  queue ", style="dim")
        t.append(f"{q:.0f}" if q is not None else DASH, style="yellow" if q else "")
        usage = d.kv_usage
        if usage is not None:
            t.append("  kv ", style="dim")
            t.append(f"{usage:.0%}", style="yellow" if usage > 0.9 else "")
        if d.mamba_usage is not None:
            t.append("  mamba ", style="dim")
            t.append(f"{d.mamba_usage:.0%}", style="yellow" if d.mamba_usage > 0.9 else "")
        if accept is not None:
            t.append("  accept ", style="dim")
            t.append(f"{accept:.2f}")
    if s.errors:
        t.append("\n")
        last = s.errors[-1]
        t.append(f"{len(s.errors)} errors/warnings", style="bold red" if any(
            e.kind in ("exception", "oom", "crash", "watchdog", "nan", "health") for e in s.errors) else "yellow")
        head = f" · last: {last.kind}: "
        room = max(10, width - len(t.plain.rsplit("\n", 1)[-1]) - len(head))
        t.append(head + tail_from_word(last.message, room), style="dim")
    return t


class LogPane(PaneFrame, Vertical, can_focus=True):
    DEFAULT_CSS = """
    LogPane { border: round $primary 40%; border-title-color: $text; border-title-style: bold;
        height: 1fr; padding: 0 1; }
    LogPane:focus-within { border: round $accent; }
    LogPane.-stale { border: round $warning 60%; }
    LogPane.-error { border: round $error 70%; }
    LogPane #log-status { height: auto; max-height: 5; text-wrap: nowrap; text-overflow: ellipsis; }
    LogPane #log-lines { height: 1fr; border: none; padding: 0; background: $surface 0%;
        scrollbar-size-horizontal: 0; scrollbar-size-vertical: 1; }
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
        Binding("a", "toggle_own", "Own polls", tooltip="Show or hide the console's own polls of the server"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]
    PANE_KEY = "4"
    PANE_TITLE = "SGLang log"
    MIN_LOG_ROWS = 3  # the status block gives way so that a small terminal still shows some lines

    following: reactive[bool] = reactive(True)
    # repaint=False: their watchers redraw the status line; the pane itself need not repaint
    summary: reactive[Reading[LogSummary] | None] = reactive(None, repaint=False)
    server: reactive[Reading[ServerStatus] | None] = reactive(None, repaint=False)

    def __init__(self, source_label: str, state: HostState | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source_label = source_label
        # The one line store is the state's; a pane on its own (a test, a tool) gets a state of its own.
        self.state = state if state is not None else HostState("local")
        self.use_clock(self.state.now)  # ages on the state's clock (a replay's): PaneFrame.now
        self.new_lines = 0  # shown lines that arrived while not following
        self._quiet_s: float | None = None

    @property
    def paused(self) -> bool:
        return not self.following

    @property
    def filter_text(self) -> str:
        return self.log_widget.filter_text

    @property
    def wrap(self) -> bool:
        return self.log_widget.wrap

    @property
    def lines(self) -> Any:
        """The line store this pane shows (the state's `log_lines`)."""
        return self.state.log_lines

    def compose(self) -> ComposeResult:
        yield Static(id="log-status")
        view = LogLines(id="log-lines")
        view.on_user_scroll = self._user_scrolled
        yield view
        yield Input(placeholder="filter: text to keep (lower case: any case); enter applies, escape clears",
                    id="log-filter")

    def on_mount(self) -> None:
        self.border_title = f"{self.PANE_KEY} {self.PANE_TITLE}"
        self.log_widget.on_size_change = self._update_subtitle  # not left to the next age tick
        self._sync()
        self._update_subtitle()
        self._redraw_status()

    @property
    def log_widget(self) -> LogLines:
        return self.query_one("#log-lines", LogLines)

    # -- lines ---------------------------------------------------------------------------
    def _sync(self) -> None:
        state = self.state
        shown = self.log_widget.sync(state.log_lines, state.log_lines_total, lambda: state.log_lines_total)
        if shown and not self.following:
            self.new_lines += shown
        self._update_subtitle()

    def add_events(self, events: tuple[LogEvent, ...]) -> None:
        """Lines into the state's store (a pane on its own state), then shown."""
        self.state.apply(LogAppended(self.state.host, events))
        self._sync()

    def state_changed(self, state: Any, source: str) -> None:
        """The host's state changed: its lines, its log summary or the server status."""
        if state is not self.state:
            self.state = state
            self.use_clock(state.now)
        if source == "log_lines":
            self._sync()
        elif source == "log":
            self.summary = state.reading("log")
        elif source == "server":
            self.server = state.reading("server")

    def on_resize(self) -> None:
        status = self.query_one("#log-status", Static)
        room = self.content_size.height - self.MIN_LOG_ROWS
        status.styles.max_height = max(1, min(5, room))
        self._redraw_status()
        self.call_after_refresh(self._after_resize)

    def relayout(self) -> None:
        self.on_resize()

    def _wrap_width(self) -> int:
        return max(8, self.log_widget.size.width - 1)

    def _after_resize(self) -> None:
        self._update_subtitle()
        log = self.log_widget
        if log.wrap and self._wrap_width() != log.wrap_width:
            log.set_wrap(True, self._wrap_width())
        elif self.following:
            log.scroll_to_end()

    # -- status and subtitle ---------------------------------------------------------------
    def watch_summary(self) -> None:
        self._redraw_status()
        self.update_age()  # "quiet 1m30s" from the new summary at once, not at the next tick

    def watch_server(self) -> None:
        self.update_age()  # redraws the status line, and says when its staleness next moves

    def _redraw_status(self) -> None:
        width = self.content_size.width or 56
        maximized = self.is_mounted and self.screen.maximized is self
        status = format_status(self.server, self.summary, width, self.now(), boot_rows=2 if maximized else 1)
        key = (status.plain, tuple(status.spans))
        if key != getattr(self, "_status_key", None):
            # A layout only when its height may change (its row count): new figures in the same
            # rows repaint the status alone, not the whole screen (a layout per summary, issue 23).
            rows = status.plain.count("\n") + 1
            layout = rows != getattr(self, "_status_rows", None)
            self._status_key, self._status_rows = key, rows
            self.query_one("#log-status", Static).update(status, layout=layout)
            if self.following and self.is_mounted:  # the status block may have grown: keep the tail in view
                self.call_after_refresh(self._keep_following)
        state = self.server.data.status if self.server and self.server.data else None
        self.set_class(state in ("dead",), "-error")
        self.set_class(state in ("degraded",), "-stale")

    def _keep_following(self) -> None:
        if self.following:
            self.log_widget.scroll_to_end()

    def _update_subtitle(self) -> None:
        if not self.is_mounted:
            return
        log = self.log_widget
        cramped = self.screen.maximized is not self and 0 < log.size.height < 5
        label = format_subtitle(self.source_label, following=self.following, new_lines=self.new_lines,
                                filter_text=log.filter_text, quiet_s=self._quiet_s, wrap=log.wrap, cramped=cramped,
                                own_hidden=log.own_hidden)
        if self.border_subtitle != label:
            self.border_subtitle = label

    def update_age(self, now_s: float | None = None) -> None:
        """A quiet log while serving is worth a word ("quiet 1m30s" past 30 s), and the server
        status's staleness moves with the clock: `age_due_s` says when either next reads differently."""
        s = self.summary.data if self.summary else None
        now = now_s if now_s is not None else self.now()
        self._quiet_s = None if s is None or s.last_line_at_s is None else now - s.last_line_at_s
        self._update_subtitle()
        if self.is_mounted:
            self._redraw_status()  # drawn only if changed
        dues = []
        if s is not None and s.last_line_at_s is not None:
            quiet = self._quiet_s or 0.0
            if quiet <= QUIET_SHOWN_AFTER_S:
                dues.append(limit_due_s(s.last_line_at_s, QUIET_SHOWN_AFTER_S))
            elif quiet >= 3600:
                dues.append(label_due_s(s.last_line_at_s, now))
            else:  # the next 10 s step
                dues.append(s.last_line_at_s + (quiet // QUIET_STEP_S + 1) * QUIET_STEP_S)
        server = self.server
        if server is not None and server.data is not None and server.ok_at_s is not None:
            fresh = freshness("server", server, now)
            limit = stale_after_s("server")
            if fresh.stale:
                dues.append(label_due_s(server.ok_at_s, now))
            elif limit is not None:
                dues.append(limit_due_s(server.ok_at_s, limit))
        self.age_due_s = min(dues) if dues else None

    # -- follow ------------------------------------------------------------------------------
    def watch_following(self, following: bool) -> None:
        if not self.is_mounted:
            return
        log = self.log_widget
        log.following = following
        if following:
            self.new_lines = 0
            log.scroll_to_end()
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
        log = self.log_widget
        log.set_wrap(not log.wrap, self._wrap_width())
        self._update_subtitle()

    def action_toggle_own(self) -> None:
        log = self.log_widget
        log.set_show_own(not log.show_own)
        self.app.notify("the console's own polls shown" if log.show_own else "the console's own polls hidden",
                        title="log", timeout=3)
        self._update_subtitle()

    def action_filter(self) -> None:
        self.add_class("-filtering")
        box = self.query_one("#log-filter", Input)
        box.value = self.filter_text
        box.focus()

    def _set_filter(self, text: str) -> None:
        self.log_widget.set_filter(text)
        self._update_subtitle()

    def action_clear_filter(self) -> None:
        """Escape: in the filter box, clear it, then (a second escape) leave it; outside it,
        clear the filter; with no filter, escape goes on to the screen (restore the grid)."""
        box = self.query_one("#log-filter", Input)
        if box.has_focus and box.value:
            box.value = ""
            self._set_filter("")
            return
        if box.has_focus or self.has_class("-filtering"):
            self.remove_class("-filtering")
            self.log_widget.focus()
            if self.filter_text:
                self._set_filter("")
            return
        if self.filter_text:
            self._set_filter("")
            return
        raise SkipAction()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._set_filter(event.value.strip())
        if not self.filter_text:
            self.remove_class("-filtering")
        self.log_widget.focus()  # n/N go to the log, not into the box

    def error_rows(self) -> list[int]:
        """Rows in the view where an error line starts: the `n`/`N` targets."""
        return self.log_widget.error_rows()

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
