"""One fleet row per host, read from its HostState: pure (no Textual), so the fleet screen, a
test and a benchmark compute the same row from the same state.

What a row says must be true: a value the host has not given yet is `None` (drawn as "?"), a
reading older than it should be is marked stale, and the worst problem is named, not hidden.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from rich.markup import escape
from rich.text import Text

from console.core.freshness import freshness
from console.core.state import HostState
from console.sanitize import clean_line
from console.core.derive.swap_observer import path_summary
from console.units import fit_name

# The sources a row checks for staleness; the limits are the one rule (console/core/freshness.py)
# the panes and the header read too (issue 20).
STALE_SOURCES = ("gpu", "server", "download")

# Severity: 0 none, 1 note, 2 warning, 3 error.
SEVERITY_WORDS = {0: "ok", 1: "note", 2: "warning", 3: "error"}


@dataclass(frozen=True, slots=True)
class FleetRow:
    """What the fleet screen shows for one host. Units in the names; None is unknown."""

    host: str
    label: str
    connection: str  # "connected", "reconnecting for 12s: …", "failed: host key changed …"
    connection_ok: bool
    via: str | None  # "via Prometheus" when the row is read from Prometheus, not SSH
    gpu_count: int | None
    gpus_lost: int
    memory_used_mib: int | None
    memory_total_mib: int | None
    util_mean_pct: float | None
    power_w: float | None
    server_status: str | None  # ready, starting, degraded, dead, unknown
    model: str | None
    gen_tokens_per_s: float | None
    running_reqs: float | None
    queued_reqs: float | None
    download_done_bytes: int | None
    download_total_bytes: int | None
    download_rate_bytes_per_s: float | None
    download_complete: bool | None
    stale: tuple[str, ...]  # the sources whose data is old or whose series stopped
    problem: str | None
    severity: int
    server_port: int | None = None  # issue 24: set when the beside path moved the server to this port
    # issue 24: the path of the host's swap (console-driven or observed: state.swap), its downtime
    # so far or in all (None: unknown), and whether it is over
    swap_path: str | None = None
    swap_downtime_s: float | None = None
    swap_done: bool = False

    @property
    def download_fraction(self) -> float | None:
        if self.download_done_bytes is None or not self.download_total_bytes:
            return None
        return min(1.0, self.download_done_bytes / self.download_total_bytes)


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _model_name(server: Any, service: Any) -> str | None:
    info = getattr(getattr(server, "http", None), "server_info", None) or {}
    name = info.get("served_model_name") or info.get("model_path")
    if not name and service is not None:
        command = getattr(getattr(service, "new", None), "command", None)
        if command is not None:
            name = command.value("--served-model-name") or command.value("--model-path")
    if isinstance(name, tuple):
        name = name[0] if name else None
    if not isinstance(name, str) or not name:
        return None
    return name.rstrip("/").rsplit("/", 1)[-1]


def _held_gpus(gpu_status: Any) -> str | None:
    """The GPUs still held by a server's processes, in words ("4 GPUs still held by
    sglang::scheduler_TP* (84 GiB each, 72–81 % util)"), or None when none is."""
    if gpu_status is None:
        return None
    def server_process(name: str) -> bool:
        return name.startswith("sglang") or "scheduler_TP" in name

    held = [g for g in gpu_status.gpus if g.lost_at_s is None and any(server_process(p.name) for p in g.processes)]
    # Busy, not draining: a stopped server's memory frees at 0 % util while its schedulers exit.
    if not held or not any((g.utilization_pct or 0) >= 10 for g in held):
        return None
    names = sorted({p.name for g in held for p in g.processes if server_process(p.name)})
    name = re.sub(r"\d+$", "*", names[0]) if names else "sglang"
    used = [g.memory_used_mib for g in held if g.memory_used_mib is not None]
    utils = [g.utilization_pct for g in held if g.utilization_pct is not None]
    parts = []
    if used:
        parts.append(f"{max(used) / 1024:.0f} GiB each" if len(held) > 1 else f"{max(used) / 1024:.0f} GiB")
    if utils:
        lo, hi = min(utils), max(utils)
        parts.append(f"{lo}% util" if lo == hi else f"{lo}–{hi}% util")
    what = f"{len(held)} GPU{'s' if len(held) > 1 else ''} still held by {clean_line(name)}"
    return what + (f" ({', '.join(parts)})" if parts else "")


