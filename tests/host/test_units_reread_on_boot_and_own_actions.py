"""The diff pane never claims a unit state it has not read lately: a new boot or ready line in the
log, or a unit the console started or stopped, re-reads the units at once; and the state says
when it was read."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

from console.domain.analysis.log_state import LogTracker
from console.domain.analysis.service_report import ServiceReport, ServiceSide
from console.core.state import HostState, ReadingChanged
from console.model import Reading
from console.ui.panes.service import format_service
from console.host.parsers.sglang_log import parse_line
from console.domain.swap.actions import RemoteCommand
from console.domain.swap.controller import SwapController
from console.core.derive.swap_observer import SwapObserver


def _log(tracker: LogTracker, *lines: str) -> Reading[Any]:
    tracker.feed([parse_line(ln) for ln in lines], time.time())
    return Reading("log", tracker.summary(), time.time())


def test_a_new_boot_and_its_ready_line_wake_the_service_source() -> None:
    state = HostState("h")
    woken: list[str] = []
    observer = SwapObserver(state, wake=woken.append)
    tracker = LogTracker("journal")
    decode = ("[2026-12-01 15:04:{s:02d} TP0] Decode batch. #running-req: 8, #token: 1, token usage: 0.12, "
              "gen throughput (token/s): 186.64, #queue-req: 0")
    observer.see(ReadingChanged("h", "log", _log(tracker, decode.format(s=1))))
    assert "service" not in woken  # decode lines alone: nothing changed in what runs
    observer.see(ReadingChanged("h", "log", _log(tracker, "[2026-12-01 15:04:05] server_args=ServerArgs(x=1)")))
    assert woken.count("service") == 1  # a new server launching
    observer.see(ReadingChanged("h", "log", _log(tracker, decode.format(s=6))))
    assert woken.count("service") == 1
    observer.see(ReadingChanged("h", "log", _log(
        tracker, '[2026-12-01 15:04:16] INFO:     127.0.0.1:1 - "GET /get_model_info HTTP/1.1" 200 OK',
        "[2026-12-01 15:04:16] The server is fired up and ready to roll!")))
    assert woken.count("service") == 2  # ready: the unit is active now, whatever the last poll said


async def test_a_unit_the_console_starts_or_stops_is_re_read_at_once() -> None:
    repolled: list[str] = []

    async def run(script: str, *, timeout: float) -> Any:
        return SimpleNamespace(text="", error_text="", exit_status=0, ok=True)

    ctl: Any = SimpleNamespace(session=SimpleNamespace(transport=SimpleNamespace(run=run)),
                               runner=SimpleNamespace(repoll=repolled.append), _audit=lambda *a, **k: None)
    cmd = RemoteCommand("systemctl start -- x.service", 10, "start")
    for action in ("start_new", "stop_old", "rollback", "install"):
        await SwapController._run(ctl, "ana", action, cmd)
    assert repolled == ["service"] * 4
    await SwapController._run(ctl, "ana", "download", cmd)
    await asyncio.sleep(0)
    assert repolled == ["service"] * 4  # a download changes no unit


async def test_the_unit_state_says_when_it_was_read_once_on_the_border_never_wrapping_the_body() -> None:
    """At 80x24 "(as of 17:42:00)" after each unit wrapped onto its own line at column 0 (seen in
    the screenshots): the read time is said once, on the pane's border, beside live/stale."""
    from textual.app import App, ComposeResult

    from console.ui.panes.service import ServicePane

    at = time.mktime((2026, 12, 1, 13, 22, 5, 0, 0, -1))

    def side(name: str, active: str) -> ServiceSide:
        return ServiceSide(name, "/opt/sglang/bin/python", None, None, active_state=active, main_pid=6948)

    report = ServiceReport(side("sglang-qwen397b.service", "inactive"), side("sglang-qwen122b.service", "active"),
                           (), (), (), (), None, (), (), "x", ())

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield ServicePane(id="service")

    app = One()
    async with app.run_test(size=(40, 12)) as pilot:
        pane = app.query_one(ServicePane)
        pane.use_clock(lambda: at + 3)
        pane.reading = Reading("service", report, at)
        await pilot.pause()
        pane.update_age(at + 3)
        await pilot.pause()
        assert str(pane.border_subtitle) == "units read 13:22:05 · live"
        body = format_service(pane.reading, 36).plain
        assert "as of" not in body
        lines = body.splitlines()
        # each line fits (Rich would fold it at column 0): short of room a unit's line leaves its pid
        # out rather than wrap (tests/ui/test_the_service_header_keeps_its_rows_at_80x24.py), and a
        # row that must go on is indented under its head, never at column 0
        assert lines[:2] == ["old sglang-qwen397b.service inactive", "new sglang-qwen122b.service active"], lines
        assert all(len(line) <= 36 for line in lines), lines
        assert lines[2].startswith("nothing compared") and lines[3].startswith("  "), lines
        pane.reading = Reading("service", None, at, "systemctl: timed out", at)
        await pilot.pause()
        pane.update_age(at + 4)
        assert str(pane.border_subtitle) == "error"


def test_no_head_line_of_the_diff_is_folded_at_column_0() -> None:
    """The summary and a category's shared reason break at spaces under their first character
    (the maximized pane at 120x40 folded "…the checkpoint / has 1 MTP layer(s)" at column 0)."""
    from console.domain.analysis.service_diff import FlagChange
    from console.ui.panes.service import CATEGORY_ORDER

    def side(name: str) -> ServiceSide:
        return ServiceSide(name, "/opt/sglang/bin/python", None, None, active_state="active", main_pid=1)

    cat = CATEGORY_ORDER[0]
    reason = "speculative decoding added together: NEXTN, 3 steps, 1 topk, 4 draft tokens; the checkpoint has 1 MTP layer"
    changes = tuple(FlagChange(f"--flag-{i}", "added", None, str(i), cat, reason) for i in range(2))
    report = ServiceReport(side("a.service"), side("b.service"), changes, (), (), (), None, (), (), "x", ())
    for width in (38, 60, 110):
        for line in format_service(Reading("service", report, 0.0), width).plain.splitlines():
            assert len(line) <= width, (width, line)
