"""The one host screen: one host's panes over its `HostState`, asked of the host only through a
`HostControl`. The single-host console, the fleet's Enter on a row, an attached client, the
browser (textual-serve runs the attach app) and replay all show this screen; the apps around it
are thin (toolong's App pushes its LogScreen; posting's MainScreen carries the bindings).

Bindings, help, the command palette's host commands, the swap plan screen, the fit view,
notices and the pairing commands live here, so every view has them.

One refresh mechanism: the screen subscribes to the state once; every event marks what it
changed ("gpu", "log_lines", "header", …) dirty, and one flush per frame hands each pane the
sources it declared in the registry (`pane.state_changed(state, source)`). A flood of events
costs one flush per frame, whatever their number.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

from textual import on
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Grid, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widget import Widget
from textual.widgets import Footer, Input, Label, Markdown
from textual.worker import Worker, WorkerState

from console.core.control import HostControl, NoControl
from console.core.derive.swap_view import STEP_TITLES
from console.core.events import EVERYTHING, HEADER, SWAP, TOAST, changes
from console.core.state import (
    Event,
    HostState,
    Notice,
    Presence,
    same_person,
)
from console.domain.analysis.fit import calibration, inputs_from_command, plan_fit
from console.domain.swap.controller import default_who
from console.domain.swap.report import ReportError, render, report_from_recording
from console.host.sources.base import describe_error
from console.locations import data_home
from console.ui.panes.base import PaneFrame, PlaceholderPane
from console.ui.panes.download import VerifyQuestion
from console.ui.panes.fit import FitScreen, format_fit
from console.ui.panes.header import HostHeader
from console.ui.panes.registry import PANES, PaneSpec, grid_shape
from console.ui.panes.swap import KEYS, SwapScreen
from console.ui.panes.unit_picker import UnitPicker

FRAME_S = 1 / 60  # one flush per frame at most: a flood of events costs one repaint per frame
# While the host's data keeps coming (the GPU each second, log batches, polls), the streaming
# panes are flushed once a second at most: a log line or a GPU sample is on screen within a second
# of its arrival, and a second's events cost one repaint of each pane they touch (the demo drew
# 78 frames in 30 s, the log pane 63 times, its scrollbar 90). The first change after a quiet
# second, and the swap, the header and presence news, still go out at the next frame.
BUSY_FLUSH_S = 1.0
# Once the news has kept coming for STEADY_AFTER_S (every flush within STEADY_GAP_S of the last: a
# serving host's GPU samples, log lines and metrics), they are flushed every STEADY_FLUSH_S: a
# frame is the console's largest cost on a steady host (issue 36: half of the demo's CPU, a frame
# a second). A pause in the news (more than STEADY_GAP_S) ends it: the next change goes out at once
# and the next ones a second apart again. The swap, header and presence news is never held.
STEADY_AFTER_S = 10.0
STEADY_FLUSH_S = 2.0
STEADY_GAP_S = STEADY_FLUSH_S + 1.0
# HEADER and SWAP (console/core/events.py): the dirty keys of the header and of the swap plan
AGES = "ages"  # every pane's ages again (the state replaced: its clock may have jumped)
URGENT = frozenset((HEADER, SWAP, AGES, "presence"))  # flushed at the next frame, never held for the busy second
_monotonic = time.monotonic  # the flush cadence's clock (a test holds it still)


class KeysFooter(Footer):
    """The footer with its keys also while the app has no focus: Textual skips filling it then, and
    a browser tab that never had focus showed a blank strip where the keys go (issue 35, item 4)."""

    def bindings_changed(self, screen: Screen) -> None:
        self._bindings_ready = True
        if self.is_attached and screen is self.screen:
            self.call_after_refresh(self.recompose)

class Wake(Message, bubble=False):
    """Something changed in the state: schedule the frame's flush (posted at most once a frame)."""


def event_source(event: Event) -> str:
    """What an event changed, as the panes' `sources` in the registry name it (declared with the
    event, in console/core/events.py)."""
    return changes(event)


PAIRING_SHARED = """**Pairing**: this session is shared: others attach with `gpuconsole attach` (a browser with
`serve --web`). Everyone sees the same state; one person drives. From the palette (`ctrl+p`):
set the shared note, ask to drive, accept a request, hand over, follow the driver's view. A
request to drive rings the driver's bell and is shown in the header until answered."""
PAIRING_ALONE = """**Pairing**: this session is not shared. `gpuconsole --share` or `gpuconsole serve` lets others
attach (`gpuconsole attach`; a browser with `serve --web`): everyone sees the same state and one
person drives; the palette then offers the shared note, asking to drive and following the driver."""


