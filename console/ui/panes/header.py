"""The header: host, connection state, staleness and the host summary in one or two lines."""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from console.core.freshness import is_stale, stale_after_s
from console.domain.paths import host_named
from console.host.transport.base import ConnectionState
from console.model import HostSummary, Reading
from console.units import DASH, duration, gb

_STATE_STYLE = {"connected": "bold green", "connecting": "yellow", "reconnecting": "bold yellow",
                "failed": "bold red"}


def short_mount(path: str) -> str:
    """A mount point as the operator names it: `/`, `/shared` (a long prefix is elided)."""
    if path in ("", "/"):
        return "/"
    parts = path.rstrip("/").split("/")
    return path if len(parts) <= 2 else "…/" + parts[-1]


def format_header(label: str, demo: bool, state: ConnectionState | None,
                  summary: Reading[HostSummary] | None, now_s: float | None = None, mode: str | None = None,
                  replay: Any = None, width: int | None = None, compact: int = 0, host_root: str | None = None) -> Text:
    """One line. With `width`, a line too long for it drops the uptime and the 5- and 15-minute
    loads first (compact 1), then names the host by its own name alone, without the address the
    console reached it by (compact 2), then drops the CPU count and says "free" once for every disk
    (compact 3: "free /shared 841 GB, / 740 GB"): the free disk is the figure kept, each disk whole
    (issue 35 item 9: at 80 columns the last disk was cut to "/: 740").
    `host_root`: the demo's sandbox (HostInfo.host_root): a disk is named as the host names it."""
    if width is not None and not compact:
        for level in (0, 1, 2, 3):
            line = format_header(label, demo, state, summary, now_s, mode, replay, compact=level,
                                 host_root=host_root)
            if line.cell_len <= width or level == 3:
                return line
    now = time.time() if now_s is None else now_s
    text = Text(no_wrap=True, overflow="ellipsis")
    if replay is not None:  # a ReplayInfo (issue 20): the position, the speed, the end
        # a mode, not an error; 256-colour blue: a theme's ANSI blue is violet, next to magenta
        text.append(f" {replay.describe(now)} ", style="bold white on color(25)")
    elif mode:  # "replay": nothing here is live
        text.append(f" {mode.upper()} ", style="bold white on color(25)")
    if demo:
        text.append(" DEMO ", style="bold black on yellow")
    text.append(" ")
    host = summary.data.hostname if summary and summary.data else None
    if host and host != label and compact >= 2:
        text.append(host, style="bold")  # short of room: the host's own name, not the address reached
    else:
        text.append(label, style="bold")
        if host and host != label:
            text.append(f" ({host})")
    text.append("  ")
    if state is None:
        text.append("● starting", style="dim")
    else:
        text.append("● " + state.describe(now), style=_STATE_STYLE.get(state.status, ""))
    if summary is not None and summary.data is not None:
        s = summary.data
        age = summary.age_s(now)
        if is_stale("host", summary, now):  # the one rule (console/core/freshness.py)
            text.append(f"  stale {duration(age)}", style="bold yellow")
        if not compact:
            text.append("  up ", style="dim")
            text.append(duration(s.uptime_s))
        text.append("  load ", style="dim")
        loads = [x for x in ((s.load_1m,) if compact else (s.load_1m, s.load_5m, s.load_15m)) if x is not None]
        load_text = " ".join(f"{x:.2f}" for x in loads) or DASH
        busy = s.cpus and s.load_1m and s.load_1m > s.cpus
        text.append(load_text, style="bold yellow" if busy else "")
        if s.cpus and compact < 3:
            text.append(f" /{s.cpus} cpu", style="dim")
        seen: set[str] = set()
        for disk in s.disks:
            if disk.mount in seen:
                continue
            first = not seen
            seen.add(disk.mount)
            frac_free = disk.avail_bytes / disk.size_bytes if disk.size_bytes else 1.0
            style = "bold red" if frac_free < 0.05 else "yellow" if frac_free < 0.15 else "green"
            mount = short_mount(host_named(disk.mount, host_root))
            if compact >= 3:  # short of room: "free /shared 841 GB, / 740 GB", every disk whole
                text.append("  free " if first else ", ", style="dim")
                text.append(mount + " ", style="dim")
                text.append(gb(disk.avail_bytes, 0), style=style)
                continue
            text.append("  ")
            text.append(mount + ":", style="dim")  # "/: 69 GB free", not "/69 GB free"
            text.append(f" {gb(disk.avail_bytes, 0)} free", style=style)
    elif summary is not None and summary.error:
        text.append(f"  host summary: {summary.error}", style="red")
    return text


