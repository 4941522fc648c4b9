"""The time chart's lines and marks are drawn by the console, on axes plotext drew once: a chart
whose points only scrolled (or grew) is drawn without a plotext build, and what it draws is, cell
for cell (character and style), what plotext draws from the same inputs (`plotext_chart`): where a
line enters from the left, where two series cross, where a mark's line lies, one-point pieces."""

from __future__ import annotations

import random
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text

from console.ui.panes import bench

_CONSOLE = Console(width=400, color_system="truecolor")


class _View:
    """What `chart` reads of a view: series and server pieces relative to "now", marks."""

    def __init__(self, series: dict[str, list[tuple[float, float]]], marks: list[tuple[float, str]],
                 pieces: list[list[tuple[float, float]]] | None = None) -> None:
        self._series, self.marks = series, marks
        self._pieces = pieces

    def series(self, now_s: float, span_s: int) -> dict[str, list[tuple[float, float]]]:
        return {name: [(t - now_s, v) for t, v in points if t - now_s <= 0.0]
                for name, points in self._series.items()}

    def server_segments(self, now_s: float, span_s: int) -> list[list[tuple[float, float]]]:
        if self._pieces is not None:
            return [[(t - now_s, v) for t, v in piece if t - now_s <= 0.0] for piece in self._pieces]
        return [self.series(now_s, span_s).get("server gen tok/s", [])]


def _cells(text: Text) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for line in text.split("\n"):
        for segment in line.render(_CONSOLE):
            out.extend((ch, segment.style or None) for ch in segment.text)
        out.append(("\n", None))
    return out


def _same(view: Any, width: int, height: int, now_s: float, span_s: int = 120) -> None:
    ours = bench.chart(view, width, height, now_s, span_s)
    theirs = bench.plotext_chart(view, width, height, now_s, span_s)
    assert ours.plain == theirs.plain, f"{width}x{height}:\n{ours.plain}\n---- plotext:\n{theirs.plain}"
    assert _cells(ours) == _cells(theirs), f"{width}x{height}: same characters, other styles"


def _random_view(rng: random.Random, span: int) -> _View:
    series: dict[str, list[tuple[float, float]]] = {}
    pieces = None
    if rng.random() < 0.85:  # from before the chart's left edge to now: a line entering from the left
        xs = sorted({round(rng.uniform(-1.6 * span, 0.0), 2) for _ in range(rng.randint(2, 50))} | {0.0})
        series["server gen tok/s"] = [(x, rng.choice([250.0, rng.uniform(0, 900)])) for x in xs]
        if rng.random() < 0.4:  # a span with no server: two pieces (one may hold a single point)
            cut = rng.randint(1, len(xs) - 1)
            pieces = [series["server gen tok/s"][:cut], series["server gen tok/s"][cut:]]
    if rng.random() < 0.4:
        xs = sorted({round(rng.uniform(-1.3 * span, 0.0), 1) for _ in range(rng.randint(2, 30))})
        if len(xs) >= 2:
            series["client tok/s"] = [(x, rng.uniform(0, 2000)) for x in xs]
    if rng.random() < 0.85:
        xs = sorted({round(rng.uniform(-1.2 * span, 0.0), 1) for _ in range(rng.randint(2, 150))})
        if len(xs) >= 2:
            series["GPU util %"] = [(x, rng.choice([0.0, 100.0, rng.uniform(0, 100)])) for x in xs]
    marks = [(rng.uniform(-1.2 * span, 0.5), rng.choice(["old server stopped", "ready"]))
             for _ in range(rng.randint(0, 3))]
    return _View(series, marks, pieces)


def test_the_chart_is_what_plotext_draws_cell_for_cell() -> None:
    rng = random.Random(36)
    for _ in range(40):
        span = rng.choice([60, 120, 300])
        _same(_random_view(rng, span), rng.randint(20, 110), rng.randint(4, 18), 0.0, span)


def test_a_line_from_left_of_the_chart_crossing_another_under_a_mark_is_what_plotext_draws() -> None:
    server = [(-150.0, 0.0), (-100.0, 800.0), (-60.5, 10.0), (-0.25, 640.0)]
    util = [(-130.0, 100.0), (-61.0, 0.0), (-59.0, 100.0), (-1.0, 50.0)]
    for width, height in ((20, 4), (76, 10), (97, 13)):
        _same(_View({"server gen tok/s": server, "GPU util %": util}, [(-60.0, "new server ready")]),
              width, height, 0.0)


def test_a_chart_that_scrolls_makes_no_plotext_call(monkeypatch: pytest.MonkeyPatch) -> None:
    import plotext

    rng = random.Random(7)
    series = {"server gen tok/s": [(float(t), 200 + rng.random() * 40) for t in range(0, 600, 2)],
              "GPU util %": [(float(t), 40 + rng.random() * 50) for t in range(600)]}
    view = _View(series, [(300.0, "new server ready")])
    bench.chart(view, 70, 12, 250.0)  # the axes, drawn once by plotext
    pictures = [bench.plotext_chart(view, 70, 12, 250.0 + k) for k in (1, 7, 30)]

    def refused(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("plotext called for a chart that only scrolled")

    monkeypatch.setattr(plotext, "build", refused)
    monkeypatch.setattr(plotext, "plot", refused)
    scrolled = [bench.chart(view, 70, 12, 250.0 + k) for k in (1, 7, 30)]
    for ours, theirs in zip(scrolled, pictures, strict=True):
        assert _cells(ours) == _cells(theirs)
    assert len({p.plain for p in scrolled}) == 3  # it did scroll
