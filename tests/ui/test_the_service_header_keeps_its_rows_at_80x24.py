"""The service diff's header at 80x24 (a 38-column pane) took two rows more than it has: 'new
sglang-qwen122b.service active / pid 18903' and '10 changes · 0 errors · 0 warnings · / 6 notes'
each wrapped. Short of room a side leaves its pid out and the summary its notes' count (the notes
are listed below) before a row wraps; with room, both are said."""

from __future__ import annotations

from console.domain.analysis.service_diff import Lint
from console.domain.analysis.service_report import ServiceReport, ServiceSide
from console.host.parsers.sglang_argv import SglangCommand
from console.model import Reading
from console.ui.panes.service import format_service


def _report() -> ServiceReport:
    cmd = SglangCommand(("python", "-m", "sglang.launch_server"), ())
    old = ServiceSide("sglang-qwen397b.service", "", None, cmd, active_state="inactive")
    new = ServiceSide("sglang-qwen122b.service", "", None, cmd, active_state="active", main_pid=18903)
    notes = tuple(Lint("info", None, f"note {i}") for i in range(6))
    return ServiceReport(old, new, (), (), notes, (), None, (), (), "0.5.23", ())


def _head(width: int) -> list[str]:
    return format_service(Reading("service", _report(), 0.0), width).plain.splitlines()[:3]


def test_at_38_columns_the_header_is_three_rows_within_the_width() -> None:
    rows = _head(38)
    assert rows[0].startswith("old sglang-qwen397b.service inactive"), rows
    assert rows[1] == "new sglang-qwen122b.service active", rows
    assert rows[2] == "0 changes · 0 errors · 0 warnings", rows
    assert all(len(r) <= 38 for r in rows), rows


def test_with_room_the_pid_and_the_notes_are_said() -> None:
    rows = _head(60)
    assert rows[1] == "new sglang-qwen122b.service active pid 18903", rows
    assert rows[2] == "0 changes · 0 errors · 0 warnings · 6 notes", rows
