"""A frame of the log view works out the view's width and style once for all its rows, not once
per row (issue 36: Textual's `rich_style` walks the widget's ancestors; per row it cost the demo's
log as much as the rest of its rows' rendering). The rows drawn are the same either way."""

from __future__ import annotations

from typing import Any

from textual.geometry import Region

from console.core.state import HostInfo, HostState, LogAppended
from console.host.parsers.sglang_log import parse_line
from console.ui.panes.log import LogPane
from console.ui.panes.log_view import LogLines
from tests.kit.hosts import wait_for

DECODE = "[2026-04-08 14:05:{s:02d} TP0] Decode batch, #running-req: 48, gen throughput (token/s): {n}.00"


async def test_a_log_frame_works_out_its_style_once_for_all_its_rows(monkeypatch: Any) -> None:
    from console.ui.app import ConsoleApp

    state = HostState("gpu-01", label="gpu-01")
    state.apply(HostInfo("gpu-01", "gpu-01", log_label="journal: sglang.service"))
    app = ConsoleApp(state, None)
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.query_one(LogPane).log_widget
        state.apply(LogAppended(state.host, tuple(parse_line(DECODE.format(s=i % 60, n=i)) for i in range(200))))
        await wait_for(lambda: view.line_count == 200, 30)
        await pilot.pause()
        rows = view.size.height
        assert rows >= 5
        region = Region(0, 0, view.size.width, rows)
        one_by_one = [view.row_strip(view.scroll_offset.y + y) for y in range(rows)]
        asked: list[int] = []
        real = LogLines.rich_style.fget  # type: ignore[attr-defined]
        monkeypatch.setattr(LogLines, "rich_style", property(lambda self: (asked.append(1), real(self))[1]))
        view._styles_cache.clear()
        frame = view.render_lines(region)
        assert len(frame) == rows and len(asked) <= 2, f"the style worked out {len(asked)} times for {rows} rows"
        assert any("Decode batch" in mine.text for mine in one_by_one)
        for strip, mine in zip(frame, one_by_one, strict=True):  # the same rows, drawn the same
            assert mine.text.strip() in strip.text
