"""The fleet screen: one row per host over many HostStates (it holds no data of its own), and the
host screen that Enter opens: the usual panes over that one host's state.

Rows are keyed by host (DataTable row keys), never by position. Views redraw at most once a
second: an event marks its host dirty; a timer recomputes the dirty rows and updates only the
cells whose text changed (an equal cell costs nothing).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.markup import escape
from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Input, Static
from textual.widgets.data_table import ColumnKey

from console.core.state import (
    BenchChanged,
    ConnectionChanged,
    HostInfo,
    HostState,
    LogAppended,
    Notice,
    ReadingChanged,
    VerifyChanged,
)
from console.fleet.rows import COLUMNS, SORT_KEYS, FleetRow, cell_text, fleet_row, format_cells, matches, sort_key

REFRESH_S = 2.0  # an overview: every other GPU sample is enough, and repaints are most of its cost
FULL_REFRESH_EVERY = 3  # ticks: ages and staleness move without events

SEVERITY_STYLE = {3: "bold red", 2: "yellow", 1: "cyan", 0: ""}


def fleet_summary(rows: Sequence[FleetRow], sort_by: str, filter_text: str) -> str:
    connected = sum(1 for r in rows if r.connection_ok)
    worst = {s: sum(1 for r in rows if r.severity == s) for s in (3, 2)}
    serving = sum(1 for r in rows if r.server_status == "ready")
    parts = [f"{len(rows)} hosts", f"{connected} connected", f"{serving} serving",
             f"{worst[3]} errors", f"{worst[2]} warnings", f"sort: {sort_by}"]
    if filter_text:
        parts.append(f"filter: {filter_text}")
    return " · ".join(parts)


class FleetScreen(Screen[None]):
    """Many hosts, one row each. `open_host(key)` is called on Enter."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "cycle_sort", "Sort"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]
    DEFAULT_CSS = """
    FleetScreen #fleet-summary { height: 1; padding: 0 1; background: $boost; }
    FleetScreen #fleet-filter { display: none; height: 3; }
    FleetScreen #fleet-filter.-shown { display: block; }
    FleetScreen #fleet-table { height: 1fr; }
    """

    def __init__(self, states: Sequence[HostState], open_host: Callable[[str], None] | None = None, *,
                 title: str = "fleet", refresh_s: float = REFRESH_S) -> None:
        super().__init__()
        self.states = {s.host: s for s in states}
        self.open_host = open_host
        self.fleet_title = title
        self.refresh_s = refresh_s
        self.sort_by = "problem"
        self.filter_text = ""
        self.rows: dict[str, FleetRow] = {}
        self._cells: dict[str, dict[str, str]] = {}
        self._shown: set[str] = set()
        self._dirty: set[str] = set(self.states)
        self._unsubscribe: list[Callable[[], None]] = []
        self._ticks = 0
        self.refresh_times_s: list[float] = []  # how long each refresh took (the benchmark reads it)

    def compose(self) -> ComposeResult:
        yield Static(self.fleet_title, id="fleet-summary")
        yield Input(placeholder="filter: words in host, status, model or problem (escape clears)", id="fleet-filter")
        table: DataTable[Any] = DataTable(id="fleet-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Footer()

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one("#fleet-table", DataTable)

    def on_mount(self) -> None:
        for key, title in COLUMNS:
            self.table.add_column(title, key=key)
        for state in self.states.values():
            host = state.host
            self._unsubscribe.append(state.subscribe(lambda _event, host=host: self._dirty.add(host)))
        self.refresh_rows(full=True)
        self.set_interval(self.refresh_s, self._tick)
        self.table.focus()

    def on_unmount(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()

    def add_states(self, states: Sequence[HostState]) -> None:
        """Hosts that appeared later (a Prometheus series for a new host)."""
        for state in states:
            if state.host in self.states:
                continue
            self.states[state.host] = state
            host = state.host
            self._unsubscribe.append(state.subscribe(lambda _event, host=host: self._dirty.add(host)))
            self._dirty.add(host)

    def _tick(self) -> None:
        self._ticks += 1
        self.refresh_rows(full=self._ticks % FULL_REFRESH_EVERY == 0)

    # -- drawing ---------------------------------------------------------------------------
    def refresh_rows(self, *, full: bool = False) -> None:
        started = time.perf_counter()
        hosts = list(self.states) if full else [h for h in self._dirty if h in self.states]
        self._dirty.clear()
        table = self.table
        changed_order = False
        for host in hosts:
            state = self.states[host]
            row = fleet_row(state)
            old = self.rows.get(host)
            self.rows[host] = row
            cells = format_cells(row)
            cells["host"] = host
            visible = matches(row, self.filter_text) if self.filter_text else True
            if not visible:
                if host in self._shown:
                    table.remove_row(host)
                    self._shown.discard(host)
                continue
            if host not in self._shown:
                table.add_row(*(self._cell(row, key, cells[key]) for key, _ in COLUMNS), key=host)
                self._shown.add(host)
                self._cells[host] = cells
                changed_order = True
                continue
            previous = self._cells.get(host, {})
            columns = table.columns
            for key, _ in COLUMNS:
                text = cells[key]
                if previous.get(key) != text:
                    # Widen a column for a longer cell, never narrow it: narrowing makes DataTable
                    # re-measure the whole column for each cell (500 rows: seconds of CPU).
                    grow = cell_len(text) > columns[ColumnKey(key)].content_width
                    table.update_cell(host, key, self._cell(row, key, text), update_width=grow)
            self._cells[host] = cells
            if old is None or sort_key(old, self.sort_by) != sort_key(row, self.sort_by):
                changed_order = True
        if changed_order:
            self._sort()
        self.query_one("#fleet-summary", Static).update(
            Text(f"{self.fleet_title}: " + fleet_summary(list(self.rows.values()), self.sort_by, self.filter_text)))
        self.refresh_times_s.append(time.perf_counter() - started)
        del self.refresh_times_s[:-200]

    @staticmethod
    def _cell(row: FleetRow, key: str, text: str) -> Text | str:
        return cell_text(row, key, text)  # never markup: host strings (issue 21, item 4)

    def _sort(self) -> None:
        rows = self.rows
        by = self.sort_by
        self.table.sort("host", key=lambda host: sort_key(rows[str(host)], by))

    def visible_hosts(self) -> list[str]:
        """Hosts in the order drawn (for tests and the benchmark)."""
        return [str(row.key.value) for row in self.table.ordered_rows]

    # -- actions ---------------------------------------------------------------------------
    def action_cycle_sort(self) -> None:
        self.sort_by = SORT_KEYS[(SORT_KEYS.index(self.sort_by) + 1) % len(SORT_KEYS)]
        self._sort()
        self.refresh_rows()

    def action_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.add_class("-shown")
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.value = ""
        box.remove_class("-shown")
        self.set_filter("")
        self.table.focus()

    @on(Input.Changed, "#fleet-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.set_filter(event.value)

    @on(Input.Submitted, "#fleet-filter")
    def _filter_submitted(self, _: Input.Submitted) -> None:
        self.table.focus()

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip()
        self.refresh_rows(full=True)

    def action_open(self) -> None:
        table = self.table
        if table.row_count == 0:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        if key.value is not None and self.open_host is not None:
            self.open_host(str(key.value))

    @on(DataTable.RowSelected, "#fleet-table")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None and self.open_host is not None:
            self.open_host(str(event.row_key.value))


class HostScreen(Screen[None]):
    """One host's usual panes over its state (the grid of ConsoleApp, as a screen); escape
    restores a maximized pane, or goes back to the fleet."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Fleet"),
    ]

    def __init__(self, state: HostState, control: Any = None, *, note: str | None = None) -> None:
        super().__init__()
        from console.panes.registry import PANES

        self.state = state
        self.control = control
        self.note = note
        self.specs = list(PANES)
        self._unsubscribe: Callable[[], None] | None = None
        for spec in self.specs:
            self._bindings.bind(spec.number, f"toggle_max('{spec.key}')", description=spec.title, show=False)

    def compose(self) -> ComposeResult:
        from console.panes.header import HostHeader
        from console.panes.registry import grid_shape

        yield HostHeader(self.state, id="host-header")
        columns, rows, heights = grid_shape(self.specs)
        grid = Grid(id="panes")
        grid.set_styles(f"grid-size: {columns} {rows}; grid-rows: {' '.join(heights)};")
        with grid:
            for spec in self.specs:
                yield self._make_pane(spec)
        yield Footer()

    def _make_pane(self, spec: Any) -> Widget:
        from console.panes.base import PaneFrame, PlaceholderPane

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

    def on_mount(self) -> None:
        from console.app import StateChanged

        host = self.state.host
        self._unsubscribe = self.state.subscribe(lambda event: self.post_message(StateChanged(host, event)))
        for spec in self.specs:
            for source in spec.sources:
                self._route_key(spec.key, source)
        self.set_interval(1.0, self._tick)
        if self.note:
            self.notify(self.note, title=escape(self.state.host), severity="warning", timeout=10, markup=False)

    def on_unmount(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def _pane(self, key: str) -> Widget | None:
        try:
            return self.query_one(f"#{key}-pane")
        except NoMatches:
            return None

    def _route_key(self, key: str, source: str) -> None:
        pane = self._pane(key)
        if pane is not None and hasattr(pane, "state_changed"):
            pane.state_changed(self.state, source)

    def _header(self) -> Any:
        from console.panes.header import HostHeader

        try:
            return self.query_one(HostHeader)
        except NoMatches:
            return None

    def on_state_changed(self, message: Any) -> None:
        from console.panes.log import LogPane

        event = message.event
        header = self._header()
        if (isinstance(event, (ConnectionChanged, HostInfo)) or (
                isinstance(event, ReadingChanged) and event.source == "host")) and header is not None:
            header.refresh_state()
        if isinstance(event, Notice):
            self.notify(event.message, title=escape(f"{self.state.host}: {event.title}"),
                        severity=event.severity,  # type: ignore[arg-type]
                        timeout=10 if event.severity == "error" else 4, markup=False)
        elif isinstance(event, ReadingChanged):
            for spec in self.specs:
                if event.source in spec.sources:
                    self._route_key(spec.key, event.source)
        elif isinstance(event, LogAppended):
            pane = self._pane("log")
            if isinstance(pane, LogPane):
                pane.add_events(event.events)
        elif isinstance(event, VerifyChanged):
            self._route_key("download", "verify")
        elif isinstance(event, BenchChanged):
            self._route_key("bench", "bench")

    def _tick(self) -> None:
        header = self._header()
        if header is not None:
            header.tick()
        now = self.state.now()
        for pane in self.query(".pane"):
            if hasattr(pane, "update_age"):
                pane.update_age(now)

    def action_toggle_max(self, key: str) -> None:
        pane = self._pane(key)
        if pane is None:
            return
        if self.maximized is pane:
            self.minimize()
        else:
            self.maximize(pane, container=False)
            pane.focus()

    def action_back(self) -> None:
        if self.maximized is not None:
            self.minimize()
        else:
            self.dismiss()

    # -- asking the host (the runner of this host; none for a Prometheus-only row) ----------
    def _ask(self, what: str, request: Callable[[Any], str | None]) -> None:
        if self.control is None:
            self.notify(f"{what}: no SSH session to this host", severity="warning")
            return
        why = request(self.control)
        if why:
            self.notify(why, title=what, severity="warning")

    def on_service_pane_swap_requested(self, _: Any) -> None:
        self._ask("swap", lambda c: c.swap_units())

    def on_download_pane_verify_requested(self, _: Any) -> None:
        self._ask("verify", lambda c: c.verify())

    def on_bench_pane_run_requested(self, message: Any) -> None:
        self._ask("benchmark", lambda c: c.start_bench(message.kind))

    def on_bench_pane_stop_requested(self, _: Any) -> None:
        self._ask("benchmark", lambda c: c.stop_bench())

    def on_service_pane_fit_requested(self, _: Any) -> None:
        """The fit planner for this host's new unit (as the one-host console's `f`)."""
        from console.analysis.fit import calibration, inputs_from_command, plan_fit
        from console.panes.fit import FitScreen, format_fit

        state = self.state
        report, gpus, download = state.data("service"), state.data("gpu"), state.data("download")
        if report is None or report.new.command is None or report.model_config is None:
            self.notify("The fit needs the new unit and its model's config.json (wait for the diff pane)",
                        severity="warning")
            return
        healthy = [g for g in (gpus.gpus if gpus else ()) if g.memory_total_mib and g.lost_at_s is None]
        if not healthy:
            self.notify("No GPU data yet: the fit needs their count and memory", severity="warning")
            return
        cmd = report.new.command
        model = str(cmd.value("--model-path") or "model").rstrip("/").rsplit("/", 1)[-1]
        inputs = inputs_from_command(cmd, report.model_config, download.bytes_total if download else None,
                                     len(healthy), min(g.memory_total_mib for g in healthy) / 1024, model)
        result = plan_fit(inputs)
        self.app.push_screen(FitScreen(format_fit(result, calibration(result, state.data("log")))))

    def on_service_pane_pick_requested(self, _: Any) -> None:
        from console.panes.unit_picker import UnitPicker

        report = self.state.data("service")
        units = report.units_on_host if report is not None else ()
        if not units or self.control is None:
            self.notify("No sglang*.service units found on the host yet", severity="warning")
            return
        control = self.control

        def picked(choice: tuple[str, str | None] | None) -> None:
            if choice:
                control.pick_units(*choice)

        self.app.push_screen(UnitPicker(units), picked)


class FleetApp(App[int]):
    """The fleet console: the fleet screen first; Enter opens a host. `host_for(key)` gives the
    (state, control, note) to open for a row; `start`/`close` run the fleet's workers."""

    TITLE = "gpuconsole fleet"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"), Binding("ctrl+s", "screenshot", "Screenshot")]

    def __init__(self, states: Sequence[HostState], *, host_for: Callable[[str], Any] | None = None,
                 start: Callable[[], Any] | None = None, close: Callable[[], Any] | None = None,
                 title: str = "fleet", screenshot: str | None = None,
                 screenshot_after_s: float | None = None) -> None:
        from console.app import stylesheet_path

        self.CSS_PATH = str(stylesheet_path())
        super().__init__()
        self.fleet_states = list(states)
        self.host_for = host_for
        self._start = start
        self._close = close
        self.fleet_title = title
        self._screenshot = screenshot
        self._screenshot_after_s = screenshot_after_s
        self.fleet_screen = FleetScreen(self.fleet_states, self.open_host, title=title)

    def on_mount(self) -> None:
        self.push_screen(self.fleet_screen)
        if self._start is not None:
            self.run_worker(self._start(), group="fleet", exit_on_error=False)
        if self._screenshot and self._screenshot_after_s is not None:
            self.set_timer(self._screenshot_after_s, self._take_screenshot_and_exit)

    def open_host(self, key: str) -> None:
        if self.host_for is None:
            return
        found = self.host_for(key)
        if found is None:
            self.notify(f"{key}: nothing to open", severity="warning", markup=False)
            return
        state, control, note = found
        self.push_screen(HostScreen(state, control, note=note))

    async def on_unmount(self) -> None:
        import asyncio

        self.workers.cancel_all()
        if self._close is not None:
            try:
                await asyncio.wait_for(self._close(), 8)
            except asyncio.TimeoutError:
                pass

    def action_screenshot(self) -> None:
        from pathlib import Path

        path = self.save_screenshot(f"gpuconsole-fleet-{time.strftime('%Y%m%d-%H%M%S')}.svg", str(Path.cwd()))
        self.notify(f"saved {path}", title="screenshot")

    def _take_screenshot_and_exit(self) -> None:
        from pathlib import Path

        assert self._screenshot
        target = Path(self._screenshot)
        target.parent.mkdir(parents=True, exist_ok=True)
        self.save_screenshot(target.name, str(target.parent.resolve()))
        self.exit(0)