def format_presence(presence: Any, note: Any = None, me: int | None = None, now_s: float | None = None) -> Text:
    """The pairing line: "2 attached: ana (driver), ben" and the shared note (issue 12)."""
    now = time.time() if now_s is None else now_s
    text = Text(no_wrap=True, overflow="ellipsis")
    clients = tuple(getattr(presence, "clients", ()) or ())
    asking = set(getattr(presence, "asking", ()) or ())
    i_drive = me is not None and any(c.id == me and c.role == "driver" for c in clients)
    text.append(f" {len(clients)} attached: ", style="dim")
    for i, client in enumerate(clients):
        if i:
            text.append(", ")
        text.append(client.name, style="bold" if client.role == "driver" else "")
        tags = [t for t in ("driver" if client.role == "driver" else "", "you" if client.id == me else "",
                            "asks to drive" if client.id in asking and not i_drive else "") if t]
        if tags:
            text.append(f" ({', '.join(tags)})", style="bold cyan" if client.role == "driver" else "dim")
        if client.id in asking and i_drive:  # to the driver it is a notice to answer, not a tag
            text.append(" ")
            text.append(" asks to drive: ctrl+p ", style="bold black on yellow")
    if note is not None and note.text:
        text.append("  note: ", style="dim")
        text.append(note.text, style="bold")
        text.append(f" ({note.by}, {duration(max(0.0, now - note.at_s))} ago)" if note.at_s else f" ({note.by})",
                    style="dim")
    return text


class HostHeader(Static):
    DEFAULT_CSS = """
    HostHeader { dock: top; height: 1; background: $panel; color: $text; }
    """

    # No repaint of their own: `_redraw` updates the line only when its text changed.
    state: reactive[ConnectionState | None] = reactive(None, repaint=False)
    summary: reactive[Reading[HostSummary] | None] = reactive(None, repaint=False)

    def __init__(self, host: Any, mode: str | None = None, **kwargs: object) -> None:
        """`host`: the HostState this header shows; `mode`: "replay", … (said first)."""
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.host = host
        self.mode = mode
        self._label = host.label
        self._demo = host.demo
        self.me: int | None = None  # pairing: this view's client id, for "(you)"

    def refresh_state(self) -> None:
        self._label, self._demo = self.host.label, self.host.demo
        self.state = self.host.connection
        self.summary = self.host.reading("host")
        self._redraw()

    def on_mount(self) -> None:
        self.refresh_state()

    def on_resize(self) -> None:
        if getattr(self.host, "presence", None) is not None and self.host.presence.clients:
            self._redraw()  # the pairing line is cut at the width

    def watch_state(self) -> None:
        self._redraw()

    def watch_summary(self) -> None:
        self._redraw()

    def age_due_s(self) -> float | None:
        """When the line next reads differently with no event (its ages): every second while not
        connected, stale or replayed; else the moment the host summary goes stale."""
        if (self.state and self.state.status != "connected") or getattr(self.host, "replay", None) is not None:
            return self.host.now() + 1.0
        summary = self.summary
        if summary is None or summary.ok_at_s is None:
            return None
        now = self.host.now()
        if is_stale("host", summary, now):
            return now + 1.0
        limit = stale_after_s("host")
        return None if limit is None else summary.ok_at_s + limit + 1e-3

    def tick(self) -> None:
        """Once a second: only the ages change, and only stale or reconnecting states show them."""
        if (self.state and self.state.status != "connected") or (
            self.summary and is_stale("host", self.summary, self.host.now())
        ) or getattr(self.host, "replay", None) is not None:
            self._redraw()

    def _redraw(self) -> None:
        text = format_header(self._label, self._demo, self.state, self.summary, self.host.now(), self.mode,
                             getattr(self.host, "replay", None), width=self.size.width or None,
                             host_root=getattr(getattr(self.host, "info", None), "host_root", None))
        presence = getattr(self.host, "presence", None)
        if presence is not None and presence.clients:  # a shared session: a second line
            lines = [text, format_presence(presence, getattr(self.host, "note", None), self.me, self.host.now())]
            address = getattr(self.app, "share_address", None)  # `--share`: where others attach, while it lasts
            if address:
                lines[1].append(f"  others attach: gpuconsole attach {address}", style="dim")
            for line in lines:  # each line cut at the width on its own: line 1 must not wrap onto line 2
                line.truncate(max(self.size.width, 20), overflow="ellipsis")
            text = Text("\n", no_wrap=True).join(lines)
        height = 2 if presence is not None and presence.clients else 1
        if height != getattr(self, "_height", 1):  # set only when it changes: a layout pass each time
            self._height = height
            self.styles.height = height
        key = (text.plain, tuple(text.spans))
        if key != getattr(self, "_shown_key", None):
            self._shown_key = key
            self.update(text, layout=False)  # one line, always: its size never changes
