"""The benchmark pane: a time chart (client output tok/s, server gen tok/s, GPU util) and, beside
it, the live run, the results table, the sweep and the before/after comparison.

Keys: `b` quick run, `B` the story's sweep (1, 4, 16, 64 at 1k/1k), `x` stop."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from typing import Any, ClassVar

import plotext as plt
import plotext._core as plotext_core
import plotext._utility as ut
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Static

from console.domain.analysis.bench_view import BenchView, is_result
from console.ui.panes.base import PaneFrame
from console.units import fit_name

DIM = "dim"


def nice_ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 x 10^k steps) covering [lo, hi], at most n + 1 of them."""
    lo, hi = min(lo, hi), max(lo, hi)
    if hi - lo < 1e-9:
        hi = lo + 1.0
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    t = start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 10))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(t, 10))
    return ticks


def tick_label(v: float, unit: str = "") -> str:
    """Short and whole: 0, 250, 1.5k, 12k, 1.2M (never "85." or a cut "9")."""
    a = abs(v)
    if a >= 1e6:
        text = f"{v / 1e6:.1f}".rstrip("0").rstrip(".") + "M"
    elif a >= 1e4:
        text = f"{v / 1e3:.0f}k"
    elif a >= 1e3:
        text = f"{v / 1e3:.1f}".rstrip("0").rstrip(".") + "k"
    elif a >= 10 or v == int(v):
        text = f"{v:.0f}"
    else:
        text = f"{v:.1f}"
    return text + unit


def _is_nice(step: float) -> bool:
    if step <= 0:
        return False
    mag = 10 ** math.floor(math.log10(step))
    return any(abs(step / mag - m) < 1e-9 for m in (1, 2, 2.5, 5, 10))


def _nice_ceil(raw: float) -> float:
    """The smallest 1, 2, 2.5, 5 x 10^k step at least `raw`."""
    raw = max(raw, 1e-9)
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))


def row_ticks(lo: float, hi: float, rows: int, fixed: bool) -> list[float]:
    """Tick values that each land exactly on a row of a `rows`-row plot: `k` intervals where k
    divides rows - 1, so a label sits where its value is (plotext otherwise rounds 25 % and 50 %
    onto neighbouring rows, or drops one: "100/50/25/0 %" on evenly spaced rows at 80x24).
    A fixed axis keeps [lo, hi] and only takes a nice step; a data axis raises hi to k nice steps."""
    intervals = max(1, rows - 1)
    valid = [k for k in range(1, min(intervals, 8) + 1) if intervals % k == 0]
    if fixed:
        nice = [k for k in valid if _is_nice((hi - lo) / k)]
        small = [k for k in nice if 2 <= k <= 5]
        k = max(small) if small else min((k for k in nice if k > 5), default=1)
        step = (hi - lo) / k
    else:
        span = max(hi - lo, 1e-9)
        choices = [k for k in valid if 2 <= k <= 8] or ([intervals] if intervals <= 8 else [1])
        # the tightest top (the data fills the plot), then the count closest to four labels
        k = min(choices, key=lambda k: (k * _nice_ceil(span / k), abs(k - 4)))
        step = _nice_ceil(span / k)
    return [round(lo + i * step, 10) for i in range(k + 1)]


def _axis_ticks(values: list[float], side: str, unit: str = "", floor_zero: bool = True,
                fixed: tuple[float, float] | None = None,
                rows: int | None = None) -> tuple[float, float, list[float], list[str]]:
    """One y axis' limits, ticks and labels (what `_axis` hands plotext)."""
    if fixed is not None:
        lo, hi = fixed
        ticks = row_ticks(lo, hi, rows, True) if rows else nice_ticks(lo, hi, 4)
    else:
        lo = 0.0 if floor_zero else min(values)
        hi = max(values) if values else 1.0
        ticks = row_ticks(lo, hi, rows, False) if rows else nice_ticks(lo, hi, 4)
        lo, hi = ticks[0], ticks[-1]
    if unit == "ms" and max(abs(t) for t in ticks) >= 1000:  # "2.0 s", never "2kms"
        def label(t: float) -> str:
            return f"{t / 1000:.1f} s"
    else:
        def label(t: float) -> str:
            return tick_label(t, unit)
    width = max(len(label(t)) for t in ticks)
    # plotext 5 draws the right labels one column past the room it keeps for them (frame off): a
    # trailing space takes that cut.
    labels = [label(t).rjust(width) if side == "left" else " " + label(t).ljust(width) + " " for t in ticks]
    return lo, hi, ticks, labels


def _set_axis(plt: Any, side: str, axis: tuple[float, float, list[float], list[str]]) -> int:
    lo, hi, ticks, labels = axis
    plt.ylim(lo, hi, yside=side)
    plt.yticks(ticks, labels, yside=side)
    return len(labels[0])


def _axis(plt: Any, values: list[float], side: str, unit: str = "", floor_zero: bool = True,
          fixed: tuple[float, float] | None = None, rows: int | None = None) -> int:
    """Explicit ticks and limits for one y axis, so plotext never invents or truncates labels;
    with `rows` (the plot's rows) every tick lands on a row. Returns the labels' width in cells."""
    return _set_axis(plt, side, _axis_ticks(values, side, unit, floor_zero, fixed, rows))


