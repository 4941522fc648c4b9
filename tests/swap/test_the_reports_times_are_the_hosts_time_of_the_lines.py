"""The swap report's boot timeline dates each line by the host's time of it (journald's, Docker's, to
the millisecond), never only by the server's own stamp (whole seconds, as SGLang writes by default):
each row carries the stamp, the host's time and whose clock that is, and a one-line note under the
table says which clock its "at" column reads. A file's lines, which carry no host time, say that
their "at" is the server's whole-second stamp."""

from __future__ import annotations

import datetime as dt
import html
import json
from dataclasses import replace

from console.core.state import ReadingChanged
from console.domain.analysis.log_state import LogTracker
from console.domain.swap.report import ReportBuilder, render_html, render_json, render_markdown
from console.host.parsers.sglang_log import parse_line
from console.model import Reading
from tests.kit.observed import T0, ObservedHost


def booted(source: str, *, host_time: bool = True) -> dict:
    """A restart's new server booting (launch at T0+10.2, weights at T0+12.3, ready at T0+30.4 on the
    host's clock), its lines stamped in whole seconds, read through `source`; the report built."""
    h = ObservedHost()
    timed: list = []
    h.state.subscribe(lambda e: timed.append((h.now, e)))
    tracker = LogTracker(source)

    def line(at: float, message: str) -> None:
        whole = dt.datetime.fromtimestamp(at).replace(microsecond=0).isoformat(sep=" ")
        tracker.feed([replace(parse_line(f"[{whole}] {message}"), at_s=at if host_time else None)], at + 0.5)
        h.at(at + 0.5).feed(ReadingChanged("h", "log", Reading("log", tracker.summary(), ok_at_s=at + 0.5)))

    h.at(T0).units(T0, "inactive", "active")
    line(T0 + 10.2, "server_args=ServerArgs(model_path='/m/new', tp_size=2)")
    line(T0 + 12.3, "Load weight begin. avail mem=80.00 GB")
    line(T0 + 30.4, "The server is fired up and ready to roll!")
    builder = ReportBuilder("h", "h")
    for t, event in timed:
        builder.feed(t, event)
    return builder.build()


def whole(at: float) -> str:
    return dt.datetime.fromtimestamp(at).replace(microsecond=0).isoformat(sep=" ")


def test_each_boot_row_is_dated_by_journalds_time_of_its_line_to_the_millisecond() -> None:
    boot = booted("journal of new.service")["boot"]
    assert [b["phase"] for b in boot] == ["launch", "weights loading", "ready"], boot
    launch = boot[0]
    assert launch["at"] == dt.datetime.fromtimestamp(T0 + 10.2).isoformat(sep=" ", timespec="milliseconds")
    assert launch["at_s"] == T0 + 10.2 and launch["stamp"] == whole(T0 + 10.2) and launch["clock"] == "journald"


def test_whole_second_stamps_still_give_the_boots_seconds_by_the_hosts_time() -> None:
    boot = booted("journal of new.service")["boot"]
    # the stamps say 10 → 30 (20 s); journald's times of the lines say 20.2 s
    assert round(boot[-1]["seconds"], 2) == 20.2 and round(boot[1]["seconds"], 2) == 2.1


def test_the_boot_table_shows_the_hosts_time_and_says_whose_clock_it_is() -> None:
    r = booted("journal of new.service")
    md = render_markdown(r)
    table = md.split("## Boot timeline")[1].split("## ")[0]
    assert "| phase | at | s since launch | detail |" in table
    ms = dt.datetime.fromtimestamp(T0 + 30.4).isoformat(sep=" ", timespec="milliseconds")
    assert ms.replace("-", "\\-") in table or ms in table, table
    assert "at: journald's time of each line" in table, table
    assert "journald's time of each line" in html.unescape(render_html(r))
    rows = json.loads(render_json(r))["boot"]
    assert all({"at", "stamp", "at_s", "clock"} <= set(row) for row in rows)


def test_a_containers_lines_are_dated_by_dockers_time() -> None:
    r = booted("docker logs of sglang-new")
    assert {b["clock"] for b in r["boot"]} == {"docker"}
    assert "at: Docker's time of each line" in render_markdown(r)


def test_a_files_lines_say_their_time_is_the_servers_whole_second_stamp() -> None:
    r = booted("file /var/log/sglang.log", host_time=False)
    launch = r["boot"][0]
    assert launch["at"] == launch["stamp"] == whole(T0 + 10.2) and launch["clock"] == "stamp"
    assert "at: the server's own stamp of each line" in render_markdown(r)
