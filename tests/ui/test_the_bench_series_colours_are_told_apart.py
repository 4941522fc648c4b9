"""The benchmark chart's server line (cyan) and GPU utilization (256-colour 33, dodger blue) read as
one colour on the demo's screen: 28° of hue apart. Every two series of the chart differ by at least
60° of hue, or one is a grey beside a colour; and none is red or magenta (those say error)."""

from __future__ import annotations

import colorsys
import itertools

from rich.color import Color

from console.ui.panes.bench import COLORS, LEGEND_COLORS


def _hsv(style: str) -> tuple[float, float, float]:
    r, g, b = Color.parse(style).get_truecolor()
    return colorsys.rgb_to_hsv(r / 255, g / 255, b / 255)


def test_every_two_series_are_told_apart() -> None:
    for (a, sa), (b, sb) in itertools.combinations(LEGEND_COLORS.items(), 2):
        (ha, sat_a, _), (hb, sat_b, _) = _hsv(sa), _hsv(sb)
        hue_apart = min(abs(ha - hb), 1 - abs(ha - hb)) * 360
        assert hue_apart >= 60 or abs(sat_a - sat_b) >= 0.5, (a, sa, b, sb, round(hue_apart))


def test_the_chart_and_its_legend_agree_and_say_no_error() -> None:
    for name, style in LEGEND_COLORS.items():
        drawn = COLORS[name]
        assert style == (f"color({drawn})" if isinstance(drawn, int) else drawn), name
        assert not any(alarm in style for alarm in ("red", "magenta")), name
