"""The log pane's subtitle said '17 own polls hidden (a shows)': whose polls, and what 'a shows'
means, were the operator's to guess. It says what is hidden (the console's own requests in the
server's log) and the key as the footer names it."""

from __future__ import annotations

from console.ui.panes.log import format_subtitle


def _subtitle(hidden: int) -> str:
    return format_subtitle("journal of sglang-qwen122b.service", following=True, new_lines=0, filter_text="",
                           quiet_s=None, wrap=False, own_hidden=hidden)


def test_the_hidden_lines_are_the_consoles_requests_and_a_shows_them() -> None:
    assert _subtitle(17) == "17 console requests hidden (a: show) · journal of sglang-qwen122b.service"
    assert _subtitle(1).startswith("1 console request hidden (a: show)")
    assert _subtitle(0) == "journal of sglang-qwen122b.service"
