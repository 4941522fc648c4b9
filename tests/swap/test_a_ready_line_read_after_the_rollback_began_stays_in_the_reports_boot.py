"""The report's boot timeline is the new server's, as the log tells it, even when its ready line is read
only after the rollback began (a loaded console, seen once on the real systemd): the line belongs to a boot
launched before the rollback, and the old server's boot at the rollback is never taken for it."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from console.core.state import ReadingChanged
from console.domain.analysis.log_state import LogTracker
from console.domain.swap.report import ReportBuilder
from console.host.parsers.sglang_log import parse_line
from console.model import Reading
from tests.kit.observed import NEW, T0, ObservedHost


def test_the_new_servers_ready_line_read_after_the_rollback_began_is_in_the_boot_timeline() -> None:
    h = ObservedHost()
    timed: list = []
    h.state.subscribe(lambda e: timed.append((h.now, e)))
    tracker = LogTracker("journal")

    def line(read_at: float, at: float, message: str) -> None:
        """A server line journald holds at `at` (stamped in whole seconds), read by the console at `read_at`."""
        whole = dt.datetime.fromtimestamp(at).replace(microsecond=0).isoformat(sep=" ")
        tracker.feed([replace(parse_line(f"[{whole}] {message}"), at_s=at)], read_at)
        h.at(read_at).feed(ReadingChanged("h", "log", Reading("log", tracker.summary(), ok_at_s=read_at)))

    h.at(T0).units(T0, "inactive", "active")
    line(T0 + 10, T0 + 10.2, "server_args=ServerArgs(model_path='/m/new', tp_size=2)")
    line(T0 + 12, T0 + 12.3, "Load weight begin. avail mem=80.00 GB")
    h.at(T0 + 31).intent("rollback", state="running", detail="", who="ana")
    h.at(T0 + 31.5).audit("rollback", f"timeout -k 5 120 systemctl stop -- {NEW}", at=T0 + 31.5, took=0.5)
    line(T0 + 32, T0 + 30.4, "The server is fired up and ready to roll!")  # written before, read after
    line(T0 + 40, T0 + 40.1, "server_args=ServerArgs(model_path='/m/old', tp_size=2)")  # the old server again

    builder = ReportBuilder("h", "h")
    for t, event in timed:
        builder.feed(t, event)
    boot = builder.build()["boot"]
    assert [row["phase"] for row in boot] == ["launch", "weights loading", "ready"], boot
    assert boot[0]["stamp"] == dt.datetime.fromtimestamp(T0 + 10).isoformat(sep=" ")  # the new server's launch
    assert round(boot[-1]["seconds"], 1) == 20.2
