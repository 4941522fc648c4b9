"""The virtual log view (issue 23 item 2, issue 20's "the log pane renders from the state's one
line store", issue 22 items 2, 13 and 18): rows come from `state.log_lines`, a flood costs one
sync per frame, the filter is smart-case and says "no line matches", escape clears then leaves,
the console's own polls are hidden by default, wrap breaks at word boundaries."""

from __future__ import annotations

import pytest

from console.core.state import LOG_LINES, HostInfo, HostState, LogAppended
from console.host.parsers.sglang_log import parse_line
from console.ui.panes.log import LogPane
from console.ui.panes.log_view import is_own_poll, wrap_rows
from tests.kit.hosts import wait_for
from tests.kit.screens import screen_text

DECODE = ("[2026-04-08 14:05:{s:02d} TP0] Decode batch, #running-req: 48, #full token: 412000, full token usage: "
          "0.11, gen throughput (token/s): {n}.00, #queue-req: 3")
POLL = '[2026-04-08 14:05:{s:02d}] INFO:     127.0.0.1:40052 - "GET /metrics HTTP/1.1" 200 OK'
CHAT = '[2026-04-08 14:05:{s:02d}] INFO:     127.0.0.1:40052 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
ERROR = "[2026-04-08 14:05:{s:02d} TP0] ERROR: scheduler hit an exception number {n}"
SHORT = "[2026-04-08 14:05:{s:02d}] line {n}"


def demo_state() -> HostState:
    state = HostState("gpu-01", label="gpu-01")
    state.apply(HostInfo("gpu-01", "gpu-01", log_label="journal: sglang.service"))
    return state


def lines(template: str, n: int, start: int = 0) -> tuple:
    return tuple(parse_line(template.format(s=i % 60, n=start + i)) for i in range(n))


def app_for(state: HostState):  # type: ignore[no-untyped-def]
    from console.ui.app import ConsoleApp

    return ConsoleApp(state, None)


async def test_the_pane_renders_from_the_states_store_and_a_flood_costs_one_sync() -> None:
    state = demo_state()
    app = app_for(state)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(LogPane)
        view = pane.log_widget
        await pilot.pause()
        syncs = view.syncs
        for batch in range(40):  # 20,000 lines in one turn of the loop: four times the store
            state.apply(LogAppended(state.host, lines(SHORT, 500, batch * 500)))
        await wait_for(lambda: view.line_count == LOG_LINES, 10)
        await pilot.pause(0.1)
        assert view.syncs == syncs + 1  # one sync (and one repaint) for the whole flood
        assert pane.lines is state.log_lines  # no copy of its own
        assert len(view.rows) <= LOG_LINES  # memory bounded by the store
        assert view.lines[-1].endswith("line 19999") and view.lines[0].endswith("line 15000")
        await wait_for(lambda: "line 19999" in screen_text(app), 10)  # the newest line on screen: following


async def test_reading_back_keeps_the_same_lines_while_the_store_moves_on() -> None:
    state = demo_state()
    app = app_for(state)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(LogPane)
        view = pane.log_widget
        state.apply(LogAppended(state.host, lines(SHORT, LOG_LINES)))
        await wait_for(lambda: view.line_count == LOG_LINES and view.scroll_y == view.max_scroll_y > 0, 10)
        view.focus()
        await pilot.press("pageup", "pageup")
        await pilot.pause(0.1)
        assert not pane.following
        top = view.row(int(view.scroll_y))[0]
        state.apply(LogAppended(state.host, lines(SHORT, 300, LOG_LINES)))  # 300 old lines leave the store
        await wait_for(lambda: pane.new_lines == 300, 10)
        assert view.row(int(view.scroll_y))[0] == top  # the reader's lines stay in view
        assert pane.new_lines == 300 and str(pane.border_subtitle).startswith("following: off, 300 new lines")


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_filter_is_smart_case_says_no_line_matches_and_escape_clears_then_leaves(size: tuple[int, int]) -> None:
    state = demo_state()
    app = app_for(state)
    async with app.run_test(size=size) as pilot:
        pane = app.query_one(LogPane)
        view = pane.log_widget
        state.apply(LogAppended(state.host, lines(DECODE, 30) + lines(ERROR, 2)))
        await wait_for(lambda: view.line_count == 32, 10)
        pane.focus()
        await pilot.press("4")  # maximized, as an operator reading the log would
        await pilot.press("slash", *"decode", "enter")
        await pilot.pause(0.1)
        assert pane.filter_text == "decode" and view.line_count == 30  # lower case matches "Decode"
        assert app.focused is view  # focus left the box: n/N go to the log
        await pilot.press("slash")
        box = pane.query_one("#log-filter")
        await pilot.press(*("ctrl+u",), *"DECODE", "enter")  # a capital: exact case
        await pilot.pause(0.1)
        assert view.line_count == 0 and "no line matches" in screen_text(app)
        await pilot.press("slash")
        assert app.focused is box
        await pilot.press("escape")  # first escape: clears the filter, stays in the box
        await pilot.pause(0.1)
        assert pane.filter_text == "" and app.focused is box and app.screen.maximized is pane
        await pilot.press("escape")  # second: leaves the box (the grid stays maximized)
        await pilot.pause(0.1)
        assert app.focused is view and app.screen.maximized is pane
        await pilot.press("n")  # goes to the log, not into the box
        assert pane.query_one("#log-filter").value == "" and not pane.following
        await pilot.press("escape")  # nothing left to clear: escape restores the grid
        await pilot.pause(0.1)
        assert app.screen.maximized is None


