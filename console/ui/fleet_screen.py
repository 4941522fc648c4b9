"""The fleet screen: one row per host over many HostStates (it holds no data of its own). Enter
opens the one host screen (console/ui/host_screen.py) over that host's state, as the single-host
console shows it: a single host is a fleet of one.

Rows are keyed by host (DataTable row keys), never by position. Views redraw at most once a
second: an event marks its host dirty; a timer recomputes the dirty rows and updates only the
cells whose text changed (an equal cell costs nothing).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static
from textual.widgets.data_table import ColumnKey

from console.core.state import HostState
from console.domain.fleet.rows import (
    COLUMNS,
    MIN_WIDTH,
    SORT_KEYS,
    FleetRow,
    cell_text,
    clip_cell,
    column_caps,
    column_title,
    fleet_row,
    format_cells,
    matches,
    sort_key,
)
from console.ui.host_screen import HostScreen

__all__ = ["FleetScreen", "HostScreen", "fleet_summary"]

REFRESH_S = 2.0  # an overview: every other GPU sample is enough, and repaints are most of its cost
FULL_REFRESH_EVERY = 3  # ticks: ages and staleness move without events

SEVERITY_STYLE = {3: "bold red", 2: "yellow", 1: "cyan", 0: ""}
STATUS_STYLE = {"ready": "green", "starting": "cyan", "degraded": "yellow", "dead": "bold red", "unknown": "dim"}


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
    FleetScreen #fleet-deployments { height: auto; padding: 0 1; display: none; }
    FleetScreen #fleet-deployments.-shown { display: block; }
    """

    def __init__(self, states: Sequence[HostState], open_host: Callable[[str], None] | None = None, *,
                 title: str = "fleet", refresh_s: float = REFRESH_S,
                 deployment_lines: Callable[[], list[str]] | None = None) -> None:
        super().__init__()
        self.states = {s.host: s for s in states}
        self.deployment_lines = deployment_lines  # issue 37: each deployment as one row with its nodes
        self.open_host = open_host
        self.fleet_title = title
        self.refresh_s = refresh_s
        self.sort_by = "problem"
        self.filter_text = ""
        self.rows: dict[str, FleetRow] = {}
        self._cells: dict[str, dict[str, str]] = {}  # as drawn (clipped to the caps)
        self._full: dict[str, dict[str, str]] = {}  # whole, as the rows say them
        self._order: dict[str, tuple[Any, ...]] = {}  # each row's sort key when last sorted
        self._caps: dict[str, int] | None = None
        self._titles: dict[str, str] = {}
        self._cursor_host: str | None = None  # how wide each column may be at this width
        self._shown: set[str] = set()
        self._dirty: set[str] = set(self.states)
        self._unsubscribe: list[Callable[[], None]] = []
        self._ticks = 0
        self.refresh_times_s: list[float] = []  # how long each refresh took (the benchmark reads it)

    def compose(self) -> ComposeResult:
        yield Static(self.fleet_title, id="fleet-summary")
        yield Static(id="fleet-deployments")
        yield Input(placeholder="filter: words in host, status, model or problem (escape clears)", id="fleet-filter")
        table: DataTable[Any] = DataTable(id="fleet-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Footer()

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one("#fleet-table", DataTable)

    def on_mount(self) -> None:
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
        if self._covered():
            # A host's screen (Enter) covers the fleet: nothing drawn that nobody sees (issue 36).
            # The rows' news waits in `_dirty`; the return draws them all (`on_screen_resume`).
            return
        self.refresh_rows(full=self._ticks % FULL_REFRESH_EVERY == 0)

    def _covered(self) -> bool:
        """Whether an opaque screen is over this one. (Textual counts the screen just below the
        top as "current", seen through it, whatever the top's background: its repaints then
        repaint the top screen's regions too.)"""
        try:
            top = self.app.screen
        except Exception:  # noqa: BLE001 - no screen stack (closing): nothing is seen
            return True
        return top is not self and top.styles.background.a == 1

    def on_screen_resume(self) -> None:
        """Shown again (escape from a host): every row as it is now, at once."""
        if self._caps is not None:  # drawn before (not the first show: on_mount draws that)
            self.refresh_rows(full=True)

    # -- drawing ---------------------------------------------------------------------------
    def refresh_rows(self, *, full: bool = False) -> None:
        started = time.perf_counter()
        hosts = list(self.states) if full else [h for h in self._dirty if h in self.states]
        self._dirty.clear()
        for host in hosts:
            self.rows[host] = fleet_row(self.states[host])
            cells = format_cells(self.rows[host])
            cells["host"] = host
            self._full[host] = cells
        caps = self._fit()
        if caps != self._caps:
            # A column must narrow: the table is built again (DataTable never narrows a column); one
            # that may widen is widened by its cells. Either way every row is drawn again.
            before, self._caps = self._caps, caps
            titles = {key: column_title(key, title, caps[key]) for key, title in COLUMNS}
            if before is None or any(caps[k] < before[k] for k in caps) or titles != self._titles:
                self._rebuild()
            hosts = list(self.states)
        self._draw(hosts, caps)
        self.query_one("#fleet-summary", Static).update(
            Text(f"{self.fleet_title}: " + fleet_summary(list(self.rows.values()), self.sort_by, self.filter_text)))
        if self.deployment_lines is not None and (full or hosts):
            lines = self.deployment_lines()
            box = self.query_one("#fleet-deployments", Static)
            box.set_class(bool(lines), "-shown")
            box.update(Text("\n".join(lines)))
        self.refresh_times_s.append(time.perf_counter() - started)
        del self.refresh_times_s[:-200]

    def _fit(self) -> dict[str, int]:
        """Each column's cap at this width: the Problem column stays on screen, the others give way
        (issue 35 item 6: a model cell growing to "qwen3.5-122b :59569 (moved)" pushed it off)."""
        natural = {key: max(MIN_WIDTH[key], cell_len(title)) for key, title in COLUMNS}
        for host, cells in self._full.items():
            if self.filter_text and not matches(self.rows[host], self.filter_text):
                continue
            for key, text in cells.items():
                natural[key] = max(natural.get(key, 0), cell_len(text))
        width = self.size.width or self.app.size.width or 120
        return column_caps(natural, width)

    def _rebuild(self) -> None:
        table = self.table
        cursor = None
        if table.row_count:
            cursor = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        table.clear(columns=True)
        caps = self._caps or {}
        self._titles = {key: column_title(key, title, caps.get(key, len(title))) for key, title in COLUMNS}
        for key, _ in COLUMNS:
            table.add_column(self._titles[key], key=key)
        self._shown.clear()
        self._cells.clear()
        self._cursor_host = cursor  # put back on its row once the rows are there again

    def on_resize(self) -> None:
        if self._caps is not None:
            self.refresh_rows(full=True)

    def _draw(self, hosts: list[str], caps: dict[str, int]) -> None:
        table = self.table
        changed_order = False
        for host in hosts:
            row = self.rows[host]
            cells = {key: clip_cell(key, text, caps[key]) for key, text in self._full[host].items()}
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
            if self._order.get(host) != sort_key(row, self.sort_by):
                changed_order = True
        if changed_order:
            self._sort()
        if self._cursor_host is not None and self._cursor_host in self._shown:
            table.move_cursor(row=table.get_row_index(self._cursor_host), animate=False)
            self._cursor_host = None
        self._order = {host: sort_key(row, self.sort_by) for host, row in self.rows.items()}

    @staticmethod
    def _cell(row: FleetRow, key: str, text: str) -> Text | str:
        if key == "server" and not text.startswith("~"):  # every row's status by colour, as the log badge
            style = STATUS_STYLE.get(row.server_status or "")
            if style:
                return Text(text, style=style)
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
