"""Issue 23 item 3: a new log line costs a repaint of the log view, not a layout of the whole
screen. Textual's `virtual_size` asks for a layout at every change; the view's size comes from
the grid, so only a scrollbar appearing or going needs one. The status line above the tail is
laid out again only when its row count changes. (The demo did 33 full layouts in 20 s, one per
line.)"""

from __future__ import annotations

from typing import Any

from textual.app import App, ComposeResult

from console.ui.panes.log import LogPane
from console.host.parsers.sglang_log import parse_line


class OnePane(App[None]):
    def compose(self) -> ComposeResult:
        yield LogPane("journal: test.service", id="log-pane")


def _line(i: int) -> Any:
    return parse_line(f"[2026-01-01 10:00:{i % 60:02d} TP0] Decode batch, #running-req: {i}, gen throughput "
                      f"(token/s): {100 + i}.0, #queue-req: 0")


def _count_layouts(app: App[None]) -> list[int]:
    screen = app.screen
    layouts: list[int] = []
    real = screen._refresh_layout

    def counting(*a: Any, **k: Any) -> Any:
        if not k.get("scroll"):
            layouts.append(1)
        return real(*a, **k)

    screen._refresh_layout = counting  # type: ignore[method-assign]
    return layouts


async def test_lines_arriving_lay_nothing_out_once_the_scrollbar_is_there() -> None:
    app = OnePane()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(LogPane)
        log = pane.log_widget
        pane.add_events(tuple(_line(i) for i in range(100)))  # more than fit: the scrollbar appears
        await pilot.pause()
        await pilot.pause()
        layouts = _count_layouts(app)
        for i in range(100, 120):  # one line a frame, as a live server writes them
            pane.add_events((_line(i),))
            await pilot.pause()
        assert layouts == [], f"{len(layouts)} layouts for 20 lines"
        # and the view is right: following, the newest line at the bottom, every line there
        assert log.line_count == 120 and log.scroll_y == log.max_scroll_y
        bottom = log.render_line(log.scrollable_content_region.height - 1).text
        assert "#running-req: 119," in bottom, bottom


async def test_a_scrollbar_appearing_still_lays_the_view_out() -> None:
    app = OnePane()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(LogPane)
        log = pane.log_widget
        pane.add_events((_line(0),))
        await pilot.pause()
        assert not log.show_vertical_scrollbar
        pane.add_events(tuple(_line(i) for i in range(1, 100)))
        await pilot.pause()
        await pilot.pause()
        assert log.show_vertical_scrollbar and log.scroll_y == log.max_scroll_y > 0