async def test_the_consoles_own_polls_are_hidden_until_a() -> None:
    state = demo_state()
    app = app_for(state)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(LogPane)
        view = pane.log_widget
        state.apply(LogAppended(state.host, lines(POLL, 10) + lines(CHAT, 3) + lines(DECODE, 2)))
        await wait_for(lambda: view.total == 15, 10)
        assert view.line_count == 5 and not any("/metrics" in row for row in view.lines)
        assert "10 console requests hidden (a: show)" in str(pane.border_subtitle)
        pane.focus()
        await pilot.press("a")
        await pilot.pause(0.1)
        assert view.line_count == 15 and "own polls" not in str(pane.border_subtitle)
    assert is_own_poll(parse_line(POLL.format(s=1))) and not is_own_poll(parse_line(CHAT.format(s=1)))


def test_wrap_breaks_at_word_boundaries_and_keeps_every_character() -> None:
    line = DECODE.format(s=5, n=42)
    rows = wrap_rows(line, 40)
    assert all(len(r) <= 40 for r in rows) and "".join(r[2:] if i else r for i, r in enumerate(rows)) == line
    words = set(line.split())
    for row in rows:  # no word is cut in two
        assert all(word in words for word in row.split()), row


async def test_wrapped_rows_fit_the_pane_and_n_jumps_to_red_lines() -> None:
    state = demo_state()
    app = app_for(state)
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.query_one(LogPane)
        view = pane.log_widget
        state.apply(LogAppended(state.host, lines(DECODE, 20) + lines(ERROR, 1) + lines(DECODE, 20)))
        await wait_for(lambda: view.line_count == 41, 10)
        pane.focus()
        await pilot.press("w")
        await pilot.pause(0.1)
        assert view.wrap and all(len(row) <= view.size.width for row in view.lines)
        assert view.line_count > 41  # wrapped
        await pilot.press("n")
        await pilot.pause(0.1)
        target = view.error_rows()
        assert len(target) == 1 and int(view.scroll_y) == min(target[0], view.max_scroll_y)
        assert "red" in view.row(target[0])[1]


def _boot_summary():  # type: ignore[no-untyped-def]
    from console.domain.analysis.log_state import BootStep, LogSummary

    phases = ["launch", "weights loading", "weights loaded", "mamba cache", "kv cache", "cuda graphs",
              "cuda graphs done", "capacity", "http up", "ready"]
    boot = tuple(BootStep(p, None, float(i * 7), "") for i, p in enumerate(phases))
    return LogSummary("s", "serving", boot, None, None, None, None, None, None, (), 0, None)


def test_the_boot_timeline_takes_a_second_row_rather_than_being_cut() -> None:
    from console.model import Reading
    from console.ui.panes.log import format_status

    reading = Reading("log", _boot_summary(), 0.0)
    narrow = format_status(None, reading, 60).plain.splitlines()
    assert narrow[1].endswith("…")  # in the grid: one row, cut with an ellipsis
    whole = format_status(None, reading, 66, boot_rows=2).plain.splitlines()
    assert whole[1].rstrip().endswith("›") and whole[2].rstrip().endswith("ready 63s"), whole


async def test_maximized_the_log_pane_shows_the_whole_boot_timeline_at_once() -> None:
    from console.model import Reading

    state = demo_state()
    app = app_for(state)
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.query_one(LogPane)
        pane.summary = Reading("log", _boot_summary(), 0.0)
        await pilot.pause()
        status = pane.query_one("#log-status")
        assert "ready 63s" not in str(status.render())
        await pilot.press("4")
        await wait_for(lambda: "ready 63s" in str(status.render()), 5)