def fleet_row(state: HostState, now_s: float | None = None) -> FleetRow:
    """The row for one host, from its state alone."""
    now = state.now() if now_s is None else now_s
    problems: list[tuple[int, str]] = []
    stale: list[str] = []

    conn = state.connection
    connection = conn.describe(now) if conn is not None else "not started"
    connection_ok = conn is not None and conn.status == "connected"
    via = conn.detail if connection_ok and conn is not None else None
    if conn is not None and conn.status == "failed":
        problems.append((3, f"connection {connection}"))
    elif conn is not None and conn.status == "reconnecting":
        problems.append((2, connection))

    for source in STALE_SOURCES:
        reading = state.reading(source)
        if reading is None or reading.data is None:
            continue
        fresh = freshness(source, reading, now)
        failing = fresh.state == "error"
        if fresh.stale:
            stale.append(source)
            age = f"{now - reading.ok_at_s:.0f}s old" if reading.ok_at_s is not None else "never read"
            problems.append((2, f"{source} stale ({age})" + (f": {reading.error}" if failing else "")))

    gpu_count: int | None = None
    gpus_lost = 0
    used = total = None
    util = power = None
    gpu_status = state.data("gpu")
    if gpu_status is not None:
        gpus = gpu_status.gpus
        present = [g for g in gpus if g.lost_at_s is None]
        gpu_count, gpus_lost = len(gpus), len(gpus) - len(present)
        used_values = [g.memory_used_mib for g in present if g.memory_used_mib is not None]
        total_values = [g.memory_total_mib for g in present if g.memory_total_mib is not None]
        used = sum(used_values) if used_values else None
        total = sum(total_values) if total_values else None
        utils = [g.utilization_pct for g in present if g.utilization_pct is not None]
        util = sum(utils) / len(utils) if utils else None
        powers = [g.power_w for g in present if g.power_w is not None]
        power = sum(powers) if powers else None
        if gpus_lost:
            problems.append((3, f"{gpus_lost} GPU{'s' if gpus_lost > 1 else ''} lost"))
        for gpu in present:
            if gpu.error:
                problems.append((3, f"GPU {gpu.index}: {gpu.error}"))
        for problem in gpu_status.problems:
            if "lost" not in problem:
                problems.append((2, problem))

    server = state.data("server")
    status = gen = running = queued = None
    if server is not None:
        status = server.status
        gen = _finite(server.gen_throughput)
        running = _finite(server.running_reqs)
        queued = _finite(server.queue_reqs)
        if queued is None and server.http:  # a status built without the figure (a Prometheus row)
            queued = _finite(server.http.metrics.get("sglang:num_queue_reqs"))
        if status == "dead":
            held = _held_gpus(gpu_status)
            # Dead by its log or unit, yet its GPUs still held and busy: a process outlived the server
            # (a scheduler left behind by an OOM); a restart will not find the memory (issue 35 item 6).
            problems.append((3, f"server dead ({server.reason.split(':')[0]}) but {held}: did a process outlive it?"
                             if held else f"server dead: {server.reason}"))
        elif status == "degraded":
            problems.append((2, f"server degraded: {server.reason}"))
        elif status == "starting":
            problems.append((1, f"server starting: {server.reason}"))
        elif status == "unknown":
            problems.append((1, f"server unknown: {server.reason}"))
    log = state.data("log")
    if status == "dead":
        # A dead server generates nothing: its last decode line's throughput is history, not now.
        # (A booting one's series is empty: the log's summary starts each boot afresh.)
        gen = running = queued = None
    elif server is None and log is not None and log.series:
        # No server source, only the log: its newest decode line. With one, the server status's
        # figures are the one derived truth the status line shows too (issue 20).
        point = log.series[-1]
        gen = gen if gen is not None else _finite(point.gen_tokens_per_s)
        running = running if running is not None else _finite(point.running)
        queued = queued if queued is not None else _finite(point.queue)

    download = state.data("download")
    done = dl_total = None
    rate = None
    complete = None
    if download is not None:
        done, dl_total = download.bytes_done, download.bytes_total
        rate, complete = download.rate_bytes_per_s, download.complete
        if download.stalled_since is not None:
            problems.append((2, "download stalled"))
        for problem in download.problems:
            problems.append((2, f"download: {problem}"))

    notes = state.data("prometheus")  # the Prometheus source's notes: NaN values, unlabelled series
    for problem in getattr(notes, "problems", ()):
        problems.append((2, problem))

    for source in ("host", "service"):
        reading = state.reading(source)
        if reading is not None and reading.error and (reading.ok_at_s is None
                                                      or (reading.error_at_s or 0) >= reading.ok_at_s):
            problems.append((2, f"{source}: {reading.error}"))

    swap = path_summary(state, now)
    worst = max(problems, key=lambda p: p[0]) if problems else (0, None)
    return FleetRow(
        host=state.host, label=state.label, connection=connection, connection_ok=connection_ok, via=via,
        gpu_count=gpu_count, gpus_lost=gpus_lost, memory_used_mib=used, memory_total_mib=total,
        util_mean_pct=util, power_w=power, server_status=status, model=_model_name(server, state.data("service")),
        gen_tokens_per_s=gen, running_reqs=running, queued_reqs=queued, download_done_bytes=done,
        download_total_bytes=dl_total, download_rate_bytes_per_s=rate, download_complete=complete,
        stale=tuple(stale), problem=worst[1], severity=worst[0],
        server_port=getattr(server, "port", None) if getattr(server, "moved_from_port", None) else None,
        swap_path=swap[0] if swap else None, swap_downtime_s=swap[1] if swap else None,
        swap_done=bool(swap and swap[2]),
    )


