"""The log pane as the operator uses it: follow through a whole demo swap with every key of its help,
one severity for colour and `n`/`N`, a subtitle whose state survives truncation, lines at 80×24."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.app import App, ComposeResult

from console.ui.app import ConsoleApp, help_text
from console.ui.panes.log import LogLines, LogPane, event_style, format_subtitle, wrap_rows
from console.host.parsers.sglang_log import parse_line
from tests.kit.hosts import DATA, wait_for

REAL = (DATA / "sglang_real_lines.txt").read_text().splitlines()
OTHER = (DATA / "sglang_other_formats.txt").read_text().splitlines()


def test_other_real_log_formats_parse() -> None:
    events = [parse_line(line) for line in OTHER]
    assert [e.kind for e in events] == ["line", "prefill", "decode", "decode", "decode", "line", "warning"]
    # python logging's `asctime - LEVEL - name:` prefix gives the time, like SGLang's own prefix
    assert events[0].ts == "2025-02-26 15:44:36,973"
    # `Decode batch.` with a trailing `,`, an extra field, the `,` separator: the figures come through
    from console.host.parsers.sglang_log import batch_fields
    assert batch_fields(events[2])["gen throughput (token/s)"] == 65.75 and batch_fields(events[2])["#queue-req"] == 0
    assert batch_fields(events[3])["#cache_miss"] == 1 and batch_fields(events[4])["#running-req"] == 5
    # `(Proc pid=N) LEVEL date [file.py:line]`: the level sets the severity, the process is the rank label
    assert events[6].severity == "warning" and events[6].ranks == "APIServer pid=1" and events[6].ts == "06-21 07:16:53"
    assert events[5].severity == "info" and events[5].ts == "06-21 07:16:53"


def test_a_python_logging_error_level_is_an_error() -> None:
    line = OTHER[0].replace(" - INFO - ", " - ERROR - ")  # the real line with its level raised
    assert parse_line(line).severity == "error"


class OnePane(App[None]):
    def compose(self) -> ComposeResult:
        yield LogPane("journal: test.service", id="log-pane")


def _styles_and_targets(pane: LogPane) -> tuple[list[int], list[int]]:
    log = pane.log_widget
    red = [y for y, style in enumerate(log.row_styles) if "red" in style]
    return red, pane.error_rows()


async def test_a_red_line_is_always_an_n_target_and_back() -> None:
    """One severity function: colours and n/N both come from the parser's verdict (issue 11, item 5)."""
    app = OnePane()
    tricky = ["[2026-01-01 10:00:00 TP0] Error-correcting codes enabled on all GPUs",  # old highlighter: red
              "[2026-01-01 10:00:00] INFO:     127.0.0.1:1 - \"GET /health_generate HTTP/1.1\" 503 Service Unavailable",
              "2025-02-26 15:44:36,973 - ERROR - sglang.srt.managers.scheduler: scheduler died"]
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(LogPane)
        pane.add_events(tuple(parse_line(x) for x in REAL + OTHER + tricky))
        await pilot.pause()
        red, targets = _styles_and_targets(pane)
        assert red == targets and len(red) >= 4
        pane.action_toggle_wrap()  # wrapped rows: still the same rows
        await pilot.pause()
        red_wrapped, targets_wrapped = _styles_and_targets(pane)
        assert set(targets_wrapped) <= set(red_wrapped) and len(targets_wrapped) == len(targets)
        # and the rendered colour is the stored one
        strip = pane.log_widget.row_strip(targets[0] if not pane.wrap else targets_wrapped[0])
        assert any(seg.style and seg.style.color and seg.style.color.name == "red" for seg in strip)


def test_every_line_style_follows_its_severity() -> None:
    for line in REAL + OTHER:
        event = parse_line(line)
        assert ("red" in event_style(event)) == (event.severity == "error"), line


def test_the_subtitle_puts_state_first() -> None:
    label = format_subtitle("journal: sglang-qwen35-397b.service", following=False, new_lines=12,
                            filter_text="Decode", quiet_s=None, wrap=True)
    assert label.startswith("following: off, 12 new lines") and label.index("filter") < label.index("journal")
    assert format_subtitle("journal: x", following=True, new_lines=0, filter_text="", quiet_s=47, wrap=False) \
        == "quiet 40s · journal: x"


def test_wrap_keeps_every_character() -> None:
    line = REAL[23]
    rows = wrap_rows(line, 40)
    assert all(len(r) <= 40 for r in rows) and "".join(r[2:] if i else r for i, r in enumerate(rows)) == line


@pytest.fixture
def fast_demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ConsoleApp]:
    """The demo swap at 8× (ready after ~10 s)."""
    from console.demo.hostsim.process import SimulatorThread
    from console.host.session import HostSession, make_transport

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    sim = SimulatorThread(speed=8.0)
    profile = sim.start()
    try:
        yield ConsoleApp.for_session(HostSession(profile, make_transport(profile), demo=True))
    finally:
        sim.stop()