def help_text(shared: bool = False) -> str:
    """The help screen, from the pane registry. `shared`: this session is shared (the palette has
    the pairing commands); alone it says how to share, never commands its palette does not have."""
    numbers = f"{PANES[0].number}–{PANES[-1].number}" if PANES else ""
    rows = "\n".join(f"| {spec.number} {spec.title} | {spec.keys_help or '–'} |" for spec in PANES)
    return f"""\
# gpuconsole

One screen for an SGLang model swap on one GPU host, fed over one SSH connection.

| key | what it does |
|---|---|
| `{numbers}` | maximize a pane; the same key (or `escape`) restores the grid |
| `tab` / `shift+tab` | move focus between panes |
| `p` | the swap plan: its steps, gate, downtime clock and approvals (also in the palette) |
| `ctrl+p` | command palette: the swap plan and report, the fit planner, benchmarks{", pairing" if shared else ""} |
| `ctrl+s` | save an SVG screenshot (on every screen, the swap plan too) |
| `?` | this help |
| `q` | quit |

| pane | keys |
|---|---|
{rows}

**The swap plan** (`p`): the swap's steps in order, each one key, each showing its exact
commands and asking before it runs: `d` download, `v` verify, `i` install the unit, `g` the gate,
`s` stop the old server, `n` start the new one, `b` benchmark, `r` roll back, `p` run the rest.
`a` approves a request (two-person rule), `o` overrides a gate check, `A` shows every audited
script whole. The plan's first line says old → new; the downtime clock runs from the last request
the old server served.

**The swap report** (`ctrl+p`, "Swap report"): Markdown and HTML from this session's recording:
old → new, downtime, time to ready, before/after benchmarks, the audit with every script.

{PAIRING_SHARED if shared else PAIRING_ALONE}

`escape`, `q` or `?` closes this help; the keys panel (`ctrl+p`, "Keys") closes with `escape` too.

**Colours.** Green is healthy, yellow is a warning or stale data, red is an error (and only
that). A pane border turns yellow when its data is older than it should be and red when its
last poll failed; the subtitle says which. The header shows the connection (connected /
reconnecting for N s / failed: why) and how old the host summary is.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [("escape,q,question_mark", "app.pop_screen", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 80; max-width: 95%; height: auto; max-height: 90%;
        border: round $accent; background: $surface; padding: 0 1; }
    """

    def __init__(self, shared: bool = False) -> None:
        super().__init__()
        self.shared = shared

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown(help_text(self.shared))


class NoteScreen(ModalScreen[str | None]):
    """One line, shared with everyone attached."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    NoteScreen { align: center middle; }
    NoteScreen > Vertical { width: 80; max-width: 95%; height: auto; border: round $accent;
        background: $surface; padding: 0 1; }
    """

    def __init__(self, current: str) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Shared note (everyone attached sees it; empty clears it)")
            yield Input(self.current, id="note-input", max_length=200)

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


def screenshot_dir() -> Path:
    """Under the XDG data dir beside the recordings (never the working directory: a walk left
    SVGs in the repository's screenshots/); the notice says where."""

    shots = data_home() / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    return shots


def save_screenshot(app: Any, prefix: str = "gpuconsole") -> str:
    """Save the screen shown now (whatever it is: the grid, the swap plan, a modal) and say where."""
    path = app.save_screenshot(f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}.svg", str(screenshot_dir()))
    app.notify(f"saved {path}", title="screenshot", markup=False)
    return str(path)


def save_screenshot_to(app: Any, file: str) -> None:
    target = Path(file)
    target.parent.mkdir(parents=True, exist_ok=True)
    app.save_screenshot(target.name, str(target.parent.resolve()))


def worker_failed(node: Any, event: Worker.StateChanged) -> None:
    if event.state == WorkerState.ERROR and event.worker.error is not None:
        node.notify(describe_error(event.worker.error), title=f"{event.worker.group} failed",
                    severity="error", timeout=10, markup=False)