# Series: never red. GPU util is 256-colour 252 (light grey), on its own axis: beside the server's
# cyan the dodger blue it was (33) read as the same line, 28° of hue apart.
COLORS: dict[str, Any] = {"client tok/s": "green", "server gen tok/s": "cyan", "GPU util %": 252}
LEGEND_COLORS = {"client tok/s": "green", "server gen tok/s": "cyan", "GPU util %": "color(252)"}
LEGEND_DOT = "⣿"


def legend(left: list[tuple[str, str]], right: list[tuple[str, str]], width: int) -> Text:
    """One row naming each axis by its series: `← ⣿ server gen tok/s ⣿ client tok/s` at the left
    axis, `⣿ GPU util % →` at the right one (plotext's own legend marks the side with "L" and "⅃")."""
    line = Text(no_wrap=True, overflow="ellipsis")
    if left:
        line.append("← ", style="bold")
        for i, (name, color) in enumerate(left):
            line.append(("  " if i else "") + LEGEND_DOT + " ", style=color)
            line.append(name)
    if right:
        tail = Text()
        for name, color in right:
            tail.append(LEGEND_DOT + " ", style=color)
            tail.append(name)
        tail.append(" →", style="bold")
        gap = width - line.cell_len - tail.cell_len
        line.append(" " * max(2 if left else 0, gap))
        line.append_text(tail)
    line.truncate(width, overflow="ellipsis")
    return line


def overlay_marks(body: Text, marks: list[tuple[int, str]], plot_lo: int, plot_hi: int, rows: int) -> Text:
    """Each mark's label written into the plot area, beside its line (left of it when it fits,
    else right of it, else cut with "…"), on the first of the top rows where it overlaps no other
    label: never over the y-axis labels, the legend or another label. `marks` is (column, label)."""
    lines = body.split("\n", allow_blank=True)
    taken: dict[int, list[tuple[int, int]]] = {}
    for i, (col, label) in enumerate(marks):
        room_left, room_right = col - plot_lo, plot_hi - col  # cells free on each side of the line
        if len(label) <= room_left:
            a, text = col - len(label), label
        elif len(label) <= room_right:
            a, text = col + 1, label
        elif room_left >= room_right:
            text = label[: max(0, room_left - 1)] + "…"
            a = col - len(text)
        else:
            text = label[: max(0, room_right - 1)] + "…"
            a = col + 1
        if not text.strip("…") or a < plot_lo:
            continue
        b = a + len(text)
        for r in [(i + k) % max(1, rows) for k in range(max(1, rows))]:
            if r < len(lines) and all(b <= x or a >= y for x, y in taken.get(r, [])):
                break
        else:
            continue
        taken.setdefault(r, []).append((a, b))
        line = lines[r]
        if line.cell_len < b:
            line.pad_right(b - line.cell_len)
        lines[r] = Text.assemble(line[:a], (text, "yellow"), line[b:], no_wrap=True)
    return Text("\n", no_wrap=True).join(lines)


def plot_columns(body: Text, lo: int, hi: int) -> tuple[int, int]:
    """The plot's first and last columns, from the x ticks' row: plotext centres the first tick's
    label on the first column and "now" on the last (its left margin is not always the labels'
    width: "1k" gets a space more)."""
    ticks = body.plain.rstrip("\n").rsplit("\n", 1)[-1]
    words = ticks.split()
    if len(words) >= 2:
        first = ticks.index(words[0])
        last = ticks.rindex(words[-1])
        return first + len(words[0]) // 2, last + len(words[-1]) // 2
    return lo, hi


def _snap(body: Text, col: int, rows: int) -> int:
    """`col` moved to the nearest column (within 2) where plotext drew a mark's line ("│")."""
    lines = body.plain.rstrip("\n").split("\n")[:rows]
    for d in (0, -1, 1, -2, 2):
        c = col + d
        if c >= 0 and sum(1 for line in lines if c < len(line) and line[c] == "│") * 2 >= len(lines):
            return c
    return col


def _chart_rows(width: int, height: int) -> tuple[int, int, int, int, int]:
    """The time chart's sizes: width, plot height, plot rows, and 1 when a row is left blank."""
    width, height = max(20, width), max(4, height)  # legend, two plot rows, the x ticks: all shown
    plot_h = height - 1  # the legend's row
    rows = plot_h - 1  # the x ticks' row
    spare = 0
    if not any((rows - 1) % k == 0 for k in range(2, 7)) and rows > 2:
        spare, rows, plot_h = 1, rows - 1, plot_h - 1  # 8 or 12 rows: one left blank, so ticks land on rows
    return width, height, plot_h, rows, spare


def _pieces(view: BenchView | ChartInputs, drawn: dict[str, list[tuple[float, float]]], now_s: float,
            span_s: int) -> list[tuple[str, str, list[tuple[float, float]]]]:
    """Each line the chart draws, in plotext's order (a later one over an earlier one): name, axis, points."""
    out = []
    for name, points in drawn.items():
        side = "right" if name == "GPU util %" else "left"
        # The server's series in pieces: no line across a span where no server existed (issue 20).
        for piece in (view.server_segments(now_s, span_s) if name == "server gen tok/s" else [points]):
            out.append((name, side, piece))
    return out


NO_THROUGHPUT = ("no throughput yet: the server's own gen throughput appears here from its log,\n"
                 "a benchmark's output tokens/s beside it (b: quick run, B: sweep).")


