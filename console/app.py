"""The Textual app: a view over one host's `HostState`. Layout, bindings, help and the command
palette come from the pane registry; the app holds no data of its own (the state does) and asks
the host for things only through a `HostControl`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar, Protocol

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Grid, VerticalScroll
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widget import Widget
from textual.widgets import Footer, Markdown
from textual.worker import Worker, WorkerState

from console.core.state import (
    BenchChanged,
    ConnectionChanged,
    Event,
    HostInfo,
    HostState,
    LogAppended,
    Notice,
    ReadingChanged,
    StateSnapshot,
    VerifyChanged,
)
from console.panes.base import PaneFrame, PlaceholderPane
from console.panes.bench import BenchPane
from console.panes.download import DownloadPane
from console.panes.header import HostHeader
from console.panes.log import LogPane, display_text, event_style
from console.panes.registry import PANES, PaneSpec, grid_shape
from console.panes.service import ServicePane
from console.panes.unit_picker import UnitPicker
from console.sources.base import describe_error


def stylesheet_path() -> Path:
    """The stylesheet ships inside the package (wheel) or sits at the repo root (checkout)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "styles" / "console.tcss", here.parent / "styles" / "console.tcss"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError("console.tcss not found next to the package or at the repository root")


def help_text() -> str:
    """The help screen, from the pane registry."""
    from console.panes.registry import PANES

    numbers = f"{PANES[0].number}–{PANES[-1].number}" if PANES else ""
    rows = "\n".join(f"| {spec.number} {spec.title} | {spec.keys_help or '–'} |" for spec in PANES)
    return f"""\
# gpuconsole

One screen for an SGLang model swap on one GPU host, fed over one SSH connection.

| key | what it does |
|---|---|
| `{numbers}` | maximize a pane; the same key (or `escape`) restores the grid |
| `tab` / `shift+tab` | move focus between panes |
| `ctrl+p` | command palette |
| `ctrl+s` | save an SVG screenshot |
| `?` | this help |
| `q` | quit |

| pane | keys |
|---|---|
{rows}

`escape`, `q` or `?` closes this help; the keys panel (`ctrl+p`, "Keys") closes with `escape` too.

**Colours.** Green is healthy, yellow is a warning or stale data, red is an error. A pane
border turns yellow when its data is older than it should be and red when its last poll
failed; the subtitle says which. The header shows the connection (connected / reconnecting
for N s / failed: why) and how old the host summary is.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [("escape,q,question_mark", "app.pop_screen", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 80; max-width: 95%; height: auto; max-height: 90%;
        border: round $accent; background: $surface; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown(help_text())


class StateChanged(Message, bubble=False):
    """An event applied to a host's state; the view reads the state, so a backlog of readings of
    one source collapses to the newest (log lines never do)."""

    def __init__(self, host: str, event: Event) -> None:
        super().__init__()
        self.host = host
        self.event = event

    def can_replace(self, message: Message) -> bool:
        if not isinstance(message, StateChanged) or message.host != self.host:
            return False
        mine, theirs = self.event, message.event
        if isinstance(mine, ReadingChanged) and isinstance(theirs, ReadingChanged):
            return mine.source == theirs.source
        if isinstance(mine, ConnectionChanged) and isinstance(theirs, ConnectionChanged):
            return True
        return (isinstance(mine, BenchChanged) and isinstance(theirs, BenchChanged)
                and mine.kind == theirs.kind == "progress")


class HostControl(Protocol):
    """What a view may ask of a host (the runner in this process; a remote core for `attach`).
    Each returns why not, or None when it was done or started."""

    def verify(self) -> str | None: ...
    def swap_units(self) -> str | None: ...
    def pick_units(self, new: str, old: str | None) -> None: ...
    def start_bench(self, kind: str, plan: list[tuple[int, int, int, int]] | None = None) -> str | None: ...
    def stop_bench(self) -> str | None: ...


class ConsoleApp(App[int]):
    """A view over one host's `HostState`. `control` is what actions go through (None: a
    replay, nothing can be asked of the host); `start` runs once the app is mounted (the runner
    connecting, or a replay playing)."""

    TITLE = "gpuconsole"
    ALLOW_IN_MAXIMIZED_VIEW = "HostHeader, Footer"  # the connection state stays visible when a pane is maximized
    CSS_PATH = str(stylesheet_path())
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("escape", "restore", "Restore", show=False),
        Binding("ctrl+s", "screenshot", "Screenshot"),
    ]

    def __init__(self, state: HostState, control: HostControl | None = None, *,
                 start: Callable[[], Awaitable[Any]] | None = None, close: Callable[[], Awaitable[Any]] | None = None,
                 screenshot: str | None = None, screenshot_after_s: float | None = None,
                 mode: str | None = None) -> None:
        super().__init__()
        self.state = state
        self.control = control
        self._start = start
        self._close = close
        self.mode = mode  # "replay", "attach": said in the header
        self._screenshot = screenshot
        self._screenshot_after_s = screenshot_after_s
        self._unsubscribe: Callable[[], None] | None = None
        self.runner: Any = None
        self.recorder: Any = None
        self.specs = list(PANES)
        for spec in self.specs:
            self.bind(spec.number, f"toggle_max('{spec.key}')", description=spec.title, show=False)

    @classmethod
    def for_session(cls, session: Any, *, record: bool = False, record_dir: Path | None = None,
                    **kwargs: Any) -> ConsoleApp:
        """The usual console: a HostState for the session's host, its runner as the control,
        and (with `record`) the session recorded."""
        from console.core.recording import Recorder
        from console.core.runner import HostRunner

        state = HostState(session.profile.host or "local", label=session.transport.label, demo=session.demo)
        runner = HostRunner(session, state)
        # The recorder first: the session's first event (the host, which panes have no source,
        # read-only) is in the recording (issue 20).
        recorder = Recorder(state, record_dir).start() if record else None
        runner.announce()

        async def close() -> None:
            await runner.close()
            if recorder is not None:
                recorder.close()

        app = cls(state, runner, start=runner.start, close=close, **kwargs)
        app.runner, app.recorder = runner, recorder
        return app

    # -- layout --------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield HostHeader(self.state, self.mode, id="host-header")
        columns, rows, heights = grid_shape(self.specs)
        grid = Grid(id="panes")
        grid.set_styles(f"grid-size: {columns} {rows}; grid-rows: {' '.join(heights)};")
        with grid:
            for spec in self.specs:
                yield self.make_pane(spec)
        yield Footer()

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
        return pane

    def pane(self, key: str) -> Widget:
        return self.query_one(f"#{key}-pane")

    # -- lifecycle -----------------------------------------------------------------------
    def on_mount(self) -> None:
        host = self.state.host
        self._unsubscribe = self.state.subscribe(lambda event: self.post_message(StateChanged(host, event)))
        for spec in self.specs:  # what the state already holds (a late view, an attach, a replay)
            for source in spec.sources:
                self._route(spec, source)
        if self._start is not None:
            self.run_worker(self._start(), group="host", exit_on_error=False)
        self.set_interval(1.0, self._tick)
        if self._screenshot and self._screenshot_after_s is not None:
            self.set_timer(self._screenshot_after_s, self._take_screenshot_and_exit)

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            self.notify(describe_error(event.worker.error), title=f"{event.worker.group} failed",
                        severity="error", timeout=10)

    def on_state_changed(self, message: StateChanged) -> None:
        event = message.event
        if isinstance(event, (ConnectionChanged, HostInfo)):
            self.header.refresh_state()
        elif isinstance(event, Notice):
            self.notify(event.message, title=event.title, severity=event.severity,  # type: ignore[arg-type]
                        timeout=10 if event.severity == "error" else 4)
        elif isinstance(event, ReadingChanged):
            if event.source == "host":
                self.header.refresh_state()
            for spec in self.specs:
                if event.source in spec.sources:
                    self._route(spec, event.source)
        elif isinstance(event, LogAppended):
            for spec in self.specs:
                if "log" in spec.sources:
                    pane = self._mounted_pane(spec.key)
                    if isinstance(pane, LogPane):
                        pane.add_events(event.events)
        elif isinstance(event, VerifyChanged):
            self._route_key("download", "verify")
        elif isinstance(event, BenchChanged):
            self._route_key("bench", "bench")
        elif isinstance(event, StateSnapshot):  # the whole state replaced (a replay's seek): every view
            self._state_replaced()

    def _state_replaced(self) -> None:
        self.header.refresh_state()
        for spec in self.specs:
            for source in spec.sources:
                self._route(spec, source)
            pane = self._mounted_pane(spec.key)
            if isinstance(pane, LogPane):
                lines = self.state.log_lines
                shown = pane.lines[-1][0] if pane.lines else None
                if not lines or shown != display_text(lines[-1].text) or len(pane.lines) > len(lines):
                    pane.lines.clear()
                    pane.lines.extend((display_text(e.text), e.severity, event_style(e)) for e in lines)
                    pane._rebuild()

    @property
    def header(self) -> HostHeader:
        return self.query_one(HostHeader)

    def _mounted_pane(self, key: str) -> Widget | None:
        try:
            return self.pane(key)
        except NoMatches:  # closing, or not mounted yet
            return None

    def _route_key(self, key: str, source: str) -> None:
        pane = self._mounted_pane(key)
        if pane is not None and hasattr(pane, "state_changed"):
            pane.state_changed(self.state, source)

    def _route(self, spec: PaneSpec, source: str) -> None:
        self._route_key(spec.key, source)

    def _tick(self) -> None:
        now = self.state.now()
        try:
            self.header.tick()
        except NoMatches:
            return
        for pane in self.query(".pane"):
            if hasattr(pane, "update_age"):
                pane.update_age(now)

    async def on_unmount(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        self.workers.cancel_all()
        if self._close is not None:
            try:
                await asyncio.wait_for(self._close(), 4)
            except asyncio.TimeoutError:
                pass

    # -- asking the host -------------------------------------------------------------------
    def _ask(self, what: str, request: Callable[[HostControl], str | None], title: str) -> None:
        if self.control is None:
            self.notify(f"{what}: nothing can be asked of the host in a {self.mode or 'view'} ", title=title,
                        severity="warning")
            return
        why = request(self.control)
        if why:
            self.notify(why, title=title, severity="warning")

    # -- actions -------------------------------------------------------------------------
    def action_toggle_max(self, key: str) -> None:
        pane = self.pane(key)
        if self.screen.maximized is pane:
            self.screen.minimize()
        else:
            self.screen.maximize(pane, container=False)
            pane.focus()

    def action_restore(self) -> None:
        if self.screen.query("HelpPanel"):  # escape closes the keys panel first
            self.action_hide_help_panel()
        elif self.screen.maximized is not None:
            self.screen.minimize()

    def action_show_help_panel(self) -> None:
        from textual.widgets import HelpPanel, Static

        super().action_show_help_panel()
        for panel in self.screen.query(HelpPanel):
            if not panel.query(".close-hint"):
                panel.mount(Static("[b]escape[/b] closes this panel", classes="close-hint"), before=0)

    def on_service_pane_swap_requested(self, _: ServicePane.SwapRequested) -> None:
        self._ask("swap", lambda c: c.swap_units(), "service")

    def on_service_pane_pick_requested(self, _: ServicePane.PickRequested) -> None:
        report = self.state.data("service")
        units = report.units_on_host if report is not None else ()
        if not units:
            self.notify("No sglang*.service units found on the host yet", severity="warning")
            return
        control = self.control

        def picked(choice: tuple[str, str | None] | None) -> None:
            if choice and control is not None:
                control.pick_units(*choice)

        self.push_screen(UnitPicker(units), picked)

    def on_download_pane_verify_requested(self, _: DownloadPane.VerifyRequested) -> None:
        self._ask("verify", lambda c: c.verify(), "verify")

    # -- fit -----------------------------------------------------------------------------
    def on_service_pane_fit_requested(self, _: ServicePane.FitRequested) -> None:
        self.action_fit()

    def action_fit(self) -> None:
        """The fit planner for the new unit, from the host's state."""
        from console.analysis.fit import calibration, inputs_from_command, plan_fit
        from console.panes.fit import FitScreen, format_fit

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
        self.push_screen(FitScreen(format_fit(result, calibration(result, state.data("log")))))

    # -- benchmark -----------------------------------------------------------------------
    def on_bench_pane_run_requested(self, message: BenchPane.RunRequested) -> None:
        self.start_bench(message.kind)

    def on_bench_pane_stop_requested(self, _: BenchPane.StopRequested) -> None:
        if self.control is not None:
            said = self.control.stop_bench()
            if said:
                self.notify(said, title="benchmark")

    def start_bench(self, kind: str, plan: list[tuple[int, int, int, int]] | None = None) -> None:
        self._ask("benchmark", lambda c: c.start_bench(kind, plan), "benchmark")

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def screenshot_dir(self) -> Path:
        shots = Path.cwd() / "screenshots"
        return shots if shots.is_dir() else Path.cwd()

    def action_screenshot(self) -> None:
        name = f"gpuconsole-{time.strftime('%Y%m%d-%H%M%S')}.svg"
        path = self.save_screenshot(name, str(self.screenshot_dir()))
        self.notify(f"saved {path}", title="screenshot")

    def _take_screenshot_and_exit(self) -> None:
        assert self._screenshot
        target = Path(self._screenshot)
        target.parent.mkdir(parents=True, exist_ok=True)
        self.save_screenshot(target.name, str(target.parent.resolve()))
        self.exit(0)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        # One "Screenshot": the app's own (it says where it saved), not Textual's as well.
        yield from (c for c in super().get_system_commands(screen) if c.title != "Screenshot")
        for spec in self.specs:
            yield SystemCommand(f"Maximize {spec.title}", f"Show the {spec.title} pane alone (key {spec.number})",
                                lambda key=spec.key: self.action_toggle_max(key))
        yield SystemCommand("Fit planner for the new unit", "Will it fit, and how much KV cache is left (f)",
                            self.action_fit)
        yield SystemCommand("Run benchmark: quick", "16 prompts at concurrency 4, 256/256 tokens (b)",
                            lambda: self.start_bench("quick"))
        yield SystemCommand("Run benchmark: concurrency sweep 1, 4, 16, 64 (1k/1k)", "The story's sweep (B)",
                            lambda: self.start_bench("sweep"))
        yield from self._swap_commands()  # issue 13
        yield SystemCommand("Screenshot", "Save an SVG screenshot and say where (ctrl+s)", self.action_screenshot)
        yield SystemCommand("Help", "Keys and colours (?)", self.action_help)

    # -- the swap (issue 13): the plan screen, its actions, the report ----------------------
    def _swap_commands(self) -> Iterable[SystemCommand]:
        from console.panes.swap import KEYS

        yield SystemCommand("Swap plan", "The swap's steps, gate, downtime clock and approvals", self.action_swap_plan)
        yield SystemCommand("Swap report", "Write the swap report (Markdown and HTML) from this session's recording",
                            self.action_swap_report)
        if self.control is None or not hasattr(self.control, "swap_preview") or self.state.info.read_only:
            return  # read-only (or a replay): no action is offered at all
        for _key, action, label in KEYS:
            yield SystemCommand(f"Swap: {label}", "Shows the exact commands first",
                                lambda a=action: self._swap_screen().action_act(a))

    def _swap_screen(self) -> Any:
        from console.panes.swap import SwapScreen
        from console.swap.controller import default_who

        if isinstance(self.screen, SwapScreen):
            return self.screen
        who = (getattr(self.control, "who", None) or getattr(getattr(self.control, "swap", None), "who", None)
               or default_who())
        screen = SwapScreen(self.state, self.control, who)
        self.push_screen(screen)
        return screen

    def action_swap_plan(self) -> None:
        self._swap_screen()

    def action_swap_report(self) -> None:
        recorder = self.recorder
        if recorder is None or recorder.path is None:
            self.notify("This session is not recorded (--no-record): no report", severity="warning")
            return
        self.run_worker(self._write_swap_report(recorder), group="report", exit_on_error=False)

    async def _write_swap_report(self, recorder: Any) -> None:
        from console.swap.report import ReportError, render, report_from_recording

        recorder.flush()
        try:
            report = await asyncio.to_thread(report_from_recording, recorder.path)
        except ReportError as exc:
            self.notify(str(exc), title="swap report", severity="warning")
            return
        out = recorder.path.parent / recorder.path.name.replace(".jsonl.gz", "")

        def write() -> None:
            for fmt, ext in (("md", "md"), ("html", "html")):
                Path(f"{out}.report.{ext}").write_text(render(report, fmt), encoding="utf-8")

        await asyncio.to_thread(write)
        self.notify(f"{out}.report.md and .html", title="swap report")
