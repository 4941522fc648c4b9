"""The downtime clock's start and the words that say where it came from agree (one rule for a stop
run from here and one seen on the host: console/core/derive/swap_observer.py downtime_from)."""

from __future__ import annotations

from dataclasses import replace

from console.core.derive.swap_observer import downtime_from, log_time
from console.host.parsers.sglang_log import parse_line

BATCH = ("[2026-12-03 09:00:{s} TP0] Decode batch, #running-req: 5, #full token: 12000, full token usage: 0.01, "
         "cuda graph: True, gen throughput (token/s): 100.00, #queue-req: 0")


def test_a_batch_before_the_stop_starts_the_clock_at_that_batch() -> None:
    stop = (log_time("2026-12-03 09:00:56") or 0) + 0.9
    d = downtime_from("h", [parse_line(BATCH.format(s="50"))], stop, "the stop command")
    assert (d.started_at_s, d.start_source) == (log_time("2026-12-03 09:00:50"),
                                                "the old server's last served request, in its log")


# Seen on the real systemd (tests/real/test_systemd_swap.py, one run in three under load): the clock started
# at the stop command (the earlier of the two) while its source still named the log's batch.
def test_a_clock_that_starts_at_the_stop_command_says_so_though_the_log_has_a_later_batch() -> None:
    stop = (log_time("2026-12-03 09:00:56") or 0) + 0.912
    d = downtime_from("h", [parse_line(BATCH.format(s="57"))], stop, "the stop command")
    assert d.started_at_s == stop
    assert "the stop command" in d.start_source, d.start_source


def test_a_batch_served_while_the_server_stopped_leaves_the_clock_at_the_last_batch_before_the_stop() -> None:
    """With the host's time of each line (journald's), a batch the server wrote after systemd began to
    stop it is after the stop: the clock starts at the last batch served before the stop, never after it."""
    stop = (log_time("2026-12-03 09:00:56") or 0) + 0.5
    before, during = (replace(parse_line(BATCH.format(s=s)), at_s=at) for s, at in (("55", stop - 0.8),
                                                                                       ("56", stop + 0.3)))
    d = downtime_from("h", [before, during], stop, "the stop command")
    assert (d.started_at_s, d.start_source) == (stop - 0.8, "the old server's last served request, in its log")
