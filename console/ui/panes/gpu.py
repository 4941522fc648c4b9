"""The GPU pane: a row per GPU (memory bar, history, utilization, temperature, power), a total,
the processes holding GPU memory, and the path the data came by."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from rich.console import RenderableType
from rich.text import Text

from console.core.freshness import STALE_AFTER_S
from console.model import GpuDevice, GpuStatus, Reading
from console.ui.panes.base import ReadingPane
from console.units import DASH, bar, duration, fit_name, sparkline

OK, WARN, BAD, DIM = "green", "yellow", "bold red", "dim"


def memory_style(fraction: float | None) -> str:
    # SGLang pre-allocates ~90 % on purpose: only the last few percent are a warning.
    if fraction is None:
        return DIM
    return BAD if fraction >= 0.99 else WARN if fraction >= 0.96 else OK


def temp_style(temp_c: int | None) -> str:
    if temp_c is None:
        return DIM
    return BAD if temp_c >= 85 else WARN if temp_c >= 75 else ""


def power_style(gpu: GpuDevice) -> str:
    if gpu.power_w is None or not gpu.power_limit_w:
        return DIM
    return WARN if gpu.power_w >= 0.95 * gpu.power_limit_w else ""


def _num(value: float | int | None, fmt: str, width: int) -> str:
    return (DASH if value is None else format(value, fmt)).rjust(width)


def short_gpu_name(name: str) -> str:
    return name.replace("NVIDIA ", "").replace(" Server Edition", " SE")


def _columns(width: int) -> tuple[int, int, int]:
    """The memory history's, the utilization history's and the memory bar's widths at `width`."""
    width = max(width, 30)
    wide = width >= 90
    compact = width < 54
    # Columns: idx(3) bar +1 used/total(11) pct(4) [+1 spark] util(5) [+1 util-spark] temp(5) power(6)
    fixed = 3 + 1 + 11 + 4 + 5 + (0 if compact else 1 + 5 + 6)
    room = width - fixed
    if compact:
        return 0, 0, max(4, room)
    if wide:
        # The memory bar says one fraction (and its % is beside it): a few cells are enough; the
        # histories take the rest, as many samples as fit (the core keeps 300).
        bar_w = max(10, min(20, room // 4))
        spark_w = (room - bar_w - 1) // 2
        return spark_w, spark_w, room - 2 * spark_w - 1
    spark_w = max(6, room // 2 - 1)
    return spark_w, 0, room - spark_w


def format_gpu_status(reading: Reading[GpuStatus] | None, width: int = 56, height: int = 12,
                      now_s: float | None = None) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    if reading is None:
        return Text("waiting for the first GPU sample…", style=DIM)
    status = reading.data
    if status is None:
        text.append(reading.error or "no GPU data yet", style=BAD if reading.error else DIM)
        return text
    width = max(width, 30)
    wide = width >= 90
    compact = width < 54
    spark_w, util_spark_w, bar_w = _columns(width)
    header = f"{'#':>2} {'memory':<{bar_w}} {'used/total':>11} {'%':>3}"
    if not compact:
        header += f" {'history':<{spark_w}}"
    header += f"{'util':>5}"
    if wide:
        header += f" {'':<{util_spark_w}}"
    if not compact:
        header += f"{'temp':>5}{'power':>6}"
    text.append(header[:width] + "\n", style=DIM)
    hist = dict(enumerate(status.memory_history))
    uhist = dict(enumerate(status.util_history))
    for i, gpu in enumerate(status.gpus):
        text.append(f"{gpu.index:>2} ", style="bold")
        if gpu.lost_at_s is not None:
            # Fallen out of the samples: its last values, in red, and for how long it has been gone.
            age = duration(max(0.0, (time.time() if now_s is None else now_s) - gpu.lost_at_s))
            used = DASH if gpu.memory_used_mib is None else f"{gpu.memory_used_mib / 1024:.1f}"
            total = DASH if gpu.memory_total_mib is None else f"{gpu.memory_total_mib / 1024:.1f}"
            text.append(f"LOST {age} ago · last {used}/{total} GiB, {gpu.utilization_pct or 0}% util"[: width - 3]
                        + "\n", style=BAD)
            continue
        if gpu.error:
            text.append(f"{gpu.error}"[: width - 3] + "\n", style=BAD)
            continue
        frac = gpu.memory_fraction
        text.append(bar(frac, bar_w), style=memory_style(frac))
        used = None if gpu.memory_used_mib is None else gpu.memory_used_mib / 1024
        total = None if gpu.memory_total_mib is None else gpu.memory_total_mib / 1024
        text.append(f" {_num(used, '.1f', 5)}/{_num(total, '.1f', 5)}")
        text.append(f"{_num(None if frac is None else round(frac * 100), 'd', 3)}%", style=memory_style(frac))
        if not compact:  # histories end at the right, at "now", while they fill up from the left
            text.append(" " + sparkline(list(hist.get(i, ())), spark_w, top=1.0).rjust(spark_w), style="cyan")
        text.append(f"{_num(gpu.utilization_pct, 'd', 4)}%")
        if wide:
            text.append(" " + sparkline(list(uhist.get(i, ())), util_spark_w, top=100.0).rjust(util_spark_w),
                        style="dodger_blue2")  # a series, not a problem: red and magenta mean errors
                                                # (256-colour: a theme's ANSI "blue" is violet)
        if not compact:
            text.append(f"{_num(gpu.temperature_c, 'd', 4)}°", style=temp_style(gpu.temperature_c))
            text.append(f"{_num(None if gpu.power_w is None else round(gpu.power_w), 'd', 5)}W",
                        style=power_style(gpu))
        text.append("\n")
    healthy = [g for g in status.gpus if g.error is None and g.memory_total_mib and g.lost_at_s is None]
    used_total = sum((g.memory_used_mib or 0) for g in healthy) / 1024
    cap_total = sum((g.memory_total_mib or 0) for g in healthy) / 1024
    names = {short_gpu_name(g.name) for g in healthy}
    total_line = Text(" Σ ", style="bold")
    total_line.append(f"{used_total:.1f} / {cap_total:.1f} GiB", style="bold")
    total_line.append(f"  via {status.source}", style="italic")
    if status.driver:
        total_line.append(f" · driver {status.driver}", style=DIM)
    total_line.append(f" · {len(status.gpus)}× {', '.join(sorted(names)) or '?'}", style=DIM)
    total_line.truncate(width, overflow="ellipsis")
    text.append_text(total_line)
    text.append("\n")
    lines_left = height - (len(status.gpus) + 2)
    procs = [(g.index, p) for g in status.gpus for p in g.processes]
    problems = list(status.problems)
    if procs and lines_left > 1:
        show = procs[: max(1, lines_left - 1 - min(len(problems), 2))]
        for index, p in show:
            mem = DASH if p.memory_mib is None else f"{p.memory_mib / 1024:.1f}G"
            name_w = max(10, width - 19)  # " II PPPPPPP " before, " MMMMMM" after
            text.append(f" {index:>2} {p.pid:>7} ", style=DIM)
            text.append(f"{process_label(p.container, p.name, name_w):<{name_w}}")
            text.append(f" {mem:>6}\n")
        if len(procs) > len(show):
            more = len(procs) - len(show)
            line = f"    … {more} more {'process' if more == 1 else 'processes'} (1 maximizes)"
            if len(line) > width:  # a narrow pane (80x24): "… 2 more processes (1" was cut mid-hint
                line = f"    … {more} more (1 maximizes)"
            text.append(line + "\n", style=DIM)
    elif not procs and lines_left > 1:
        text.append("    no processes on the GPUs\n", style=DIM)
    for problem in problems[:3]:
        text.append(f" ⚠ {problem}"[:width] + "\n", style=WARN)
    if reading.error:
        text.append(f" ✗ {reading.error}"[:width] + "\n", style=BAD)
    text.rstrip()
    return text


def process_label(container: str | None, name: str, width: int) -> str:
    """A GPU process as `container: name` in `width` cells: the container whole where the name
    keeps 12 cells beside it (only the name is shortened, start and end), else the two shortened
    apart; never one ellipsis across both ("sglang-qwen…duler_TP0" said neither)."""
    if not container:
        return fit_name(name, width)
    if len(container) + 2 + len(name) <= width:
        return f"{container}: {name}"
    if width - len(container) - 2 >= 12:
        return f"{container}: {fit_name(name, width - len(container) - 2)}"
    half = max(1, (width - 2) // 2)
    return f"{fit_name(container, half)}: {fit_name(name, max(1, width - 2 - half))}"


class GpuPane(ReadingPane):
    PANE_TITLE: ClassVar[str] = "GPUs"
    PANE_KEY: ClassVar[str] = "1"
    STALE_AFTER_S: ClassVar[float] = STALE_AFTER_S["gpu"]  # the one rule (core/freshness.py)

    renders = 0  # texts laid out (tests read it)
    _drawn_from: object = None

    def state_changed(self, state: Any, source: str) -> None:
        """A new sample: drawn only when what `format_gpu_status` would show moved (a still GPU's
        sample every second draws nothing: issue 36); its time still moves the pane's ages."""
        self.use_clock(state.now)
        reading = state.reading(source)
        if reading is not None and self.reading is not None and self._drawn_from is not None \
                and shown_inputs(reading, self.content_size.width or 56, self.content_size.height or 12) \
                == self._drawn_from:
            self.set_reactive(GpuPane.reading, reading)
            self.update_age()
            return
        self.reading = reading

    def render_reading(self, reading: Reading[Any] | None) -> RenderableType:
        size = self.content_size
        self.renders += 1
        width, height = size.width or 56, size.height or 12
        self._drawn_from = shown_inputs(reading, width, height) if reading is not None else None
        return format_gpu_status(reading, width, height, self.now())


def shown_inputs(reading: Reading[GpuStatus], width: int, height: int) -> object:
    """All `format_gpu_status` reads of a reading at this size, its time left out: equal inputs
    draw the same text. None (draw it) for a lost GPU, whose age moves with the clock."""
    status = reading.data
    if status is None:
        return ("no data", reading.error)
    if any(gpu.lost_at_s is not None for gpu in status.gpus):
        return None
    spark_w, util_spark_w, _bar = _columns(width)  # the histories show their last samples, this many

    def tail(history: tuple[tuple[float, ...], ...], n: int) -> object:
        return tuple(h[-n:] for h in history) if n else ()

    return (width, height, reading.error, status.source, status.gpus, status.problems, status.driver,
            tail(status.memory_history, spark_w), tail(status.util_history, util_spark_w))