def _set_time_axis(plt: Any, width: int, plot_h: int, span_s: int) -> None:
    plt.clf()
    plt.limitsize(False, False)  # the pane's size, not the terminal's plotext guesses (80 in tests)
    plt.plotsize(width, plot_h)
    plt.theme("clear")
    plt.frame(False)
    plt.xlim(-span_s, 0)
    plt.xticks([-span_s, -span_s * 3 // 4, -span_s // 2, -span_s // 4, 0],
               [f"-{span_s}s", f"-{span_s * 3 // 4}s", f"-{span_s // 2}s", f"-{span_s // 4}s", "now"])


def plotext_chart(view: BenchView | ChartInputs, width: int, height: int, now_s: float, span_s: int = 120) -> Text:
    """The time chart drawn wholly by plotext (lines, marks and axes in one build): what `chart`
    draws, cell for cell (tests/ui/test_a_scrolling_chart_is_drawn_without_plotext.py holds them equal)."""
    drawn = {name: points for name, points in view.series(now_s, span_s).items() if len(points) >= 2}
    if not drawn:
        return Text(NO_THROUGHPUT, style=DIM)
    width, _height, plot_h, rows, spare = _chart_rows(width, height)
    _set_time_axis(plt, width, plot_h, span_s)
    left: list[float] = []
    for name, side, piece in _pieces(view, drawn, now_s, span_s):
        xs, ys = zip(*piece, strict=True)
        plt.plot(list(xs), list(ys), color=COLORS[name], marker="braille", yside=side)
        if side == "left":
            left.extend(ys)
    left_w = _axis(plt, left, "left", rows=rows) if left else 0
    right_w = 0
    if "GPU util %" in drawn:  # utilization is 0-100 %, whatever the samples
        right_w = _axis(plt, [], "right", "%", fixed=(0.0, 100.0), rows=rows)
    shown = [(t - now_s, label) for t, label in view.marks if -span_s <= t - now_s <= 0.0]
    for x, _label in shown:
        plt.vline(x, "yellow")
    body = Text.from_ansi(plt.build().rstrip("\n"), no_wrap=True)
    return _finish(body, drawn, shown, left_w, right_w, width, rows, spare, span_s)


def _finish(body: Text, drawn: dict[str, Any], shown: list[tuple[float, str]], left_w: int, right_w: int,
            width: int, rows: int, spare: int, span_s: int) -> Text:
    """The marks' labels written in, the blank row, the legend above."""
    plot_lo, plot_hi = plot_columns(body, left_w, width - right_w - 1)
    cols = [_snap(body, plot_lo + round((x + span_s) / span_s * (plot_hi - plot_lo)), rows) for x, _ in shown]
    body = overlay_marks(body, [(c, label) for c, (_, label) in zip(cols, shown, strict=True)],
                         plot_lo + 1, plot_hi, rows)  # a cell's gap after the axis' labels
    if spare:
        body = Text("\n", no_wrap=True).join([Text(""), body])
    names = [n for n in ("server gen tok/s", "client tok/s") if n in drawn]
    top = legend([(n, LEGEND_COLORS[n]) for n in names],
                 [("GPU util %", LEGEND_COLORS["GPU util %"])] if "GPU util %" in drawn else [], width)
    return Text("\n", no_wrap=True).join([top, body])


class _Frame:
    """A time chart's picture without its lines and marks, as plotext built it (labels, ticks, the
    empty canvas) with where its canvas lies, its y limits and each series' colour: enough to draw
    the lines and marks on a copy the way plotext does (`_draw_on`), without plotext."""

    def __init__(self) -> None:
        sub = plotext_core._figure.monitor
        m = sub.matrix
        self.rows, self.cols = m.rows, m.cols
        self.marker = [row[:] for row in m.marker]
        self.fullground = [row[:] for row in m.fullground]
        self.style = [row[:] for row in m.style]
        self.background = [row[:] for row in m.background]
        self.col_start, self.row_start = m.Cols_canvas.start, m.Rows_canvas.start
        self.width_canvas, self.height_canvas = len(m.Cols_canvas), len(m.Rows_canvas)
        self.xlim = list(sub.xlim[0])
        self.ylim = {"left": list(sub.ylim[0]), "right": list(sub.ylim[1])}
        self.colors = [(sub.color[s][0], sub.style[s][0]) for s in range(len(sub.x))]  # one per series, in order
        self.vcolor = sub.vcolors[0][0] if sub.vcolors[0] else None


_FRAMES: OrderedDict[tuple[object, ...], _Frame] = OrderedDict()
_STYLES: dict[tuple[Any, Any, Any], Any] = {}
_BRAILLE: dict[int, str] = {}


def _frame(width: int, plot_h: int, span_s: int, axes: tuple[Any, Any], names: tuple[tuple[str, str], ...]) -> _Frame:
    """The frame for these sizes, axes and series, built by plotext once and kept (the 8 last)."""
    key = (width, plot_h, span_s, axes, names)
    frame = _FRAMES.get(key)
    if frame is not None:
        _FRAMES.move_to_end(key)
        return frame
    _set_time_axis(plt, width, plot_h, span_s)
    outside = -10.0 * span_s  # a stand-in point per series left of the plot: plotext leaves it out
    for name, side in names:
        plt.plot([outside], [(axes[0] if side == "left" else axes[1])[0]], color=COLORS[name], marker="braille",
                 yside=side)
    for side, axis in zip(("left", "right"), axes, strict=True):
        if axis is not None:
            _set_axis(plt, side, (axis[0], axis[1], list(axis[2]), list(axis[3])))
    plt.vline(outside, "yellow")  # off the matrix too: only its colour is kept, for the marks
    plt.build()
    frame = _FRAMES[key] = _Frame()
    while len(_FRAMES) > 8:
        _FRAMES.popitem(last=False)
    return frame


def _braille_cells(xs: list[float], ys: list[float], xlim: list[float], ylim: list[float], wc: int,
                   hc: int) -> dict[tuple[int, int], str]:
    """One line's braille cells on a canvas of `wc` x `hc` cells, the way plotext 5 draws it
    (`_build.py`: its data to dots, `get_lines` between them, `hd_group`, `remove_outsiders`): its
    own function for the dots, its lines between them and the grouping into cells done here (plotext's
    took 8 of a picture's 13 ms)."""
    if not _BRAILLE:
        for code, char in ut.braille_codes.items():
            _BRAILLE[sum(bit << i for i, bit in enumerate(code))] = char
    x = ut.get_matrix_data(xs, xlim, 2 * wc)
    y = ut.get_matrix_data(ys, ylim, 4 * hc)
    bits: dict[tuple[int, int], int] = {}

    def dot(xi: int, yi: int) -> None:
        cell = (xi // 2, yi // 4)
        bits[cell] = bits.get(cell, 0) | 1 << ((3 - yi % 4) * 2 + xi % 2)

    for n in range(len(x) - 1):  # `get_line`: a dot per step of the longer side, truncated as plotext does
        x0, x1, y0, y1 = x[n], x[n + 1], y[n], y[n + 1]
        steps = max(abs(x1 - x0), abs(y1 - y0))
        if steps == 0:
            continue  # the same dot twice: plotext draws it as the next segment's first (or the last)
        sx, sy = (x1 - x0) / steps, (y1 - y0) / steps
        for i in range(steps):  # its last dot is the next segment's first
            dot(int(x0 + i * sx), int(y0 + i * sy))
    if x:
        dot(x[-1], y[-1])
    return {cell: _BRAILLE[b] for cell, b in bits.items() if 0 <= cell[0] < wc and 0 <= cell[1] < hc}


def _draw_on(frame: _Frame, lines: list[tuple[int, list[tuple[float, float]], str]], marks: list[float]) -> Text:
    """The frame with the marks' vertical lines, then each line over them (plotext's order), as
    the Rich text `Text.from_ansi(plotext's build)` gives."""
    marker = [row[:] for row in frame.marker]
    fullground = [row[:] for row in frame.fullground]
    style = [row[:] for row in frame.style]
    wc, hc, c0, r0 = frame.width_canvas, frame.height_canvas, frame.col_start, frame.row_start
    for col in ut.get_matrix_data(marks, frame.xlim, wc):
        for row in range(r0, r0 + hc):
            if 0 <= col + c0 < frame.cols and 0 <= row < frame.rows:
                marker[row][col + c0] = "│"
                if frame.vcolor is not None:
                    fullground[row][col + c0] = frame.vcolor
    for signal, points, side in lines:
        color, st = frame.colors[signal]
        xs = [p[0] for p in points]
        ys = [p[1] for p in points]
        for (col, row), char in _braille_cells(xs, ys, frame.xlim, frame.ylim[side], wc, hc).items():
            marker[row + r0][col + c0] = char
            fullground[row + r0][col + c0] = color
            if st is not None:
                style[row + r0][col + c0] = st
    body = Text(no_wrap=True)
    background = frame.background
    for r in range(frame.rows - 1, -1, -1):
        if r != frame.rows - 1:
            body.append("\n")
        row_m, row_f, row_s, row_b = marker[r], fullground[r], style[r], background[r]
        start = 0
        for c in range(1, frame.cols + 1):
            if c == frame.cols or (row_f[c], row_s[c], row_b[c]) != (row_f[start], row_s[start], row_b[start]):
                colors = (row_f[start], row_s[start], row_b[start])
                rich = _STYLES.get(colors)
                if rich is None:
                    decoded = Text.from_ansi(ut.colors_to_ansi(*colors) + "x")
                    rich = _STYLES[colors] = decoded.spans[0].style if decoded.spans else None
                body.append("".join(row_m[start:c]), style=rich)
                start = c
    return body


def chart(view: BenchView | ChartInputs, width: int, height: int, now_s: float, span_s: int = 120) -> Text:
    """The time chart as Rich text: a legend row naming each axis, then the plot, the swap's marks
    labelled inside it. plotext draws the axes once per size and axes (`_frame`); the lines and the
    marks are drawn here the way plotext draws them (`plotext_chart` draws it all, cell for cell
    the same), so a chart whose points only scrolled or grew is drawn without plotext (issue 36:
    plotext's build was 13 ms a picture at 70x12; plotext keeps global state: UI thread only)."""
    drawn = {name: points for name, points in view.series(now_s, span_s).items() if len(points) >= 2}
    if not drawn:
        return Text(NO_THROUGHPUT, style=DIM)
    width, _height, plot_h, rows, spare = _chart_rows(width, height)
    pieces = _pieces(view, drawn, now_s, span_s)
    left = [y for _name, side, piece in pieces if side == "left" for _x, y in piece]
    axes = (_axis_ticks(left, "left", rows=rows) if left else None,
            _axis_ticks([], "right", "%", fixed=(0.0, 100.0), rows=rows) if "GPU util %" in drawn else None)
    key_axes = tuple(None if a is None else (a[0], a[1], tuple(a[2]), tuple(a[3])) for a in axes)
    frame = _frame(width, plot_h, span_s, key_axes, tuple((name, side) for name, side, _ in pieces))
    shown = [(t - now_s, label) for t, label in view.marks if -span_s <= t - now_s <= 0.0]
    body = _draw_on(frame, [(i, piece, side) for i, (_name, side, piece) in enumerate(pieces)], [x for x, _ in shown])
    left_w = len(axes[0][3][0]) if axes[0] is not None else 0
    right_w = len(axes[1][3][0]) if axes[1] is not None else 0
    return _finish(body, drawn, shown, left_w, right_w, width, rows, spare, span_s)


def _at_resolution(points: list[tuple[float, float]], dot_s: float) -> tuple[tuple[float, float], ...]:
    """A series at the chart's resolution: each x on its braille dot (the newest point of a dot
    wins), and a run of equal values kept by its two ends (a line through the points between
    them is the same line)."""
    by_dot: dict[int, float] = {}
    for x, v in points:
        by_dot[round(x / dot_s)] = v
    dots = sorted(by_dot.items())
    kept = [(d, v) for i, (d, v) in enumerate(dots)
            if i == 0 or i == len(dots) - 1 or not (dots[i - 1][1] == v == dots[i + 1][1])]
    return tuple((d * dot_s, v) for d, v in kept)


class ChartInputs:
    """What the time chart draws, at its own resolution (issue 23: a chart is not rebuilt when
    only time passed within it): "now" moves in braille dots (two per column), each series'
    points sit on their dot. `key` is all a drawing depends on, so equal keys draw the same
    picture and the pane keeps the pictures it drew by key. Passed to `chart` as its view."""

    def __init__(self, view: BenchView, width: int, now_s: float, span_s: int = 120) -> None:
        self.dot_s = dot = span_s / max(2, 2 * width)  # finer than the plot's own dots: never coarser
        self.now_s = now = math.ceil(now_s / dot) * dot  # "now" at most one dot ahead
        self._series = {name: list(_at_resolution(points, dot)) for name, points in view.series(now, span_s).items()}
        self._segments = [list(_at_resolution(piece, dot)) for piece in view.server_segments(now, span_s)]
        self.marks = [(now + round((t - now) / dot) * dot, label) for t, label in view.marks]
        self.key = (span_s, tuple((name, tuple(points)) for name, points in self._series.items()),
                    tuple(tuple(piece) for piece in self._segments),
                    tuple((round((t - now) / dot), label) for t, label in self.marks))

    @property
    def shape(self) -> tuple[object, ...]:
        """The key with the start of each flat series left out: two inputs of equal shape draw the
        same flat lines, only starting at another time (a quiet host's GPU utilization while its
        history fills the chart's two minutes). A series with two values keeps every point."""
        def flat(points: list[tuple[float, float]]) -> object:
            values = {v for _x, v in points}
            # Its end is kept: a line that stopped short of "now" (no sample since) is drawn as such.
            return ("flat", values.pop(), points[-1][0] >= -2 * self.dot_s) if len(values) == 1 else tuple(points)

        return (self.key[0], tuple((name, flat(points)) for name, points in self._series.items()),
                tuple(flat(piece) for piece in self._segments), self.key[3])

    def series(self, now_s: float, span_s: int) -> dict[str, list[tuple[float, float]]]:
        return self._series

    def server_segments(self, now_s: float, span_s: int) -> list[list[tuple[float, float]]]:
        return self._segments


MARKED_POINTS = 8


def sweep_chart(view: BenchView, width: int, height: int) -> Text:
    """Output tokens/s and p99 TTFT against concurrency, for a sweep."""
    pts = view.sweep_points()
    if len(pts) < 2:
        return Text("the sweep chart needs two finished runs at different concurrency (B runs 1, 4, 16, 64)",
                    style=DIM)

    # Concurrency doubles or quadruples from run to run: a log axis spaces 1, 4, 16, 64 evenly.
    xs = [math.log2(p[0]) for p in pts]
    width, height = max(20, width), max(7, height)
    plot_h = height - 1  # the legend's row
    rows = plot_h - 2  # the x ticks' and the x label's rows
    plt.clf()
    plt.limitsize(False, False)
    plt.plotsize(width, plot_h)
    plt.theme("clear")
    plt.frame(False)
    plt.plot(xs, [p[1] for p in pts], color="green", marker="braille")
    plt.plot(xs, [p[2] for p in pts], color="yellow", marker="braille", yside="right")
    if len(pts) <= MARKED_POINTS:  # a few runs: each one a visible point, not only a smooth curve
        plt.scatter(xs, [p[1] for p in pts], color="green", marker="●")
        plt.scatter(xs, [p[2] for p in pts], color="yellow", marker="●", yside="right")
    _axis(plt, [p[1] for p in pts], "left", rows=rows)
    _axis(plt, [p[2] for p in pts], "right", "ms", rows=rows)
    plt.xticks(xs, [str(p[0]) for p in pts])
    plt.xlabel("concurrency (log scale)")
    top = legend([("output tok/s", "green")], [("p99 TTFT", "yellow")], width)
    return Text("\n", no_wrap=True).join([top, Text.from_ansi(plt.build().rstrip("\n"), no_wrap=True)])


def _fmt(v: Any, spec: str = ".1f") -> str:
    return "–" if v is None else format(v, spec) if isinstance(v, (int, float)) else str(v)


def percentile_chart(pct: dict[str, tuple[float, float, float]], width: int, height: int) -> Text:
    """The live run's TTFT and ITL at p50, p90 and p99, as grouped bars (ms)."""
    plt.clf()
    plt.plotsize(max(20, width), max(5, height))
    plt.theme("clear")
    plt.frame(False)
    names = list(pct)
    plt.multiple_bar(names, [[pct[n][i] for n in names] for i in range(3)], labels=["p50", "p90", "p99"],
                     color=["cyan", "blue", "white"])  # percentiles, not severities
    plt.ylabel("ms")
    return Text.from_ansi(plt.build())


def results_table(view: BenchView, width: int, height: int = 8) -> RenderableType:
    if view.live is not None:
        run = view.live
        t = Text()
        t.append(f"RUNNING {run.label}\n", style="bold black on cyan")
        t.append(f"{run.done}/{run.total} done", style="bold")
        t.append(f"  {run.failed} failed\n", style="bold red" if run.failed else DIM)
        pct = view.live_percentiles()
        if pct:
            for name, (p50, _p90, p99) in pct.items():
                t.append(f"{name:<5}", style=DIM)
                t.append(f" p50 {p50:7.1f}  p99 {p99:7.1f} ms\n")
            if height > 6:
                return Group(t, percentile_chart(pct, width, height - 4))
        return t
    if view.error:
        return Text(f"✗ {view.error}", style="bold red")
    rows = view.results[-4:] if view.results else []
    caption = None
    tags: dict[int, str] = {}
    # The core's before/after pair (like workloads, finished runs, this host): the run before the
    # swap beside the one after, on the pane itself (issue 35 item 5), not only in the plan and report.
    pair, why_not = view.comparison()
    if rows and pair and pair[1] == rows[-1]:
        rest = [r for r in rows[:-1] if r != pair[0]][-2:]
        rows = [pair[0], *rest, rows[-1]]
        tags = {0: "before", len(rows) - 1: "after"}
        caption = f"before/after on {pair[1].get('host') or 'this host'}: {_when(pair[0])} → {_when(pair[1])}"
    elif not rows:
        # Nothing run this session: the host's last run beside its last run of another model (the swap).
        if pair:
            rows = list(pair)
            tags = {0: "before", 1: "after"}
            caption = f"before/after on {pair[1].get('host') or 'this host'}: {_when(pair[0])} → {_when(pair[1])}"
        else:
            rows = [r for r in view.history if is_result(r) and (view.host is None or r.get("host") == view.host)][-1:]
            if rows:
                caption = f"last run on {rows[0].get('host') or 'this host'}, {_when(rows[0])}"
                if why_not:
                    caption += f"; before/after {why_not}"
    if not rows:
        return Text("No runs yet.\nb: 16 prompts at concurrency 4 (256/256 tokens)\n"
                    "B: sweep 1, 4, 16, 64 at 1k/1k (the story's)\nruns are saved to bench.jsonl", style=DIM)
    return _table(view, rows, tags, caption)


def _peak(r: dict[str, Any]) -> Any:
    """The peak output rate, only when it is one: a record whose "peak" is below its own mean
    (bench_serving's whole-second bins, an older record) shows it as unknown, never as a peak."""
    peak, mean = r.get("max_output_tokens_per_s"), r.get("output_throughput")
    if isinstance(peak, (int, float)) and isinstance(mean, (int, float)) and peak < mean * (1 - 1e-6):
        return None
    return peak


MODEL_CELLS = 14  # a column's model name: the figures under it are narrower


def short_model(name: str, width: int) -> str:
    """A model's name in `width` cells for a column head: its last path part ("Qwen3.5-122B-A10B" of
    "Qwen/Qwen3.5-122B-A10B"); too long, its end from a word's start behind "…" ("…122B-A10B", what
    tells two sizes of one family apart), never a word cut ("n3.5-122B-A10B" was)."""
    name = name.rstrip("/").rsplit("/", 1)[-1]
    if len(name) <= width:
        return name
    for i, ch in enumerate(name):
        if ch in "-_" and 0 < len(name) - i - 1 <= width - 1:
            return "…" + name[i + 1:]
    return fit_name(name, width)


def _table(view: BenchView, rows: list[dict[str, Any]], tags: dict[int, str], caption: str | None) -> RenderableType:
    metrics = [("req/s", "request_throughput", ".2f"), ("out tok/s", "output_throughput", ",.0f"),
               ("peak tok/s", "max_output_tokens_per_s", ",.0f"), ("TTFT p50 ms", "median_ttft_ms", ",.0f"),
               ("TTFT p99 ms", "p99_ttft_ms", ",.0f"), ("TPOT p50 ms", "median_tpot_ms", ".1f"),
               ("ITL p99 ms", "p99_itl_ms", ".1f"), ("accept len", "accept_length", ".2f"),
               ("failed", "failed", "d")]
    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold", expand=False,
                  caption=caption, caption_style=DIM, caption_justify="left")
    # The labels never shrink ("out to…", two rows of "TTFT p…"); the figures give way instead.
    table.add_column("", style=DIM, no_wrap=True, min_width=max(len(m[0]) for m in metrics))
    for i, r in enumerate(rows):
        label = f"c={r.get('max_concurrency') or '∞'}"
        if r.get("stopped"):
            label += " stopped"
        if i in tags:
            label = f"{tags[i]} {label}"
        model = short_model(str(r.get("model") or ""), MODEL_CELLS)
        table.add_column(f"{label}\n{model}", justify="right", overflow="fold",
                         header_style="bold yellow" if r.get("stopped") else "bold")
    for label, key, spec in metrics:
        values = [_fmt(_peak(r) if key == "max_output_tokens_per_s" else r.get(key), spec) for r in rows]
        style = "bold red" if key == "failed" and any(r.get("failed") for r in rows) else None
        table.add_row(label, *values, style=style)
    if view.stopped_note:
        return Group(Text(view.stopped_note, style="yellow"), table)
    return table


def _when(run: dict[str, Any]) -> str:
    t = run.get("timestamp")
    if isinstance(t, (int, float)):
        return time.strftime("%m-%d %H:%M", time.localtime(t))
    return str(run.get("time") or "?")[:16]


class BenchPane(PaneFrame, Horizontal, can_focus=True):
    DEFAULT_CSS = """
    BenchPane { border: round $primary 40%; border-title-color: $text; border-title-style: bold;
        height: 1fr; padding: 0 1; }
    BenchPane:focus-within, BenchPane:focus { border: round $accent; }
    BenchPane #bench-chart { width: 1fr; height: 1fr; }
    BenchPane #bench-table { width: auto; min-width: 34; max-width: 50%; height: 1fr; padding-left: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("b", "run_quick", "Quick bench"),
        Binding("B", "run_sweep", "Sweep", key_display="B"),
        Binding("x", "stop", "Stop bench"),
        Binding("c", "toggle_chart", "Time/sweep chart"),
    ]
    PANE_KEY = "5"
    PANE_TITLE = "Benchmark"

    class RunRequested(Message):
        def __init__(self, kind: str) -> None:
            super().__init__()
            self.kind = kind

    class StopRequested(Message):
        pass

    def __init__(self, view: BenchView, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.view = view
        self._drawn_version = -1
        self._table_version: tuple[object, ...] | None = None
        self._drawn_at = 0.0
        self._table_drawn_at = 0.0
        self.sweep_mode = False
        self._chart_key: tuple[object, ...] | None = None
        self._chart_empty = True
        self._pictures: OrderedDict[tuple[object, ...], Text] = OrderedDict()  # drawn charts by their inputs
        self.chart_builds = 0  # pictures drawn anew (plotext only for new axes: `chart`; tests read it)
        self._inputs: ChartInputs | None = None  # what the last picture was drawn from (time chart)
        self._drawn_shape: tuple[object, ...] | None = None
        self._shape_memo: tuple[tuple[int, int, int], tuple[object, ...] | None] | None = None
        self.chart_draws = 0  # chart repaints asked of Textual (tests read it)
        self._laid_out_for: tuple[object, ...] | None = None  # the sizes it was last laid out for
        self.table_draws = 0  # table repaints asked of Textual (tests read it)

    def compose(self) -> Any:
        yield Static(id="bench-chart")
        yield Static(id="bench-table")

    def on_mount(self) -> None:
        self.border_title = f"{self.PANE_KEY} {self.PANE_TITLE}"
        self.border_subtitle = "c sweep chart · b run · B sweep · x stop"
        # No timer of its own (issue 33/36: one refresh path): the host screen's flush calls
        # `state_changed` when the benchmark's state moved, and its one age timer calls
        # `update_age` once `age_due_s` has come (a throttled change, the time axis scrolling).
        self.redraw(force=True)

    # While a run goes, its table changes with every finished request (40 a second at c=32) and
    # holds a plotext chart: at most twice a second then, like the time chart.
    TABLE_EVERY_S = 0.5
    LIVE_CHART_EVERY_S = 0.5
    IDLE_CHART_EVERY_S = 5.0  # plotext rebuilds cost 5-100 ms; enough for the time axis to scroll
    # Flat lines that only grew longer since the last picture (no new value, no mark: a quiet
    # host's GPU utilization filling the chart's two minutes) are drawn again this often: their
    # start is drawn at most 30 s late, their values and "now" never (issue 36 item 1: 6 plotext
    # rebuilds and repaints in 30 s of a quiet host, the chart a fifth of its console's CPU).
    FLAT_GROWTH_EVERY_S = 30.0

    def redraw(self, force: bool = False) -> None:
        """Draw what changed, no more often than its throttle: the table at every change (twice a
        second at most while a run goes); the chart twice a second while a benchmark runs, every
        5 s otherwise, and then only while something on it moves with time. What is held back is
        drawn when `age_due_s` comes (the screen's age timer)."""
        now = self.now()
        if now < self._drawn_at or now < self._table_drawn_at:  # a replay seeked back: nothing held
            force = True
        signature = self.view.table_signature()
        live_throttled = self.view.live is not None and now - self._table_drawn_at < self.TABLE_EVERY_S
        if force or (signature != self._table_version and not live_throttled):
            self._table_version = signature
            self._table_drawn_at = now
            table = self.query_one("#bench-table", Static)
            size = table.content_size
            self.table_draws += 1
            table.update(results_table(self.view, size.width or 40, size.height or 8))
            # The table's width is its own (auto): a column more takes it from the chart, which is
            # drawn at its width (layout=False): drawn again once laid out, if its size moved (a
            # third run drew the table over the chart's right axis until something else redrew it).
            self.call_after_refresh(self.relayout)
        due = self._chart_due(now)
        if (force or (due is not None and due <= now)) and (force or self.display):
            self._draw_chart(now)
        self.age_due_s = self._next_due(now)

    def _chart_due(self, now: float) -> float | None:
        """When the chart should next be drawn; None: nothing on it can change until an event."""
        moved = self.view.version != self._drawn_version
        if self._chart_empty and moved:
            # A chart still saying "no throughput yet" is drawn as soon as its first points are
            # there, not up to 5 s later (a fresh 80x24 console showed it beside the log's 232 tok/s).
            return now
        if not moved and (self._chart_empty or self.sweep_mode):
            return None  # an empty chart, or the sweep's: time does not move it
        # Moved, or not (the time axis scrolls its points away; a flat line grows with samples
        # that move no version, `BenchView.add_gpu`): the usual cadence, unless the picture is
        # the same flat lines, only longer. The shape is looked at only once that cadence has
        # come (once per 5 s, not at every sample): until then its time is the answer either way.
        every = self.LIVE_CHART_EVERY_S if self.view.live is not None else self.IDLE_CHART_EVERY_S
        if self.view.live is None and not self.sweep_mode and self._drawn_shape is not None \
                and now >= self._drawn_at + every and self._shape(now) == self._drawn_shape:
            return self._drawn_at + self.FLAT_GROWTH_EVERY_S  # the same flat lines, longer
        return self._drawn_at + every

    def _next_due(self, now: float) -> float | None:
        dues = [d for d in (self._chart_due(now),) if d is not None]
        if self.view.table_signature() != self._table_version:
            dues.append(self._table_drawn_at + self.TABLE_EVERY_S)
        return min(dues) if dues else None

    def _shape(self, now: float) -> tuple[object, ...] | None:
        """The time chart's inputs' shape now (`ChartInputs.shape`), once per state version."""
        size = self.query_one("#bench-chart", Static).content_size
        memo = (self.view.version, size.width or 60, int(now))
        if self._shape_memo is None or self._shape_memo[0] != memo:
            self._shape_memo = (memo, ChartInputs(self.view, memo[1], now).shape)
        return self._shape_memo[1]

    def _draw_chart(self, now: float) -> None:
        self._drawn_version, self._drawn_at = self.view.version, now
        chart_widget = self.query_one("#bench-chart", Static)
        size = chart_widget.content_size
        w, h = size.width or 60, size.height or 8
        drawn = self._picture(w, h)
        self._drawn_shape = None if self.sweep_mode or self._inputs is None else self._inputs.shape
        self._chart_empty = drawn.plain.startswith(("no throughput yet", "the sweep chart needs"))
        key = (drawn.plain, tuple(drawn.spans)) if isinstance(drawn, Text) else None
        if key is not None and key == self._chart_key:
            return  # the same picture: no repaint, no layout (an idle chart every 5 s)
        self._chart_key = key
        self.chart_draws += 1
        chart_widget.update(drawn, layout=False)  # the chart's size is the pane's, not its text's

    def update_age(self, now_s: float | None = None) -> None:
        """The screen's age timer: what was held back is due (or the clock went back)."""
        self.redraw()

    def _picture(self, w: int, h: int) -> Text:
        """The chart for this size, from the pictures already drawn when its inputs at the chart's
        resolution are the same (a flat series scrolling draws the same picture: no plotext)."""
        if self.sweep_mode:
            inputs: Any = None
            key: tuple[object, ...] = ("sweep", w, h, tuple(self.view.sweep_points()))
        else:
            inputs = ChartInputs(self.view, w, self.view.now())
            key = ("time", w, h, inputs.key)
        self._inputs = inputs
        picture = self._pictures.get(key)
        if picture is not None:
            self._pictures.move_to_end(key)
            return picture
        self.chart_builds += 1
        picture = sweep_chart(self.view, w, h) if inputs is None else chart(inputs, w, h, inputs.now_s)
        self._pictures[key] = picture
        while len(self._pictures) > 8:
            self._pictures.popitem(last=False)
        return picture

    def state_changed(self, state: Any, source: str) -> None:
        """The benchmark's state moved (the pane was built with it: `state.bench`)."""
        self.redraw()

    def relayout(self) -> None:
        """Laid out again (maximized, restored, the plan docked): drawn again only if its size
        changed (the screen asks every pane after each such change, most keep their size)."""
        sizes = tuple(self.query_one(f"#bench-{part}", Static).content_size for part in ("chart", "table"))
        if sizes != self._laid_out_for:
            self._laid_out_for = sizes
            self.redraw(force=True)

    def action_run_quick(self) -> None:
        self.post_message(self.RunRequested("quick"))

    def action_run_sweep(self) -> None:
        self.post_message(self.RunRequested("sweep"))

    def action_toggle_chart(self) -> None:
        self.sweep_mode = not self.sweep_mode
        self.border_subtitle = ("c time chart" if self.sweep_mode else "c sweep chart") + " · b run · B sweep · x stop"
        self.redraw(force=True)

    def action_stop(self) -> None:
        self.post_message(self.StopRequested())