# -- cells -----------------------------------------------------------------------------------
COLUMNS: tuple[tuple[str, str], ...] = (
    ("host", "Host"), ("conn", "Conn"), ("gpus", "GPU mem"), ("util", "Util"), ("server", "Server"),
    ("swap", "Swap"), ("model", "Model"), ("gen", "tok/s"), ("reqs", "Run/Q"), ("download", "Download"),
    ("problem", "Problem"),
)
SORT_KEYS = ("problem", "host", "util", "gpus", "gen", "server", "download")


# The fewest cells a column keeps when the table must fit the screen; the Problem column is the
# one to keep (issue 35 item 6): the others give way first, the widest slack first.
MIN_WIDTH = {"host": 0, "conn": 2, "gpus": 7, "util": 4, "server": 4, "swap": 2, "model": 6, "gen": 4,
             "reqs": 3, "download": 4, "problem": 12}
SHRINKS = ("model", "download", "swap", "conn", "server", "reqs", "gen")  # never the host: the sort reads it
SHORT_TITLES = {"conn": "C", "server": "Srv", "swap": "Sw", "gen": "t/s", "reqs": "R/Q", "download": "DL",
                "model": "Model", "problem": "Problem"}  # a column narrower than its title


def column_caps(natural: dict[str, int], width: int, padding: int = 2) -> dict[str, int]:
    """How wide each column may be so that the table fits `width` cells with the Problem column
    on screen: `natural` is each column's widest cell (header included). The Problem column asks
    for a third of the room (or all it needs, if less); the others shrink to make it."""
    budget = width - padding * len(COLUMNS) - 1  # a cell's padding each side
    caps = {key: natural.get(key, 0) for key, _ in COLUMNS}
    problem = min(caps["problem"], max(MIN_WIDTH["problem"], budget // 3))  # asked for; gets at least its minimum

    def others() -> int:
        return sum(v for k, v in caps.items() if k != "problem")

    while others() + problem > budget:
        slack = [k for k in SHRINKS if caps[k] > MIN_WIDTH[k]]
        if not slack:
            break
        widest = max(slack, key=lambda k: caps[k] - MIN_WIDTH[k])
        caps[widest] -= 1
    caps["problem"] = max(MIN_WIDTH["problem"], min(caps["problem"], budget - others()))
    return caps


def column_title(key: str, title: str, cap: int) -> str:
    """The column's title in its cap: whole, else its short form ("DL" for Download)."""
    if len(title) <= cap:
        return title
    short = SHORT_TITLES.get(key, title)
    return short if len(short) <= cap else short[:max(1, cap)]


def clip_cell(key: str, text: str, cap: int) -> str:
    """A cell in `cap` cells: a model keeps its start and end ("qwen3.5-…(moved)"), the rest
    their start, with an ellipsis where they were cut."""
    if len(text) <= cap or key == "host":
        return text
    if key == "model":
        return fit_name(text, cap)
    return text[:max(0, cap - 1)] + "…"


def _num(value: float | None, fmt: str = "{:.0f}") -> str:
    return "?" if value is None else fmt.format(value)


def _conn_cell(row: FleetRow) -> str:
    if row.connection_ok:
        return "prom" if row.via and "Prometheus" in row.via else "ok"
    return row.connection.split(":", 1)[0][:16]


PATH_WORDS = {"in-place": "in place", "beside": "beside", "restart": "restart"}


def _span(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s}s" if s < 60 else f"{s // 60}m{s % 60:02d}s"


def swap_cell(row: FleetRow) -> str:
    """The path of the host's swap and its downtime: "in place 15s", "beside 0s", "restart
    1m50s"; "…" while the clock still runs; "–" when no swap was seen."""
    if row.swap_path is None:
        return "–"
    word = PATH_WORDS.get(row.swap_path, row.swap_path)
    if row.swap_downtime_s is None:
        return f"{word} ?" if row.swap_done else f"{word}…"
    return f"{word} {_span(row.swap_downtime_s)}" + ("" if row.swap_done else "…")


# By meaning: no downtime green, a pause (in place) cyan, a restart's downtime yellow, a clock
# still running bold yellow.
SWAP_STYLE = {"beside": "green", "in-place": "cyan", "restart": "yellow"}


def format_cells(row: FleetRow) -> dict[str, str]:
    """Plain text per column (the screen styles them); "?" is unknown, "~" marks stale data."""
    def mark(source: str, text: str) -> str:
        return f"~{text}" if source in row.stale and text != "?" else text

    if row.memory_total_mib:
        gib = f"{(row.memory_used_mib or 0) / 1024:.0f}/{row.memory_total_mib / 1024:.0f}G"
        gpus = f"{gib}×{row.gpu_count}" + (f" {row.gpus_lost}✗" if row.gpus_lost else "")
    else:
        gpus = "?" if row.gpu_count is None else f"{row.gpu_count} GPUs"
    if row.download_fraction is not None:
        download = "done" if row.download_complete else f"{100 * row.download_fraction:.0f}%"
    elif row.download_done_bytes is not None:
        download = f"{row.download_done_bytes / 1e9:.0f}GB"
    else:
        download = "–"
    reqs = "?" if row.running_reqs is None and row.queued_reqs is None else \
        f"{_num(row.running_reqs)}/{_num(row.queued_reqs)}"
    return {
        "host": row.label if row.label == row.host else row.host,
        "conn": _conn_cell(row),
        "gpus": mark("gpu", gpus),
        "util": mark("gpu", _num(row.util_mean_pct, "{:.0f}%")),
        "server": mark("server", row.server_status or "?"),
        "swap": swap_cell(row),
        "model": (row.model or "?") + (f" :{row.server_port} (moved)" if row.server_port else ""),
        "gen": mark("server", _num(row.gen_tokens_per_s)),
        "reqs": mark("server", reqs),
        "download": mark("download", download),
        "problem": row.problem or "",
    }


CELL_STYLE = {3: "bold red", 2: "yellow", 1: "cyan", 0: ""}


def cell_text(row: FleetRow, key: str, text: str) -> Text | str:
    """A cell as Rich text or escaped markup, never the host's markup: a host name, a model or a
    problem is the host's (or a Prometheus label's) text, and `[/]` in one crashed the fleet
    screen; `[link=…]` drew a link (issue 21, item 4). `Text(...)` is never parsed; a plain cell
    (which DataTable reads as markup) is escaped."""
    if key == "problem" and row.severity:
        return Text(text, style=CELL_STYLE[row.severity])
    if key == "conn" and not row.connection_ok:
        return Text(text, style="bold red" if "failed" in text else "yellow")
    if key == "server" and row.server_status in ("dead", "degraded"):
        return Text(text, style="bold red" if row.server_status == "dead" else "yellow")
    if key == "swap" and row.swap_path is not None:
        return Text(text, style=SWAP_STYLE.get(row.swap_path, "") if row.swap_done else "bold yellow")
    if text.startswith("~"):
        return Text(text, style="dim yellow")
    if key == "host":  # the sort reads the host back from its cell (str(Text) is the plain text)
        return Text(text)
    return escape(text)


_HOSTNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,252}$|^[0-9a-fA-F:.]+$")


def host_label(raw: str | None) -> str | None:
    """A Prometheus host label as a fleet key: no control characters or escapes, and never
    starting with `?` (the console's own rows, `?no-host-label` and `?URL`, start so)."""
    if not raw:
        return None
    label = clean_line(raw).strip().lstrip("?").strip()[:253]
    return label or None


def ssh_target(label: str) -> str | None:
    """The label as a host name to SSH to, if it is one (letters, digits, `.`, `-`, not leading
    `-`; or an IP address); None for anything else (`-oProxyCommand=…`, `a b`, `[x]`)."""
    return label if _HOSTNAME.match(label) else None


def sort_key(row: FleetRow, key: str) -> tuple[Any, ...]:
    """Ascending order for `key`; numbers sort unknown last, problems worst first."""
    def num(value: float | None) -> tuple[int, float]:
        return (1, 0.0) if value is None else (0, -value)

    if key == "problem":
        return (-row.severity, row.host)
    if key == "util":
        return (*num(row.util_mean_pct), row.host)
    if key == "gpus":
        frac = None if not row.memory_total_mib else (row.memory_used_mib or 0) / row.memory_total_mib
        return (*num(frac), row.host)
    if key == "gen":
        return (*num(row.gen_tokens_per_s), row.host)
    if key == "server":
        order = {"dead": 0, "degraded": 1, "unknown": 2, "starting": 3, "ready": 4}
        return (order.get(row.server_status or "", 5), row.host)
    if key == "download":
        return (*num(row.download_fraction), row.host)
    return (row.host,)


def matches(row: FleetRow, text: str) -> bool:
    """The filter: every word must appear in the host, label, status, model or problem."""
    haystack = " ".join(x for x in (row.host, row.label, row.server_status, row.model, row.problem, row.swap_path,
                                    row.connection, SEVERITY_WORDS[row.severity]) if x).lower()
    return all(word in haystack for word in text.lower().split())
