"""The Textual app: layout, bindings, command palette and the host session's lifecycle.

This is the only module that knows both the sources and the panes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Grid, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Markdown
from textual.worker import Worker, WorkerState

from console.analysis.bench_view import BenchView
from console.bench.runner import BenchThread
from console.bench.store import default_path, load_runs, save_run
from console.messages import BenchEvent, ConnectionChanged, LogLinesReady, ReadingReady
from console.model import Reading
from console.panes.base import PlaceholderPane, ReadingPane
from console.panes.bench import BenchPane
from console.panes.download import DownloadPane
from console.panes.gpu import GpuPane
from console.panes.header import HostHeader
from console.panes.log import LogPane
from console.panes.service import ServicePane
from console.panes.unit_picker import UnitPicker
from console.session import HostSession
from console.sources.base import PolledSource, describe_error
from console.sources.log import LogFollower
from console.transport.errors import HostKeyError, TransportError


def stylesheet_path() -> Path:
    """The stylesheet ships inside the package (wheel) or sits at the repo root (checkout)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "styles" / "console.tcss", here.parent / "styles" / "console.tcss"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError("console.tcss not found next to the package or at the repository root")


HELP = """\
# gpuconsole

One screen for an SGLang model swap on one GPU host, fed over one SSH connection.

| key | what it does |
|---|---|
| `1`–`5` | maximize a pane; the same key (or `escape`) restores the grid |
| `tab` / `shift+tab` | move focus between panes |
| `ctrl+p` | command palette |
| `ctrl+s` | save an SVG screenshot |
| `?` | this help |
| `q` | quit |

| pane | keys |
|---|---|
| 2 Download | `v` verify the sha256 of finished files against the Hub, on the host |
| 3 Service diff | `d` raw unified diff · `s` swap old and new · `u` pick units found on the host · `f` fit view |
| 4 SGLang log | `/` filter · `n` / `N` next / previous error · `space` pause · `End` (or `G`) follow · `w` wrap |
| 5 Benchmark | `b` quick run · `B` the sweep 1, 4, 16, 64 at 1k/1k · `x` stop · `c` time or sweep chart |

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
            yield Markdown(HELP)


class ConsoleApp(App[int]):
    """`ConsoleApp(session)`; `session` may be None while the host session is still being opened."""

    TITLE = "gpuconsole"
    ALLOW_IN_MAXIMIZED_VIEW = "HostHeader, Footer"  # the connection state stays visible when a pane is maximized
    CSS_PATH = str(stylesheet_path())
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("1", "toggle_max('gpu')", "GPUs", show=False),
        Binding("2", "toggle_max('download')", "Download", show=False),
        Binding("3", "toggle_max('service')", "Service", show=False),
        Binding("4", "toggle_max('log')", "Log", show=False),
        Binding("5", "toggle_max('bench')", "Bench", show=False),
        Binding("escape", "restore", "Restore", show=False),
        Binding("ctrl+s", "screenshot", "Screenshot"),
    ]

    PANES: ClassVar[tuple[tuple[str, str, str], ...]] = (
        ("gpu", "1", "GPUs"),
        ("download", "2", "Download"),
        ("service", "3", "Service diff"),
        ("log", "4", "SGLang log"),
        ("bench", "5", "Benchmark"),
    )

    def __init__(self, session: HostSession, *, screenshot: str | None = None,
                 screenshot_after_s: float | None = None) -> None:
        super().__init__()
        self.session = session
        self._screenshot = screenshot
        self._screenshot_after_s = screenshot_after_s
        self.sources: dict[str, PolledSource[Any]] = {}
        self.bench_view = BenchView()
        self.bench: BenchThread | None = None
        self._bench_labels: list[str] = []

    # -- layout --------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield HostHeader(self.session.transport.label if self.session.profile.host else
                         f"local: {self.session.transport.label}", self.session.demo, id="host-header")
        with Grid(id="panes"):
            for key, number, title in self.PANES:
                yield self.make_pane(key, number, title)
        yield Footer()

    def make_pane(self, key: str, number: str, title: str) -> Any:
        if key == "gpu":
            return GpuPane(id="gpu-pane")
        if key == "bench":
            self.bench_view.history = load_runs(default_path())
            return BenchPane(self.bench_view, id="bench-pane")
        if key == "log":
            follower = self.session.log_follower()
            if follower is None:
                return PlaceholderPane(title, number, "No log: pass --unit NAME (its journal) or --log-file PATH.",
                                       id="log-pane")
            return LogPane(follower.label, id="log-pane")
        if key == "service":
            if not self.session.profile.unit:
                return PlaceholderPane(title, number, "No unit: pass --unit NEW.service (and --compare-unit "
                                       "OLD.service), or set unit/compare_unit in the profile.", id="service-pane")
            return ServicePane(id="service-pane")
        if key == "download":
            if not self.session.profile.model_dir:
                return PlaceholderPane(title, number, "No model directory: pass --model-dir DIR "
                                       "(and --repo ID) or set model_dir in the profile.", id="download-pane")
            return DownloadPane(id="download-pane")
        raise ValueError(f"unknown pane {key!r}")

    def pane(self, key: str) -> Any:
        return self.query_one(f"#{key}-pane")

    # -- lifecycle -----------------------------------------------------------------------
    def on_mount(self) -> None:
        self.session.transport.on_state(lambda state: self.post_message(ConnectionChanged(state)))
        self.open_session()
        self.set_interval(1.0, self._tick)
        if self._screenshot and self._screenshot_after_s is not None:
            self.set_timer(self._screenshot_after_s, self._take_screenshot_and_exit)

    @work(group="session", exit_on_error=False)
    async def open_session(self) -> None:
        transport = self.session.transport
        delay = 1.0
        while transport.state.status != "connected":
            try:
                await transport.connect()
                break
            except HostKeyError as exc:
                self.notify(str(exc), title="host key refused", severity="error", timeout=30)
                return
            except TransportError as exc:
                self.notify(str(exc), title="cannot connect", severity="error", timeout=8)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30)
        for source in self.session.polled_sources():
            self.sources[source.name] = source
            self.run_readings(source.name, source.readings())
        self.start_streams()

    def start_streams(self) -> None:
        """Sources that are streams rather than polls; the polled ones start in `open_session`."""
        self.run_readings("gpu", self.session.gpu_source().readings())
        follower = self.session.log_follower()
        if follower is not None:
            self.run_log(follower)

    @work(group="sources", exit_on_error=False)
    async def run_log(self, follower: LogFollower) -> None:
        last_ok: float | None = None
        async for batch in follower.batches():
            if batch.events:
                self.post_message(LogLinesReady(batch.events))
                last_ok = time.time()
            if batch.note:
                self.notify(batch.note, title="log", timeout=4)
            reading = Reading("log", batch.summary, last_ok or time.time(), batch.error,
                              time.time() if batch.error else None)
            self.post_message(ReadingReady("log", reading))

    @work(group="sources", exit_on_error=False)
    async def run_readings(self, name: str, readings: Any) -> None:
        """A source's Readings, polled or streamed, as messages to the app."""
        async for reading in readings:
            self.post_message(ReadingReady(name, reading))

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            self.notify(describe_error(event.worker.error), title=f"{event.worker.group} failed",
                        severity="error", timeout=10)

    def on_connection_changed(self, message: ConnectionChanged) -> None:
        with contextlib.suppress(NoMatches):  # it may arrive while the app is closing
            self.query_one(HostHeader).state = message.state

    def on_reading_ready(self, message: ReadingReady) -> None:
        self.route_reading(message.source, message.reading)

    def on_log_lines_ready(self, message: LogLinesReady) -> None:
        with contextlib.suppress(Exception):
            self.query_one(LogPane).add_events(message.events)

    def route_reading(self, source: str, reading: Any) -> None:
        data = getattr(reading, "data", None)
        if source == "gpu" and data is not None and data.gpus:
            utils = [g.utilization_pct for g in data.gpus if g.utilization_pct is not None]
            if utils:
                self.bench_view.add_gpu(time.time(), sum(utils) / len(utils))
        elif source == "log" and data is not None and data.series:
            self.bench_view.add_server_points([(p.t_s, p.gen_tokens_per_s, p.accept_len) for p in data.series[-20:]])
        if source == "host":
            with contextlib.suppress(NoMatches):
                self.query_one(HostHeader).summary = reading
            return
        if source in ("log", "server"):
            with contextlib.suppress(Exception):
                pane = self.query_one(LogPane)
                if source == "log":
                    pane.summary = reading
                else:
                    pane.server = reading
            return
        with contextlib.suppress(Exception):
            self.pane(source).reading = reading

    def _tick(self) -> None:
        now = time.time()
        with contextlib.suppress(NoMatches):
            self.query_one(HostHeader).tick()
        for pane in self.query(ReadingPane):
            pane.update_age(now)
        for log_pane in self.query(LogPane):
            log_pane.update_age(now)

    async def on_unmount(self) -> None:
        if self.bench is not None:
            self.bench.stop.set()
        self.workers.cancel_all()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.session.close(), 3)

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
        watcher = self.session.service_watcher()
        if watcher is not None and watcher.old_unit:
            watcher.swap()
            self._repoll("service")
        else:
            self.notify("No unit to swap with: pick one with u", severity="warning")

    def on_service_pane_pick_requested(self, _: ServicePane.PickRequested) -> None:
        pane = self.pane("service")
        report = pane.reading.data if pane.reading is not None else None
        units = report.units_on_host if report is not None else ()
        if not units:
            self.notify("No sglang*.service units found on the host yet", severity="warning")
            return

        def picked(choice: tuple[str, str | None] | None) -> None:
            watcher = self.session.service_watcher()
            if choice and watcher is not None:
                watcher.pick(*choice)
                self._repoll("service")

        self.push_screen(UnitPicker(units), picked)

    # -- download verification -------------------------------------------------------------
    def on_download_pane_verify_requested(self, _: DownloadPane.VerifyRequested) -> None:
        from console.sources.download import verifiable_files

        watcher = self.session._download
        if watcher is None:
            return
        files = verifiable_files(watcher)
        if not files:
            known = watcher.state.tree_expected or watcher.state.hub_expected
            why = ("no finished file has a known sha256 yet" if known is not None
                   else "sha256 values come from the listing hf download keeps, or the Hub's file list (--repo)")
            self.notify(why, title="verify", severity="warning")
            return
        self.run_verify(watcher.model_dir, files)

    @work(group="verify", exclusive=True, exit_on_error=False)
    async def run_verify(self, model_dir: str, files: list[tuple[str, int, str]]) -> None:
        from console.sources.download import verify_sha256

        pane = self.pane("download")
        async for progress in verify_sha256(self.session.transport, model_dir, files):
            pane.verify = progress

    # -- fit -----------------------------------------------------------------------------
    def on_service_pane_fit_requested(self, _: ServicePane.FitRequested) -> None:
        self.action_fit()

    def action_fit(self) -> None:
        """The fit planner for the new unit, from what the panes already know."""
        from console.analysis.fit import calibration, inputs_from_command, plan_fit
        from console.panes.fit import FitScreen, format_fit

        def data(key: str) -> Any:
            with contextlib.suppress(Exception):
                reading = self.pane(key).reading
                return reading.data if reading is not None else None
            return None

        report, gpus, download = data("service"), data("gpu"), data("download")
        if report is None or report.new.command is None:
            self.notify("The fit needs the new unit: pass --unit (and wait for the diff pane)", severity="warning")
            return
        if report.model_config is None:
            self.notify("No config.json in the new unit's model directory yet", severity="warning")
            return
        healthy = [g for g in (gpus.gpus if gpus else ()) if g.memory_total_mib]
        if not healthy:
            self.notify("No GPU data yet: the fit needs their count and memory", severity="warning")
            return
        weights = download.bytes_total if download is not None else None
        cmd = report.new.command
        model = str(cmd.value("--model-path") or "model").rstrip("/").rsplit("/", 1)[-1]
        inputs = inputs_from_command(cmd, report.model_config, weights, len(healthy),
                                     min(g.memory_total_mib for g in healthy) / 1024, model)
        result = plan_fit(inputs)
        log = None
        with contextlib.suppress(Exception):
            summary = self.query_one(LogPane).summary
            log = summary.data if summary is not None else None
        self.push_screen(FitScreen(format_fit(result, calibration(result, log))))

    # -- benchmark -----------------------------------------------------------------------
    def on_bench_pane_run_requested(self, message: BenchPane.RunRequested) -> None:
        self.start_bench(message.kind)

    def on_bench_pane_stop_requested(self, _: BenchPane.StopRequested) -> None:
        if self.bench is not None and self.bench.running:
            self.bench.stop.set()
            self.notify("stopping after the requests in flight", title="benchmark")

    def start_bench(self, kind: str, plan: list[tuple[int, int, int, int]] | None = None) -> None:
        """`plan`: (concurrency, prompts, input tokens, output tokens) per run; by default the
        quick run or the story's sweep."""
        if self.bench is not None and self.bench.running:
            self.notify("a benchmark is already running (x stops it)", severity="warning")
            return
        from console.bench.runner import BenchConfig
        from console.bench.workload import random_prompts

        sweep = [(c, max(8, 2 * c), 1024, 1024) for c in (1, 4, 16, 64)]
        plan = plan or (sweep if kind == "sweep" else [(4, 16, 256, 256)])
        runs = [(BenchConfig("", concurrency=c, num_prompts=n, input_len=i, output_len=o),
                 random_prompts(n, i, o)) for c, n, i, o in plan]
        self._bench_labels = [f"c={c} · {n} × {i}/{o}" for c, n, i, o in plan]
        post = self.post_message
        self.bench = BenchThread(
            runs, self.session.bench_url,
            on_progress=lambda i, p: post(BenchEvent("progress", i, p)),
            on_result=lambda i, m: post(BenchEvent("result", i, m)),
            on_done=lambda err: post(BenchEvent("done", 0, err)),
        )
        self.bench_view.results = []
        self.bench_view.start(self._bench_labels[0], runs[0][0].num_prompts)
        self.bench.start()

    def on_bench_event(self, event: BenchEvent) -> None:
        view = self.bench_view
        if event.kind == "progress":
            view.progress(event.payload)
        elif event.kind == "result":
            flags = None
            with contextlib.suppress(Exception):
                report = self.pane("service").reading.data
                flags = list(report.new.command.argv) if report and report.new.command else None
            record = save_run(event.payload, default_path(), host=self.session.transport.label, flags=flags)
            view.history.append(record)
            view.finish(event.payload)
            nxt = event.index + 1
            if self.bench is not None and nxt < len(self.bench.runs):
                view.start(self._bench_labels[nxt], self.bench.runs[nxt][0].num_prompts)
        elif event.kind == "done":
            view.end(event.payload)
            if event.payload:
                self.notify(event.payload, title="benchmark failed", severity="error", timeout=10)

    def _repoll(self, name: str) -> None:
        source = self.sources.get(name)
        if source is not None:
            source.wake()

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
        for key, number, title in self.PANES:
            yield SystemCommand(f"Maximize {title}", f"Show the {title} pane alone (key {number})",
                                lambda key=key: self.action_toggle_max(key))
        yield SystemCommand("Fit planner for the new unit", "Will it fit, and how much KV cache is left (f)",
                            self.action_fit)
        yield SystemCommand("Run benchmark: quick", "16 prompts at concurrency 4, 256/256 tokens (b)",
                            lambda: self.start_bench("quick"))
        yield SystemCommand("Run benchmark: concurrency sweep 1, 4, 16, 64 (1k/1k)", "The story's sweep (B)",
                            lambda: self.start_bench("sweep"))
        yield SystemCommand("Screenshot", "Save an SVG screenshot and say where (ctrl+s)", self.action_screenshot)
        yield SystemCommand("Help", "Keys and colours (?)", self.action_help)