def at_end(log: LogLines) -> bool:
    return log.scroll_y >= log.max_scroll_y


async def _new_lines_arrive(pane: LogPane, timeout: float = 60) -> None:
    # 60 s: a loaded CI (3 xdist workers on 2 cores) once went 20 s without the demo's next line.
    before = len(pane.lines) + sum(1 for _ in ())
    count = pane.log_widget.line_count
    seen = pane.lines[-1] if pane.lines else None
    await wait_for(lambda: (pane.lines[-1] if pane.lines else None) is not seen
                   or pane.log_widget.line_count != count, timeout)
    del before


async def test_the_log_follows_through_a_whole_demo_swap_with_every_key(fast_demo: ConsoleApp) -> None:
    assert "`End`" in help_text() and "`w`" in help_text()  # the help lists the keys this test uses
    app = fast_demo
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(LogPane)
        log = pane.log_widget
        await wait_for(lambda: log.line_count > log.size.height + 5, 30)
        pane.focus()
        await pilot.pause()
        assert at_end(log) and pane.following

        await pilot.press("4")  # maximize
        await _new_lines_arrive(pane)
        await pilot.pause(0.2)
        assert at_end(log), "maximized: the tail must stay in view"
        await pilot.press("escape")  # restore
        await _new_lines_arrive(pane)
        await pilot.pause(0.2)
        assert at_end(log), "restored: the tail must stay in view"

        await wait_for(lambda: pane.server is not None and pane.server.data is not None
                       and pane.server.data.status == "ready", 40)
        await _new_lines_arrive(pane)
        await pilot.pause(0.2)
        assert at_end(log), "after ready (the status block grew) the tail must stay in view"

        await pilot.press("slash")
        await pilot.press(*"INFO")
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert pane.filter_text == "INFO" and at_end(log)
        await pilot.press("escape")  # clears the filter
        await pilot.pause(0.2)
        assert pane.filter_text == "" and at_end(log)
        await _new_lines_arrive(pane)
        await pilot.pause(0.2)
        assert at_end(log), "after clearing a filter the tail must stay in view"

        await pilot.press("w")
        await pilot.pause(0.2)
        assert pane.wrap and all(len(row) <= log.size.width for row in log.lines) and at_end(log)

        log.focus()
        await pilot.press("pageup")
        await pilot.pause(0.2)
        assert not pane.following and not at_end(log)
        # the state has new lines before the pane shows them (the screen flushes streaming news once a
        # second at most): wait for the pane to count what it showed while not following
        await wait_for(lambda: pane.new_lines > 0, 60)
        await pilot.pause(0.2)
        assert pane.new_lines > 0 and str(pane.border_subtitle).startswith("following: off")
        await pilot.press("end")
        assert pane.following  # at once: the key's own answer
        # The tail in view with the lines held while not following (written at the screen's next
        # flush, a second or two apart on a busy host, then scrolled to): waited for, not slept on
        # (0.2 s once fell between a held batch's write and its scroll under CI's load).
        await wait_for(lambda: at_end(log) and not str(pane.border_subtitle).startswith("following"), 30)

        pane.focus()
        await pilot.press("space")
        assert not pane.following
        await pilot.press("G")
        assert pane.following
        await pilot.press("space", "space")
        assert pane.following
        await pilot.press("n")
        await pilot.press("N")
        await pilot.press("end")
        await pilot.press("w")
        await _new_lines_arrive(pane)
        await pilot.pause(0.2)
        assert pane.following and not pane.wrap and at_end(log)


async def test_at_80x24_the_log_pane_still_shows_lines(fast_demo: ConsoleApp) -> None:
    app = fast_demo
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.query_one(LogPane)
        await wait_for(lambda: pane.log_widget.line_count > 10, 30)
        await wait_for(lambda: pane.server is not None and pane.server.data is not None
                       and pane.server.data.status == "ready", 40)
        await pilot.pause(0.5)
        assert pane.log_widget.size.height >= LogPane.MIN_LOG_ROWS, pane.log_widget.size
        assert str(pane.border_subtitle).startswith("4 shows more")  # and how to see more
        await pilot.press("4")
        await pilot.pause(0.3)
        assert not str(pane.border_subtitle).startswith("4 shows more")


async def test_the_status_block_never_wraps_into_the_tail() -> None:
    """A long decode line is cut with an ellipsis, not wrapped onto a second row (which would take a
    row from the tail)."""
    from console.domain.analysis.log_state import LogTracker
    from console.model import Reading

    app = OnePane()
    async with app.run_test(size=(48, 30)) as pilot:
        pane = app.query_one(LogPane)
        tracker = LogTracker("t")
        tracker.feed([parse_line(REAL[23])])  # an MTP decode line: gen, run, queue, kv, accept
        pane.summary = Reading("log", tracker.summary(), 0.0)
        await pilot.pause(0.2)
        status = pane.query_one("#log-status")
        assert status.size.height == 2  # "server status: waiting…" and the decode line, one row each
