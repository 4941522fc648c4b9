"""The log pane's status line, at the grid's 56 columns, read ' READY  serving: /health_generate
answered (not sglang-qwen': whose server it is (not the new unit's, another process's: the old one
before the swap) cut mid-name. Short of room the line says that first; any reason is cut at a word."""

from __future__ import annotations

import pytest

from console.domain.analysis.server_status import HttpFacts, ServerStatus, combine
from console.model import Reading
from console.ui.panes.log import format_status


def _status(width: int, reason: str | None = None) -> str:
    if reason is None:
        st = combine("sglang-qwen122b.service", "inactive", None, None,
                     HttpFacts(server_info={"version": "0.5.23"}, health_ok=True, health_at_s=99.0,
                               health_ever_ok=True), 100.0)
    else:
        st = ServerStatus("ready", reason, None, None, None, None, HttpFacts())
    return format_status(Reading("server", st, 100.0), None, width, 100.0).plain.splitlines()[0]


def test_the_reason_in_full_says_whose_server_it_is_not() -> None:
    assert "(not sglang-qwen122b.service, which is inactive" in _status(200)


@pytest.mark.parametrize("width", [56, 60, 72])
def test_narrow_it_says_first_that_the_server_is_not_the_units(width: int) -> None:
    line = _status(width)
    assert len(line) <= width, line
    assert "not sglang-qwen122b.service's" in line, line


def test_narrower_still_the_unit_keeps_both_ends() -> None:
    line = _status(40)
    assert len(line) <= 40 and "not sglang" in line and "service's" in line and "…" in line, line


def test_any_reason_too_long_stops_at_a_word_with_an_ellipsis() -> None:
    line = _status(40, "serving: /health and the log agree after a long boot")
    assert line.endswith("…") and len(line) <= 40, line
    reason = "serving: /health and the log agree after a long boot"
    assert line[:-1].rstrip().split()[-1] in reason.split(" "), line
