"""The download pane: bytes and shards against the true total, files in flight, rate, ETA,
stalls, free disk, and a plain verdict at the top."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import reactive
from textual.screen import ModalScreen
from textual.widgets import Static

from console.core.freshness import STALE_AFTER_S
from console.domain.analysis.download import DownloadProgress
from console.domain.paths import host_named
from console.model import Reading
from console.sanitize import clean_line
from console.ui.panes.base import ReadingPane
from console.units import DASH, bar, duration, fit_name, gb, rate

OK, WARN, BAD, DIM = "green", "yellow", "bold red", "dim"


def verdict(p: DownloadProgress, now_s: float) -> tuple[str, str]:
    if p.fits_on_disk is False:
        return "WILL NOT FIT", "bold white on red"
    if p.complete:
        shards = f"{p.shards_done}/{p.shards_total} shards" if p.shards_total else f"{p.files_done} files"
        sizes = ", sizes match" if p.expected_source in ("hub", "listing") else ""
        return f"COMPLETE {shards}{sizes}", "bold black on green"
    if p.stalled_since is not None:
        return f"STALLED for {duration(now_s - p.stalled_since)}", "bold black on yellow"
    if any(x.startswith("wrong size") for x in p.problems):
        return "WRONG SIZES", "bold white on red"
    if p.partial_files:
        return "DOWNLOADING", "bold black on cyan"
    if p.bytes_total is None:
        return "TOTAL UNKNOWN", "bold black on yellow"
    return "WAITING", "bold"


def _name(path: str, width: int) -> str:
    # A listing's file name addresses the real file, so it is kept raw in the reading; what is
    # drawn is cleaned of escape sequences and control characters (issue 21, item 1).
    path = clean_line(path).replace(".safetensors", "")
    return path if len(path) <= width else "…" + path[-(width - 1):]


def source_line(note: str, model_dir: str, width: int) -> str:
    """Where the total comes from, and the directory read, in `width` cells: the source whole and
    the directory by its last name ("…/Qwen3.5-122B-A10B", then "Qwen3.5-…-A10B") when both do not fit;
    never cut mid-word."""
    note = clean_line(note)
    line = f"{note} · {model_dir}"
    if len(line) <= width:
        return line
    name = model_dir.rstrip("/").rsplit("/", 1)[-1]
    short = f"{note} · …/{name}"
    if len(short) <= width:
        return short
    room = width - len(note) - 3
    if room >= 10:  # the directory's name around an ellipsis: both ends say something
        return f"{note} · {fit_name(name, room)}"
    if len(note) <= width:
        return note
    cut = note[: max(1, width - 1)]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + "…"


def format_verify(v: Any, width: int) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    pct = v.done_bytes / v.total_bytes if v.total_bytes else 1.0
    if v.finished and not v.mismatched and not v.error:
        t.append(f" sha256 ✓ {v.matched}/{v.total_files} files match {v.reference_text()}\n",
                 style="bold green")
        return t
    label = "sha256 " + (f"{v.done_files}/{v.total_files}" if not v.finished else "done")
    t.append(f" {label} ", style="bold")
    t.append(bar(pct, max(6, width - len(label) - 16)), style="cyan")
    t.append(f" {pct * 100:5.1f}%\n")
    for m in v.mismatched[:3]:
        t.append(f" ✗ {clean_line(m)}\n", style="bold red")
    if v.error:
        t.append(f" ✗ {v.error}\n", style="bold red")
    return t


def format_download(reading: Reading[DownloadProgress] | None, width: int = 56, height: int = 12,
                    now_s: float | None = None, verify: Any = None, host_root: str | None = None) -> Text:
    now = time.time() if now_s is None else now_s
    text = Text(no_wrap=True, overflow="ellipsis")
    if reading is None:
        return Text("waiting for the first listing…", style=DIM)
    p = reading.data
    if p is None:
        text.append(reading.error or "no data yet", style=WARN if reading.error else DIM)
        return text
    width = max(width, 30)
    label, style = verdict(p, now)
    text.append(f" {label} ", style=style)
    title = p.repo_id or p.model_dir.rstrip("/").rsplit("/", 1)[-1]
    room = width - len(label) - 3
    own_line = len(title) > room
    if not own_line:
        text.append(f" {title}\n", style="bold")
    else:  # the name gets a line of its own rather than being cut
        text.append("\n" + fit_name(title, width) + "\n", style="bold")
    # Bytes against the true total.
    frac = p.fraction
    figures = f" {gb(p.bytes_done)} / {gb(p.bytes_total)}" + (f" {frac * 100:5.1f}%" if frac is not None else "")
    bar_w = max(6, width - len(figures))
    text.append(bar(frac, bar_w), style=OK if p.complete else "cyan")
    text.append(figures + "\n")
    # Shards and files.
    shards = f"{p.shards_done}/{p.shards_total}" if p.shards_total is not None else f"{p.shards_done}/?"
    files = f"{p.files_done}/{p.files_total}" if p.files_total is not None else None
    flying = str(len(p.partial_files))
    # One row at any width: the gaps narrow first, then the files count goes (at 80x24 the
    # pane wrapped "in flight" and its number onto a row of its own, at column 0).
    gap = "  "
    full = len(f"shards {shards}") + (len(f"  files {files}") if files else 0) + len(f"  in flight {flying}")
    if full > width:
        gap = " "
        if full - (2 if files else 1) > width:
            files = None
    text.append("shards ", style=DIM)
    text.append(shards, style="bold")
    if files:
        text.append(f"{gap}files ", style=DIM)
        text.append(files)
    text.append(f"{gap}in flight ", style=DIM)
    text.append(f"{flying}\n")
    # Rate, ETA, disk.
    text.append("rate ", style=DIM)
    text.append(rate(p.rate_bytes_per_s), style=WARN if p.stalled_since else "")
    text.append("  ETA ", style=DIM)
    text.append(duration(p.eta_s) if p.eta_s is not None else DASH)
    text.append("  free ", style=DIM)
    fit_style = BAD if p.fits_on_disk is False else OK if p.fits_on_disk else ""
    text.append(gb(p.disk_free_bytes), style=fit_style)
    if p.fits_on_disk is not None:
        text.append(" (fits)" if p.fits_on_disk else " (rest will not fit)", style=fit_style)
    text.append("\n")
    if p.expected_note:
        text.append(source_line(p.expected_note, host_named(p.model_dir, host_root), width) + "\n", style=DIM)
    if verify is not None:
        text.append_text(format_verify(verify, width))
    lines_left = height - 5 - own_line
    problems = [x for x in p.problems]
    room_for_partials = max(0, lines_left - min(len(problems), 3))
    name_w = max(12, width // 3)
    for part in p.partial_files[:room_for_partials]:
        figures = f" {gb(part.bytes)}/{gb(part.expected_bytes)}"
        pbar_w = max(4, width - name_w - len(figures) - 2)
        pfrac = part.bytes / part.expected_bytes if part.expected_bytes else None
        text.append(f" {_name(part.path, name_w):<{name_w}} ", style="" if part.matched else WARN)
        text.append(bar(pfrac, pbar_w), style="cyan")
        text.append(figures + "\n")
    hidden = len(p.partial_files) - room_for_partials
    if hidden > 0:
        text.append(f" … {hidden} more in flight\n", style=DIM)
    for problem in problems[:3]:
        bad = problem.startswith(("wrong size", "disk:", "download restarted"))
        text.append((" ✗ " if bad else " ⚠ ") + clean_line(problem)[: width - 3] + "\n", style=BAD if bad else WARN)
    if reading.error:
        text.append(f" ✗ {reading.error}"[:width] + "\n", style=BAD)
    text.rstrip()
    return text


class DownloadPane(ReadingPane):
    PANE_TITLE: ClassVar[str] = "Download"
    PANE_KEY: ClassVar[str] = "2"
    STALE_AFTER_S: ClassVar[float] = STALE_AFTER_S["download"]  # the one rule (core/freshness.py)
    BINDINGS: ClassVar[list[BindingType]] = [Binding("v", "verify", "Verify sha256")]

    verify: reactive[Any] = reactive(None)
    host_root: str | None = None  # the demo's sandbox (HostInfo.host_root); None on a real host

    class VerifyRequested(Message):
        pass

    def render_reading(self, reading: Reading[Any] | None) -> RenderableType:
        size = self.content_size
        return format_download(reading, size.width or 56, size.height or 12, self.now(), verify=self.verify,
                               host_root=self.host_root)

    def state_changed(self, state: Any, source: str) -> None:
        # the demo's sandbox (HostInfo.host_root): the directory named as the host names it
        self.host_root = getattr(getattr(state, "info", None), "host_root", None)
        if source == "verify":
            self.use_clock(state.now)
            self.verify = state.verify
        else:
            self.reading = state.reading(source)

    def watch_verify(self) -> None:
        self.show(self.render_reading(self.reading))

    def action_verify(self) -> None:
        self.post_message(self.VerifyRequested())


def format_verify_question(progress: Any) -> Text:
    """What `v` will do on the host, before it does it: the command and how much it reads (issue
    35 item 10: it re-hashed 249 GB unasked while every plan step asks)."""
    t = Text()
    t.append("Verify the files (sha256) on the host\n\n", style="bold")
    if progress is None:
        t.append("The download is not read yet: how much would be hashed is unknown.\n", style="yellow")
        where = "the model directory"
    else:
        where = progress.model_dir
        files = progress.files_done
        size = gb(progress.bytes_done)
        t.append("This runs on the host:\n\n")
        t.append(f"cd -- {where} && for f in FILES; do sha256sum -- \"$f\"; done\n", style="cyan")
        t.append(f"\nFILES: the finished files with a known sha256, at most {files} "
                 f"({size} read from the host's disk, every byte, at the disk's speed).\n")
    t.append("\nenter / y: hash them   escape / n: cancel", style="dim")
    return t


class VerifyQuestion(ModalScreen[bool]):
    """Ask before hashing: the command and how much it will read; enter runs it, escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape,n", "dismiss(False)", "Cancel"),
                                             ("enter,y", "dismiss(True)", "Verify")]
    DEFAULT_CSS = """
    VerifyQuestion { align: center middle; }
    VerifyQuestion > Static { width: 90; max-width: 98%; height: auto; border: round $warning;
        background: $surface; padding: 0 1; }
    """

    def __init__(self, progress: Any) -> None:
        super().__init__()
        self.progress = progress

    def compose(self) -> Any:
        yield Static(format_verify_question(self.progress), id="verify-question")