class HostScreen(Screen[None]):
    """One host's panes. `control`: what the view may ask of the host (`NoControl` in a replay);
    `mode`: "replay", "attach", … (said in the header); `back`: escape with nothing maximized
    returns to the screen below (the fleet); `note`: said once when the screen opens;
    `recorder`: this session's recording (the swap report is written from it)."""

    AUTO_FOCUS = None
    # Textual's own escape-minimizes runs before any binding: the log filter's escape (clear, then
    # leave) never ran while the pane was maximized. Our `escape` binding restores, after the pane's.
    ESCAPE_TO_MINIMIZE = False
    ALLOW_IN_MAXIMIZED_VIEW = "HostHeader, Footer"  # the connection state stays visible when a pane is maximized
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "app.quit", "Quit", id="quit", tooltip="Leave the console"),
        Binding("question_mark", "help", "Help", key_display="?", id="help", tooltip="Keys and colours"),
        Binding("escape", "restore", "Restore", show=False, id="restore"),
        Binding("p", "swap_plan", "Swap plan", id="swap-plan",
                tooltip="The swap's steps, gate, downtime clock and approvals"),
    ]

    def __init__(self, state: HostState, control: HostControl | None = None, *, mode: str | None = None,
                 back: bool = False, note: str | None = None, recorder: Any = None, follow: bool = False) -> None:
        super().__init__()
        self.state = state
        self._control: HostControl = control if control is not None else NoControl()
        self.mode = mode
        self.back = back
        self.note = note
        self.recorder = recorder
        self.follow = follow
        self.specs = list(PANES)
        self._dirty: set[str] = set()
        # The pending flush: a bare loop callback, not a Textual Timer (a Timer is a task of its
        # own, started and stopped for each held flush: once a second on a quiet host).
        self._flush_timer: asyncio.TimerHandle | None = None
        self._woken = False
        self._urgent_woken = False  # a wake-up posted for news never held, past a held flush (`_on_event`)
        self._flushed_at = -BUSY_FLUSH_S
        self._busy_since: float | None = None  # when the news began to come without a pause (`flush`)
        self._flush_at = 0.0  # when the pending flush (`_flush_timer`) runs, on `_monotonic`
        self._notices: list[Notice] = []
        self._unsubscribe: Callable[[], None] | None = None
        self._view_sent: str | None = None
        self._drive_asked: set[int] = set()  # peers asking to drive, already announced
        self._approvals_told: set[str] = set()  # approval requests already announced here
        self.flushes = 0  # how many flushes ran (tests and benchmarks read it)
        # What each flush was for: a count per source (or header, swap, ages, presence) that it
        # handed on, so a benchmark says why the screen was drawn, not only how often.
        self.flush_causes: Counter[str] = Counter()
        self._bench_seen = -1  # the bench view's version the bench pane was last told of
        self.age_updates = 0  # how many times the age timer asked a pane (tests read it)
        self._ages_at = 0.0  # the state's clock at the last age update
        self._frame_list: list[Any] | None = None
        self._hidden_dirty: set[str] = set()  # sources changed while their pane was hidden (maximized)
        # The age timer: armed for the first moment something on screen reads differently (a
        # bare loop callback, like the flush), not every second (issue 36).
        self._age_timer: asyncio.TimerHandle | None = None
        self._age_at = 0.0  # when it runs, on `_monotonic`
        self.age_ticks = 0  # how many times it ran (tests read it)
        self._ages_deferred = False  # it ran while a flush was held, which draws the ages due (`_tick`)
        for spec in self.specs:
            self._bindings.bind(spec.number, f"toggle_max('{spec.key}')", description=spec.title, show=False)

    # -- the control ---------------------------------------------------------------------
    @property
    def control(self) -> HostControl:
        return self._control

    @control.setter
    def control(self, control: HostControl | None) -> None:
        self._control = control if control is not None else NoControl()
        header = self._header()
        if header is not None:
            header.me = self._control.client_id
            header.refresh_state()

    @property
    def can_act(self) -> bool:
        """False in a replay: nothing is offered that would ask the host."""
        return not isinstance(self._control, NoControl)

    # -- layout --------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        header = HostHeader(self.state, self.mode, id="host-header")
        header.me = self._control.client_id
        yield header
        columns, rows, heights = grid_shape(self.specs)
        grid = Grid(id="panes")
        grid.set_styles(f"grid-size: {columns} {rows}; grid-rows: {' '.join(heights)};")
        with grid:
            for spec in self.specs:
                yield self.make_pane(spec)
        yield KeysFooter()

    def make_pane(self, spec: PaneSpec) -> Widget:
        missing = self.state.missing(spec.key)
        pane = (PlaceholderPane(spec.title, spec.number, missing) if missing is not None
                else spec.factory(self.state))
        pane.id = f"{spec.key}-pane"
        pane.add_class("pane")
        if spec.wide:
            pane.add_class("-wide")
        if isinstance(pane, PaneFrame):
            pane.set_title(spec.number, spec.title)
            pane.use_clock(self.state.now)  # every pane's ages on the state's clock (a replay's)
            pane.on_age_due = self._age_due_changed
        return pane

    def pane(self, key: str) -> Widget:
        return self.query_one(f"#{key}-pane")

    def _mounted_pane(self, key: str) -> Widget | None:
        try:
            return self.pane(key)
        except NoMatches:  # closing, or not mounted yet
            return None

    def _header(self) -> HostHeader | None:
        try:
            return self.query_one(HostHeader)
        except NoMatches:
            return None

    @property
    def header(self) -> HostHeader:
        return self.query_one(HostHeader)

    # -- lifecycle -----------------------------------------------------------------------
    def on_mount(self) -> None:
        self._unsubscribe = self.state.subscribe(self._on_event)
        # What the state already holds (a late view, an attach, a replay, the fleet's Enter).
        self._dirty.update(source for spec in self.specs for source in spec.sources)
        self._dirty.add(HEADER)
        self.flush()
        self._flushed_at = -BUSY_FLUSH_S  # what the state holds is no busy second: the first news goes out at once
        self._busy_since = None
        self._arm_ages()
        self.watch(self, "maximized", lambda _: self._maximized_changed(), init=False)
        if self.note:
            self.notify(self.note, title=self.state.host, severity="warning", timeout=10, markup=False)

    def on_unmount(self) -> None:
        if self._age_timer is not None:
            self._age_timer.cancel()
            self._age_timer = None
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        worker_failed(self, event)

    # -- the one refresh path ---------------------------------------------------------------
    def _on_event(self, event: Event) -> None:
        """Called inside `state.apply`, maybe from a context Textual does not run (a benchmark
        thread's callback): only mark what changed and post one wake-up; the screen's own task
        flushes once per frame."""
        what = changes(event)  # as the event's declaration says (console/core/events.py)
        urgent = True
        if what == TOAST:
            self._notices.append(event)  # type: ignore[arg-type]
        elif what == EVERYTHING:  # the whole state replaced (a replay's seek): every view
            self._dirty.update(source for spec in self.specs for source in spec.sources)
            self._dirty.update((HEADER, SWAP, AGES, "presence"))
        else:
            # The host summary (a reading every few seconds) is streaming news like the GPUs': the
            # header draws it from "host" with the held flush (`flush`), not at the next frame.
            self._dirty.add(what)
            if isinstance(event, Presence):
                self._dirty.add("presence")
            urgent = what in URGENT
        if not self._woken:
            self._woken = True
            self.post_message(Wake())
        elif urgent and not self._urgent_woken:
            # A wake-up is out already, maybe one that held its flush for the busy second: news that
            # is never held (the swap, the connection, a notice) gets its own, so it does not wait.
            self._urgent_woken = True
            self.post_message(Wake())

    @on(Wake)
    def _woke(self, _: Wake) -> None:
        notices, self._notices = self._notices, []
        for event in notices:  # said at once: a notice is rare and is the news itself
            title = f"{self.state.host}: {event.title}" if self.back else event.title
            self.notify(event.message, title=title, severity=event.severity,  # type: ignore[arg-type]
                        timeout=10 if event.severity == "error" else 4, markup=False)
        if not self._dirty:  # a notice alone, or a second wake-up (`_on_event`) whose news a flush took
            if self._flush_timer is None:
                self._woken = self._urgent_woken = False
            return
        urgent = bool(self._dirty & URGENT)
        if self._flush_timer is not None:
            if not urgent or self._flush_at - _monotonic() <= FRAME_S:
                return  # a flush is due soon enough: it takes this change too
            self._flush_timer.cancel()  # held for the busy second, but the swap's news goes out now
            self._flush_timer = None
        now = _monotonic()
        wait = self._flushed_at + (FRAME_S if urgent else self.hold_s(now)) - now
        if wait <= 0:
            self.flush()  # everything posted before this wake-up is in: one flush for all of it
        else:  # the last flush was less than a frame (or, busy, a second) ago: the next one waits
            self._flush_at = now + wait
            self._flush_timer = asyncio.get_running_loop().call_later(wait, self._flush_due)

    def hold_s(self, now: float | None = None) -> float:
        """How long streaming news is held after a flush: a second, two once it has kept coming
        for STEADY_AFTER_S."""
        now = _monotonic() if now is None else now
        busy = self._busy_since
        return STEADY_FLUSH_S if busy is not None and now - busy >= STEADY_AFTER_S else BUSY_FLUSH_S

    def _flush_due(self) -> None:
        self._flush_timer = None
        if self.is_attached:  # not after the screen was taken down (its next mount flushes all)
            self.flush()
        else:
            self._woken = False

    def flush(self) -> None:
        """Hand each pane the sources that changed since the last flush (one call per source)."""
        if self._flush_timer is not None:  # called directly (a test, the mount) with one pending
            self._flush_timer.cancel()
        self._flush_timer = None
        self._woken = self._urgent_woken = False
        now = _monotonic()
        if self._busy_since is None or now - self._flushed_at > STEADY_GAP_S:
            self._busy_since = now  # news after a pause: a second's hold again, until it has kept coming
        self._flushed_at = now
        dirty, self._dirty = self._dirty, set()
        bench = self.state.bench.version  # a derived view: the log's and the server's events move it too
        if bench != self._bench_seen:
            self._bench_seen = bench
            dirty.add("bench")
        if not dirty:
            if self._ages_deferred:  # nothing to flush after all: the ages the timer left to it now
                self._ages_deferred = False
                self._tick()
            return
        self.flushes += 1
        self.flush_causes.update(dirty)
        deferred, self._ages_deferred = self._ages_deferred, False
        header = self._header()
        if header is not None and (HEADER in dirty or "host" in dirty):
            header.refresh_state()
        elif header is not None and deferred:
            header.tick()  # the age timer came while this flush was held (`_tick`): drawn with it
        maximized = self.maximized
        for spec in self.specs:
            wanted = [source for source in spec.sources if source in dirty]
            if not wanted:
                continue
            pane = self._mounted_pane(spec.key)
            if isinstance(pane, PaneFrame) and (maximized is not None and pane is not maximized or not pane.display):
                # Hidden behind the maximized pane, or left out beside the swap plan on a narrow
                # screen: nothing it draws is seen. Its news waits for the restore (then one call
                # per source, with the state as it is by then: `_relayout`).
                self._hidden_dirty.update(wanted)
                continue
            if isinstance(pane, PaneFrame):
                for source in wanted:
                    pane.state_changed(self.state, source)
        if AGES in dirty:  # the clock may have jumped (a seek back): every pane's ages now, due or not
            self._update_ages(force=True)
        elif deferred:  # the ages that came due while this flush was held (`_tick`), in its repaint
            self._update_ages()
        if dirty & {SWAP, HEADER, "presence"}:  # the plan beside the panes, if open (no timer of its own)
            plan = self._plan_beside()
            if plan is not None:
                plan.refresh_plan()
        if "presence" in dirty:
            self._drive_requests()
        if SWAP in dirty:
            self._approval_requests()
        if "presence" in dirty and self.follow:
            self._follow_driver()
        self._arm_ages()

    def _drive_requests(self) -> None:
        """A peer asking to drive is news to the driver: a bell and a toast, once per request (the
        header shows it until answered). Issue 22 item 8."""
        presence = self.state.presence
        asking = set(presence.asking)
        new, self._drive_asked = asking - self._drive_asked, asking  # answered, it may come again
        if not new or not self.shared or not self.driving:
            return
        names = ", ".join(c.name for c in presence.clients if c.id in new) or "someone"
        self.app.bell()
        self.notify(f"{names} asks to drive: ctrl+p, then \"Accept: … drives\" (or hand over)",
                    title="pairing: asks to drive", severity="warning", timeout=15, markup=False)

    def _approval_requests(self) -> None:
        """A request this person can approve is news on the main screen too (the plan, once open,
        offers the dialog): a bell and a notice, once per request; never to the requester, on any
        of their connections (issue 35 item 2)."""
        me = self._control.client_id
        if me is None or not self.can_act or isinstance(self.app.screen, SwapScreen):
            return
        presence = self.state.presence
        for req in self.state.swap.pending_approvals:
            if req.request_id in self._approvals_told:
                continue
            self._approvals_told.add(req.request_id)
            if req.requested_by == self._control.who or (
                    presence is not None and same_person(presence, req.requested_by, me)):
                continue
            what = STEP_TITLES.get(req.action, req.action.replace("_", " "))
            self.app.bell()
            self.notify(f"{req.requested_by} asks for your approval: {what[:1].lower()}{what[1:]} (request "
                        f"{req.request_id}); p opens the swap plan, where enter approves",
                        title="two-person rule", severity="warning", timeout=30, markup=False)

    def _tick(self) -> None:
        """The one age timer of every pane and the header: a pane is asked only once what it
        draws could read differently (its `age_due_s`: "12s" the next second, "live" at the
        moment it goes stale), and not while another pane is maximized over it (it is asked at
        the restore). It runs at the first such moment (`_arm_ages`): a quiet screen, where
        nothing reads differently until the next sample, is not woken every second for nothing."""
        self._age_timer = None
        self.age_ticks += 1
        if self._flush_timer is not None and self._flush_at - _monotonic() <= self.AGES_AT_MOST_S \
                and self._plan_beside() is None:
            # A flush is held and comes within the finest step an age is drawn in: the ages due now
            # are drawn with it (`flush`), one repaint, not one now and one with the news.
            self._ages_deferred = True
            return
        header = self._header()
        if header is not None:
            header.tick()
        self._update_ages()
        plan = self._plan_beside()
        if plan is not None:  # its clocks ("downtime 12s", a running step's seconds) move each second
            plan.refresh_plan()
        self._arm_ages()

    AGES_AT_MOST_S = 1.0  # a second: the finest step an age is drawn in

    def _ages_wait_s(self) -> float:
        """Seconds until something on screen next reads differently: the earliest `age_due_s` of
        the panes seen, the header's, a second while the plan is docked (its clocks) or while the
        state's clock is not this machine's (a replay's, a test's: its due times are not ours to
        wait for); at least a second's step, the finest an age is drawn in."""
        now = self.state.now()
        if abs(now - time.time()) > 1.0 or self._plan_beside() is not None:
            return self.AGES_AT_MOST_S
        dues = []
        header = self._header()
        if header is not None:
            dues.append(header.age_due_s())
        maximized = self.maximized
        for pane in self._frames():
            if maximized is not None and pane is not maximized or not pane.display:
                continue  # not seen: its ages are drawn at the restore
            dues.append(pane.age_due_s)
        due = min((d for d in dues if d is not None), default=None)
        if due is None:
            return 3600.0  # nothing on screen moves with the clock: the next event re-arms it
        if due <= now:  # due already (0.0: a pane that does not say): every second, as before
            return self.AGES_AT_MOST_S
        return min(3600.0, due - now)

    def _arm_ages(self) -> None:
        if not self.is_attached:
            return
        wait = self._ages_wait_s()
        at = _monotonic() + wait
        if self._age_timer is not None:
            if abs(self._age_at - at) < 0.05:
                return  # armed for then already
            self._age_timer.cancel()
        self._age_at = at
        self._age_timer = asyncio.get_running_loop().call_later(wait, self._tick)

    def _age_due_changed(self, due: float | None) -> None:
        """A pane's next age moved (its data, a throttled redraw, a key): sooner than the timer is
        armed for, the timer is armed again."""
        if due is not None and self._age_timer is not None \
                and _monotonic() + max(0.0, due - self.state.now()) < self._age_at - 0.05:
            self._arm_ages()

    def _plan_beside(self) -> Any:
        """The swap plan docked beside these panes, when it is open."""
        for screen in self.app.screen_stack:
            if isinstance(screen, SwapScreen) and screen._host_below() is self:
                return screen
        return None

    def _frames(self) -> list[Any]:
        """The panes with a frame, found once (a CSS query every second cost more than the ages)."""
        frames = self._frame_list
        if not frames or any(not pane.is_attached for pane in frames):
            frames = self._frame_list = [pane for pane in self.query(".pane") if isinstance(pane, PaneFrame)]
        return frames

    def _update_ages(self, force: bool = False) -> None:
        now = self.state.now()
        # A clock that went back (a replay seeked to an earlier time) makes every due time wrong.
        force = force or now < self._ages_at
        self._ages_at = now
        maximized = self.maximized
        for pane in self._frames():
            if maximized is not None and pane is not maximized or not pane.display:
                continue  # not seen: its ages are drawn at the restore (`_relayout`)
            due = pane.age_due_s
            if force or (due is not None and due <= now):
                self.age_updates += 1
                pane.update_age(now)

    # -- panes ---------------------------------------------------------------------------
    def action_toggle_max(self, key: str) -> None:
        pane = self._mounted_pane(key)
        if pane is None:
            return
        if self.maximized is pane:
            self.minimize()
        else:
            self.maximize(pane, container=False)
            pane.focus()

    def _maximized_changed(self) -> None:
        # A pane maximized or restored lays its text out again for its new size at once (the
        # size is known after the next layout), not at its next data.
        self.call_after_refresh(self._relayout)
        self._send_view()

    def _relayout(self) -> None:
        if self._hidden_dirty:  # restored, or another pane maximized: what it missed (still hidden: kept)
            self._dirty.update(self._hidden_dirty)
            self._hidden_dirty.clear()
            self.flush()
        now = self.state.now()
        maximized = self.maximized
        for pane in self._frames():
            if maximized is not None and pane is not maximized or not pane.display:
                continue  # not seen: laid out when it is shown again (this again, then)
            pane.relayout()
            pane.update_age(now)  # not asked while hidden behind a maximized pane
        self._arm_ages()

    def action_restore(self) -> None:
        if self.query("HelpPanel"):  # escape closes the keys panel first
            self.app.action_hide_help_panel()
        elif self.maximized is not None:
            self.minimize()
        elif self.back:
            self.dismiss()

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(shared=self.shared))

    # -- asking the host -------------------------------------------------------------------
    def _said(self, title: str, why: str | None) -> None:
        if why:
            self.notify(why, title=title, severity="warning", markup=False)

    def on_download_pane_verify_requested(self, _: Any) -> None:
        """Asked first: hashing reads every byte of the model on the host (hundreds of GB)."""
        if isinstance(self.control, NoControl):  # nothing can be asked of this host: said at once
            self._said("verify", self.control.verify())
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._said("verify", self.control.verify())

        self.app.push_screen(VerifyQuestion(self.state.data("download")), answered)

    def on_bench_pane_run_requested(self, message: Any) -> None:
        self.start_bench(message.kind)

    def on_bench_pane_stop_requested(self, _: Any) -> None:
        said = self.control.stop_bench()
        if said:
            self.notify(said, title="benchmark", markup=False)

    def start_bench(self, kind: str, plan: list[tuple[int, int, int, int]] | None = None) -> None:
        self._said("benchmark", self.control.start_bench(kind, plan))

    def on_service_pane_pick_requested(self, _: Any) -> None:
        report = self.state.data("service")
        units = report.units_on_host if report is not None else ()
        if not units:
            self.notify("No sglang*.service units found on the host yet", severity="warning")
            return
        control = self.control

        def picked(choice: tuple[str, str | None] | None) -> None:
            if choice:
                control.pick_units(*choice)

        self.app.push_screen(UnitPicker(units), picked)

    def on_service_pane_fit_requested(self, _: Any) -> None:
        self.action_fit()

    def action_fit(self) -> None:
        """The fit planner for the new unit, from the host's state."""
        state = self.state
        report, gpus, download = state.data("service"), state.data("gpu"), state.data("download")
        if report is None or report.new.command is None:
            self.notify("The fit needs the new unit: pass --unit (and wait for the diff pane)", severity="warning")
            return
        if report.model_config is None:
            self.notify("No config.json in the new unit's model directory yet", severity="warning")
            return
        healthy = [g for g in (gpus.gpus if gpus else ()) if g.memory_total_mib and g.lost_at_s is None]
        if not healthy:
            self.notify("No GPU data yet: the fit needs their count and memory", severity="warning")
            return
        weights = download.bytes_total if download is not None else None
        cmd = report.new.command
        model = str(cmd.value("--model-path") or "model").rstrip("/").rsplit("/", 1)[-1]
        inputs = inputs_from_command(cmd, report.model_config, weights, len(healthy),
                                     min(g.memory_total_mib for g in healthy) / 1024, model)
        result = plan_fit(inputs)
        self.app.push_screen(FitScreen(format_fit(result, calibration(result, state.data("log")))))

    # -- the swap: the plan screen, its actions, the report ----------------------------------
    def swap_screen(self) -> Any:
        if isinstance(self.app.screen, SwapScreen):
            return self.app.screen
        screen = SwapScreen(self.state, self.control if self.can_act else None, self.control.who or default_who())
        self.app.push_screen(screen)
        return screen

    def action_swap_plan(self) -> None:
        self.swap_screen()

    # Panes kept beside a docked swap plan when the screen is too narrow for all of them.
    PLAN_KEEPS = ("gpu", "log")

    def dock_plan(self, width: int) -> int:
        """Make room for the swap plan docked `width` columns on the right (issue 35 item 1): the
        grid ends where the plan begins; where fewer than 120 columns are left, only the GPUs and
        the log stay, one above the other. Returns the header's height (the plan starts below it)."""
        grid = self.query_one("#panes")
        grid.styles.margin = (0, width, 0, 0)
        narrow = self.size.width - width < 120
        if narrow:
            kept = [spec for spec in self.specs if spec.key in self.PLAN_KEEPS]
            grid.set_styles(f"grid-size: 1 {max(1, len(kept))}; grid-rows: {' '.join(['1fr'] * len(kept))};")
        else:
            columns, rows, heights = grid_shape(self.specs)
            grid.set_styles(f"grid-size: {columns} {rows}; grid-rows: {' '.join(heights)};")
        for spec in self.specs:
            pane = self._mounted_pane(spec.key)
            if pane is not None:
                pane.display = not narrow or spec.key in self.PLAN_KEEPS
                pane.set_class(narrow, "-beside-plan")
        self.call_after_refresh(self._relayout)
        header = self._header()
        return header.outer_size.height if header is not None else 0

    def undock_plan(self) -> None:
        """The plan closed: the grid as it was."""
        try:
            grid = self.query_one("#panes")
        except NoMatches:
            return
        grid.styles.margin = (0, 0, 0, 0)
        columns, rows, heights = grid_shape(self.specs)
        grid.set_styles(f"grid-size: {columns} {rows}; grid-rows: {' '.join(heights)};")
        for spec in self.specs:
            pane = self._mounted_pane(spec.key)
            if pane is not None:
                pane.display = True
                pane.set_class(False, "-beside-plan")
        self.call_after_refresh(self._relayout)

    def action_swap_report(self) -> None:
        recorder = self.recorder
        if recorder is None or recorder.path is None:
            self.notify("This session is not recorded here (--no-record, attached, or a replay): no report",
                        severity="warning")
            return
        self.run_worker(self._write_swap_report(recorder), group="report", exclusive=True, exit_on_error=False)

    async def _write_swap_report(self, recorder: Any) -> None:
        recorder.flush()
        try:
            report = await asyncio.to_thread(report_from_recording, recorder.path, in_progress=True)
        except ReportError as exc:
            self.notify(str(exc), title="swap report", severity="warning", markup=False)
            return
        out = recorder.path.parent / recorder.path.name.replace(".jsonl.gz", "")

        def write() -> None:
            for fmt, ext in (("md", "md"), ("html", "html")):
                Path(f"{out}.report.{ext}").write_text(render(report, fmt), encoding="utf-8")

        await asyncio.to_thread(write)
        self.notify(f"{out}.report.md and .html", title="swap report", markup=False)

    # -- pairing (a shared session: the control has a participant id) -----------------------
    @property
    def shared(self) -> bool:
        return self.control.client_id is not None

    @property
    def driving(self) -> bool:
        me = self.control.client_id
        return any(c.id == me and c.role == "driver" for c in self.state.presence.clients)

    def maximized_key(self) -> str | None:
        widget = self.maximized
        wid = widget.id if widget is not None else None
        return wid[:-5] if wid and wid.endswith("-pane") else None

    def _send_view(self) -> None:
        key = self.maximized_key()
        if key != self._view_sent:
            self._view_sent = key
            self.control.set_view(key)

    def _follow_driver(self) -> None:
        driver = self.state.driver
        if driver is None or driver.id == self.control.client_id or driver.view == self.maximized_key():
            return
        if driver.view is None:
            self.minimize()
        else:
            pane = self._mounted_pane(driver.view)
            if pane is not None:
                self.maximize(pane, container=False)

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        self.notify("following the driver's view" if self.follow else "your own view again", title="follow")
        if self.follow:
            self._follow_driver()

    def action_set_note(self) -> None:
        current = self.state.note.text if self.state.note is not None else ""

        def done(text: str | None) -> None:
            if text is not None:
                self._said("note", self.control.set_note(text))

        self.app.push_screen(NoteScreen(current), done)

    def action_ask_drive(self) -> None:
        self._said("driver", self.control.ask_drive())

    def hand_over(self, to: int) -> None:
        self._said("driver", self.control.hand_over(to))

    def accept(self, client: int) -> None:
        self._said("driver", self.control.accept(client))

    # -- the palette -------------------------------------------------------------------------
    def system_commands(self) -> Iterable[SystemCommand]:
        for spec in self.specs:
            yield SystemCommand(f"Maximize {spec.title}", f"Show the {spec.title} pane alone (key {spec.number})",
                                lambda key=spec.key: self.action_toggle_max(key))
        yield SystemCommand("Fit planner for the new unit", "Will it fit, and how much KV cache is left (f)",
                            self.action_fit)
        yield SystemCommand("Run benchmark: quick", "16 prompts at concurrency 4, 256/256 tokens (b)",
                            lambda: self.start_bench("quick"))
        yield SystemCommand("Run benchmark: concurrency sweep 1, 4, 16, 64 (1k/1k)", "The story's sweep (B)",
                            lambda: self.start_bench("sweep"))
        yield SystemCommand("Swap plan", "The swap's steps, gate, downtime clock and approvals (p)",
                            self.action_swap_plan)
        yield SystemCommand("Swap report", "Write the swap report (Markdown and HTML) from this session's recording",
                            self.action_swap_report)
        if self.can_act and not self.state.info.read_only:  # read-only or a replay: no action offered
            for _key, action, label in KEYS:
                yield SystemCommand(f"Swap: {label}", "Shows the exact commands first",
                                    lambda a=action: self.swap_screen().action_act(a))
        yield SystemCommand("Help", "Keys and colours (?)", self.action_help)
        if not self.shared:
            return
        yield SystemCommand("Set the shared note", "One line everyone attached sees", self.action_set_note)
        yield SystemCommand("Follow the driver's view" if not self.follow else "Stop following the driver",
                            "Mirror the pane the driver has maximized", self.action_toggle_follow)
        presence = self.state.presence
        me = self.control.client_id
        if not self.driving:
            yield SystemCommand("Ask to drive", "The driver accepts from the palette", self.action_ask_drive)
            return
        for client in presence.clients:
            if client.id == me:
                continue
            if client.id in presence.asking:
                yield SystemCommand(f"Accept: {client.name} drives", f"{client.name} asked to drive",
                                    lambda c=client.id: self.accept(c))
            yield SystemCommand(f"Hand over driving to {client.name}", "You observe afterwards",
                                lambda c=client.id: self.hand_over(c))


def host_commands(app: Any, screen: Screen[Any], base: Iterable[SystemCommand]) -> Iterable[SystemCommand]:
    """An app's palette: Textual's own (one "Screenshot": ours, which says where it saved) and the
    host screen's commands when the palette opens over one (also over a modal above it)."""
    yield from (c for c in base if c.title != "Screenshot")
    host = screen if isinstance(screen, HostScreen) else next(
        (s for s in reversed(app.screen_stack) if isinstance(s, HostScreen)), None)
    if host is not None:
        yield from host.system_commands()
    yield SystemCommand("Screenshot", "Save an SVG screenshot and say where (ctrl+s)", lambda: save_screenshot(app))
