"""The panes, declared once. Bindings, help, the command palette, the grid and the routing of
state changes all come from this list: adding a pane is one module and one entry here.

A factory builds the pane *with* the host's state; the pane renders from the state and never
reads data out of another widget. `sources` names what of the state the pane shows; the host
screen calls `pane.state_changed(state, source)` when one of them changed (at most once a frame).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from textual.widget import Widget

from console.core.state import HostState
from console.ui.panes.bench import BenchPane
from console.ui.panes.download import DownloadPane
from console.ui.panes.gpu import GpuPane
from console.ui.panes.log import LogPane
from console.ui.panes.service import ServicePane


@dataclass(frozen=True, slots=True)
class PaneSpec:
    key: str  # "gpu": ids (#gpu-pane), routing, actions
    number: str  # the key that maximizes it
    title: str
    sources: tuple[str, ...]  # what it shows: readings, and "verify", "bench", "log_lines" (the line store)
    factory: Callable[[HostState], Widget]
    keys_help: str = ""  # its own keys, for the help screen
    wide: bool = False  # spans the whole grid row


def _gpu(state: HostState) -> Widget:
    return GpuPane()


def _download(state: HostState) -> Widget:
    return DownloadPane()


def _service(state: HostState) -> Widget:
    return ServicePane()


def _log(state: HostState) -> Widget:
    return LogPane(state.info.log_label or "log", state)


def _bench(state: HostState) -> Widget:
    return BenchPane(state.bench)


PANES: list[PaneSpec] = [
    PaneSpec("gpu", "1", "GPUs", ("gpu",), _gpu),
    PaneSpec("download", "2", "Download", ("download", "verify"), _download,
             "`v` verify the sha256 of finished files against the Hub, on the host"),
    PaneSpec("service", "3", "Service diff", ("service",), _service,
             "`d` raw unified diff · `s` the diff the other way (this view) · `u` pick units found on the host · "
             "`f` fit view"),
    PaneSpec("log", "4", "SGLang log", ("log", "server", "log_lines"), _log,
             "`/` filter (smart case; `escape` clears, then leaves) · `n` / `N` next / previous error · "
             "`space` pause · `End` (or `G`) follow · `w` wrap · `a` show the console's own polls"),
    PaneSpec("bench", "5", "Benchmark", ("bench",), _bench,
             "`b` quick run · `B` the sweep 1, 4, 16, 64 at 1k/1k · `x` stop · `c` time or sweep chart",
             wide=True),
]


def register(spec: PaneSpec) -> None:
    """Add a pane (a plugin, a test's toy pane): it gets a number key, help, palette and a cell."""
    if any(p.key == spec.key or p.number == spec.number for p in PANES):
        raise ValueError(f"a pane with key {spec.key!r} or number {spec.number!r} exists")
    PANES.append(spec)


def unregister(key: str) -> None:
    PANES[:] = [p for p in PANES if p.key != key]


def grid_shape(specs: list[PaneSpec]) -> tuple[int, int, list[str]]:
    """(columns, rows, the rows' heights): two columns; a wide pane takes a row of its own; the
    first row (GPUs, download) a little taller."""
    rows = 0
    col = 0
    for spec in specs:
        if spec.wide:
            rows += 1
            col = 0
            continue
        if col == 0:
            rows += 1
        col = (col + 1) % 2
    rows = max(rows, 1)
    return 2, rows, ["3fr"] + ["2.5fr"] * (rows - 1)
