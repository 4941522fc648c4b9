"""The observer of the host is the one writer of what happened in a swap (issue 33, item 2): the
downtime clock's start and end come from host facts — the stop command's reply, systemd's own lines
about a unit, the SGLang log's served requests and ready line, the server's readiness, the update's
and the router's replies — for the console's own actions exactly as for a host-side operator's.
The executor's steps here say only what the console meant to do and who asked."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from console.domain.analysis.service_diff import HostFacts
from console.domain.analysis.service_report import build_report, side_from_text
from console.domain.swap.preflight import check_diff
from console.core.state import HostState, LogAppended, ReadingChanged
from console.model import Reading
from console.host.parsers.sglang_log import LogEvent, parse_line
from console.host.sources.log import LogFollower
from console.core.derive.swap_view import AuditAppended, AuditEntry, SwapSetup, SwapStep, SwapStepChanged
from console.core.derive.swap_observer import SwapObserver

T0 = dt.datetime(2026, 12, 1, 10, 0, 0).timestamp()
OLD, NEW = "old.service", "new.service"
UNIT = """[Service]
ExecStart=/opt/sglang/.venv/bin/python -m sglang.launch_server --model-path /m/{model} --tp 4 --port 30000
"""


def stamp(at: float) -> str:
    return dt.datetime.fromtimestamp(at).isoformat(sep=" ", timespec="milliseconds")


class Host:
    """A HostState and its observer; every event goes through both, as the live core does."""

    def __init__(self, old: str = OLD, new: str = NEW) -> None:
        self.state = HostState("h", clock=lambda: T0 + 1000)
        self.observer = SwapObserver(self.state)
        self.old, self.new = old, new
        self.feed(SwapSetup("h", old, new, "o/new", "/m/new"))

    def feed(self, event: Any) -> None:
        self.state.apply(event)
        for derived in self.observer.see(event):
            if self.observer.still_valid(derived):
                self.state.apply(derived)

    def units(self, at: float, old: str, new: str) -> None:
        sides = [replace(side_from_text(name, UNIT.format(model=name)), active_state=active)
                 for name, active in ((self.old, old), (self.new, new))]
        self.feed(ReadingChanged("h", "service", Reading("service", SimpleNamespace(old=sides[0], new=sides[1]),
                                                         ok_at_s=at)))

    def log(self, at: float, text: str) -> None:
        self.feed(LogAppended("h", (replace(parse_line(text), ts=stamp(at)),)))

    def unit_line(self, at: float, unit: str, transition: str, text: str) -> None:
        self.feed(LogAppended("h", (LogEvent("unit", text, ts=stamp(at), fields={
            "kind": f"unit {transition}", "transition": transition, "unit": unit}),)))

    def server(self, at: float, unit: str | None, status: str, unit_state: str | None = "active") -> None:
        s = SimpleNamespace(unit=unit, unit_state=unit_state, status=status, reason=f"{status}: /health 200")
        self.feed(ReadingChanged("h", "server", Reading("server", s, ok_at_s=at)))

    def console_step(self, key: str, at: float, state: str = "running") -> None:
        """The executor's record: what it set out to do and who (no time of the host's)."""
        self.feed(SwapStepChanged("h", SwapStep(key, key, state=state, started_at_s=at, who="ana")))

    def audit(self, action: str, command: str, *, at: float, took: float, status: int | None = 0,
              output: str = "") -> None:
        self.feed(AuditAppended("h", AuditEntry("ana", at, action, command, status, output, took)))


def test_the_consoles_own_stop_and_start_are_dated_by_the_hosts_facts_alone() -> None:
    h = Host()
    h.units(T0, "active", "inactive")
    h.log(T0 + 2, "[2026-12-01 10:00:02 TP0] Decode batch. #running-req: 3, #token: 100, gen throughput (token/s): "
                  "50.00, #queue-req: 0")
    h.console_step("stop_old", T0 + 5)
    assert h.state.swap.downtime is None  # the console's intent is no fact of the host's
    h.audit("stop_old", f"timeout -k 5 120 systemctl stop -- {OLD}", at=T0 + 9, took=3.0)
    d = h.state.swap.downtime
    assert d is not None and d.ended_at_s is None
    assert d.started_at_s == T0 + 2 and d.start_source == "the old server's last served request, in its log"
    h.units(T0 + 12, "inactive", "inactive")
    h.console_step("start_new", T0 + 20)
    h.audit("start_new", f"timeout -k 5 90 systemctl start -- {NEW}", at=T0 + 21, took=1.0)
    h.units(T0 + 22, "inactive", "active")
    h.server(T0 + 40, NEW, "starting")
    assert h.state.swap.downtime.ended_at_s is None
    h.server(T0 + 50, NEW, "ready")
    d = h.state.swap.downtime
    assert (d.ended_at_s, d.end_source) == (T0 + 50, f"{NEW} ready")
    # the console's steps stay the console's: never rewritten as "outside the console"
    assert not h.state.swap.steps["stop_old"].observed and h.state.swap.steps["stop_old"].who == "ana"
    assert not h.state.swap.steps["start_new"].observed


def test_a_stop_with_no_served_request_in_the_log_starts_at_the_stop_commands_issue() -> None:
    h = Host()
    h.units(T0, "active", "inactive")
    h.console_step("stop_old", T0 + 5)
    h.audit("stop_old", f"timeout -k 5 120 systemctl stop -- {OLD}", at=T0 + 9, took=3.0)
    d = h.state.swap.downtime
    assert d.started_at_s == T0 + 6 and d.start_source == "the stop command (no request in the log)"


def test_a_stop_whose_reply_was_lost_is_dated_by_the_reading_that_saw_it() -> None:
    h = Host()
    h.units(T0, "active", "inactive")
    h.console_step("stop_old", T0 + 5)
    h.audit("stop_old", f"timeout -k 5 120 systemctl stop -- {OLD}", at=T0 + 9, took=3.0, status=None,
            output="connection lost")
    assert h.state.swap.downtime is None  # no exit status: not a fact
    h.units(T0 + 30, "inactive", "inactive")
    assert h.state.swap.downtime.started_at_s == T0 + 30


def test_systemds_own_stopping_line_dates_a_stop_before_the_next_unit_reading() -> None:
    h = Host()
    h.units(T0, "active", "inactive")
    h.unit_line(T0 + 7.5, OLD, "stopping", f"Stopping {OLD} - SGLang...")
    d = h.state.swap.downtime
    assert d is not None and d.started_at_s == T0 + 7.5 and "systemd stopping" in d.start_source
    h.units(T0 + 20, "inactive", "inactive")  # a later reading of the same stop moves nothing
    assert h.state.swap.downtime.started_at_s == T0 + 7.5
    assert h.state.swap.steps["stop_old"].started_at_s == T0 + 7.5


def test_a_containers_ready_server_stops_the_clock_though_the_server_source_follows_no_unit() -> None:
    """The Docker demo: the log said READY while the plan's clock kept running (the server reading
    of a container carries no unit, and the observer waited for one)."""
    h = Host("sglang-old", "sglang-new")
    h.units(T0, "active", "exited")
    h.units(T0 + 10, "exited", "exited")
    assert h.state.swap.downtime is not None
    h.units(T0 + 12, "exited", "active")
    h.server(T0 + 30, None, "ready", unit_state=None)
    d = h.state.swap.downtime
    assert (d.ended_at_s, d.end_source) == (T0 + 30, "sglang-new ready")
    assert h.state.swap.steps["start_new"].state == "done"


def test_the_new_servers_ready_line_ends_the_clock_and_the_steps_end_is_the_same_moment() -> None:
    h = Host()
    h.units(T0, "active", "inactive")
    h.units(T0 + 10, "inactive", "inactive")
    h.units(T0 + 12, "inactive", "active")
    h.log(T0 + 40, "[2026-12-01 10:00:40] The server is fired up and ready to roll!")
    d = h.state.swap.downtime
    assert (d.ended_at_s, d.end_source) == (T0 + 40, f"{NEW} ready")
    h.server(T0 + 44, NEW, "ready")
    assert h.state.swap.downtime.ended_at_s == T0 + 40
    assert h.state.swap.steps["start_new"].ended_at_s == T0 + 40


def test_the_consoles_in_place_update_is_timed_by_its_reply_then_by_the_servers_own_lines() -> None:
    h = Host()
    h.units(T0, "active", "inactive")
    h.console_step("in_place", T0 + 5)
    reply = json.dumps({"success": True, "message": "Succeeded", "num_paused_requests": 2}) + "\n200"
    h.audit("in_place", "curl -s -X POST http://127.0.0.1:30000/update_weights_from_disk -w '\\n%{http_code}'",
            at=T0 + 25, took=19.0, output=reply)
    d = h.state.swap.downtime
    assert (d.started_at_s, d.ended_at_s) == (T0 + 6, T0 + 25) and d.start_source.startswith("in place")
    h.log(T0 + 7, "[2026-12-01 10:00:07] Update engine weights online from disk begin. avail mem=4.26 GB")
    h.log(T0 + 23, "[2026-12-01 10:00:23] Update weights end.")
    d = h.state.swap.downtime
    assert (d.started_at_s, d.ended_at_s) == (T0 + 7, T0 + 23) and "server's log" in d.start_source
    assert h.state.swap.time_to_ready()[0] == 16  # the pause, named as one
    assert h.state.swap.downtime_parts()[0][0].startswith("in-place pause")


def test_a_refused_update_writes_no_pause() -> None:
    h = Host()
    h.console_step("in_place", T0 + 5)
    reply = json.dumps({"success": False, "message": "Unexpected key"}) + "\n400"
    h.audit("in_place", "curl -s -X POST http://127.0.0.1:30000/update_weights_from_disk", at=T0 + 9, took=3.0,
            output=reply)
    assert h.state.swap.downtime is None


def test_the_routers_move_then_the_old_servers_stop_is_no_downtime() -> None:
    h = Host()
    h.units(T0, "active", "inactive")
    h.console_step("switch_traffic", T0 + 50)
    h.audit("switch_traffic", "curl -s -X POST http://127.0.0.1:30100/add_worker", at=T0 + 51, took=0.2,
            output='{"status": "ok"}\n200')
    h.audit("switch_traffic", f"timeout -k 5 120 systemctl stop -- {OLD}", at=T0 + 60, took=2.0)
    d = h.state.swap.downtime
    assert d.started_at_s == d.ended_at_s == T0 + 60 and d.start_source.startswith("beside")
    h.units(T0 + 70, "inactive", "active")
    assert h.state.swap.downtime.started_at_s == T0 + 60 and h.state.swap.downtime_parts() == []


def test_a_rollback_ends_the_clock_when_the_old_server_is_ready_again() -> None:
    h = Host()
    h.units(T0, "active", "inactive")
    h.audit("stop_old", f"timeout -k 5 120 systemctl stop -- {OLD}", at=T0 + 9, took=3.0)
    h.units(T0 + 12, "inactive", "active")
    h.server(T0 + 20, NEW, "dead", unit_state="failed")
    h.console_step("rollback", T0 + 30)
    h.audit("rollback", f"timeout -k 5 120 systemctl stop -- {NEW}", at=T0 + 31, took=1.0)
    assert h.state.swap.downtime.ended_at_s is None  # stopping the new one ends nothing
    h.audit("rollback", f"timeout -k 5 90 systemctl start -- {OLD}", at=T0 + 33, took=1.0)
    h.log(T0 + 55, "[2026-12-01 10:00:55] The server is fired up and ready to roll!")
    d = h.state.swap.downtime
    assert (d.ended_at_s, d.end_source) == (T0 + 55, f"{OLD} ready again (rollback)")


def test_pid1s_lines_carry_journalds_own_time() -> None:
    follower = LogFollower(SimpleNamespace(label="h"), units=(OLD,))  # type: ignore[arg-type]
    raw = json.dumps({"__CURSOR": "c1", "__REALTIME_TIMESTAMP": str(int((T0 + 7.5) * 1e6)),
                      "_SYSTEMD_UNIT": "init.scope", "MESSAGE": f"Stopping {OLD} - SGLang..."}).encode()
    event = follower._parse(raw)
    assert event is not None and event.kind == "unit" and event.fields["transition"] == "stopping"
    assert event.ts is not None and abs(dt.datetime.fromisoformat(event.ts).timestamp() - (T0 + 7.5)) < 1e-3


def test_verify_not_asked_for_reads_skipped_once_the_swap_began_never_pending() -> None:
    """The story's observed swap showed "Verify the files (sha256)" pending though the profile never
    asked for it: once the host's swap began, it is `skipped (not asked for)`."""
    from console.core.derive.swap_plan import NOT_ASKED_VERIFY

    h = Host()
    assert h.state.swap.steps["verify"].state == "pending"
    h.units(T0, "active", "inactive")
    h.units(T0 + 10, "inactive", "inactive")
    verify = h.state.swap.steps["verify"]
    assert (verify.state, verify.detail) == ("skipped", NOT_ASKED_VERIFY)
    asked = Host()
    asked.feed(SwapSetup("h", OLD, NEW, "o/new", "/m/new", verify_sha=True))
    asked.units(T0, "active", "inactive")
    asked.units(T0 + 10, "inactive", "inactive")
    assert asked.state.swap.steps["verify"].state == "pending"  # asked for and not run: honestly pending


def test_an_in_place_update_seen_on_the_host_skips_the_stop_and_start_with_the_tables_reason() -> None:
    h = Host()
    h.log(T0 + 10, "[2026-12-01 10:00:10] Update engine weights online from disk begin. avail mem=4.26 GB")
    steps = h.state.swap.steps
    assert steps["stop_old"].state == steps["start_new"].state == "skipped"
    assert steps["stop_old"].detail.startswith("in place:") and steps["verify"].state == "skipped"


# -- faults: a drop, a host-side operator at the same time; live, late attach and replay agree ------
def _views(h: Host, recorded: list[Any]) -> list[Any]:
    """The live swap, a late attach (from the live state's snapshot) and a replay of the recording
    (its events applied to a fresh state, nothing derived again)."""
    attach = HostState.from_snapshot(h.state.snapshot())
    replay = HostState("h")
    for event in recorded:
        replay.apply(event)
    return [s.swap.to_data() for s in (h.state, attach, replay)]


class Recorded(Host):
    """A Host whose every applied event (the host's and the observer's) is kept, as the recorder does."""

    def __init__(self) -> None:
        self.recorded: list[Any] = []
        super().__init__()

    def feed(self, event: Any) -> None:
        self.recorded.append(event)
        self.state.apply(event)
        for derived in self.observer.see(event):
            if self.observer.still_valid(derived):
                self.recorded.append(derived)
                self.state.apply(derived)


def test_a_drop_during_the_consoles_stop_while_an_operator_starts_the_new_unit() -> None:
    """The console's stop loses its connection (no exit status); the host says it stopped; an
    operator in another shell starts the new unit. The plan shows each step once, with its author:
    the stop ana's, the start outside the console; the clock from the host's facts."""
    h = Recorded()
    h.units(T0, "active", "inactive")
    h.console_step("stop_old", T0 + 5)
    h.audit("stop_old", f"timeout -k 5 120 systemctl stop -- {OLD}", at=T0 + 9, took=4.0, status=None,
            output="connection lost")
    h.units(T0 + 12, "inactive", "inactive")  # read after the reconnect
    h.unit_line(T0 + 20, NEW, "started", f"Started {NEW} - SGLang.")
    h.units(T0 + 21, "inactive", "active")
    h.server(T0 + 45, NEW, "ready")
    swap = h.state.swap
    stop, start = swap.steps["stop_old"], swap.steps["start_new"]
    assert stop.who == "ana" and not stop.observed
    assert start.observed and start.who is None and "outside the console" in start.detail
    assert start.state == "done" and start.ended_at_s == T0 + 45
    d = swap.downtime
    assert (d.started_at_s, d.ended_at_s) == (T0 + 12, T0 + 45)
    live, attach, replay = _views(h, h.recorded)
    assert live == attach == replay
    assert sum(1 for e in h.recorded if isinstance(e, SwapStepChanged) and e.step.key == "start_new"
               and e.step.state == "done") == 1  # written once


def test_a_console_killed_after_its_stop_leaves_the_host_to_tell_the_rest() -> None:
    """The console that stopped the old unit is killed; the host goes on (the operator starts the
    new unit). A console attached later, and the replay, show the stop as ana's and the rest as the
    host did it."""
    h = Recorded()
    h.units(T0, "active", "inactive")
    h.console_step("stop_old", T0 + 5)
    h.audit("stop_old", f"timeout -k 5 120 systemctl stop -- {OLD}", at=T0 + 8, took=2.0)
    h.feed(SwapStepChanged("h", replace(h.state.swap.steps["stop_old"], state="failed",
                                        detail="cancelled (the console closed)")))
    h.units(T0 + 30, "inactive", "active")
    h.server(T0 + 60, NEW, "ready")
    d = h.state.swap.downtime
    assert (d.started_at_s, d.ended_at_s, d.end_source) == (T0 + 6, T0 + 60, f"{NEW} ready")
    assert h.state.swap.steps["start_new"].observed and h.state.swap.steps["stop_old"].who == "ana"
    live, attach, replay = _views(h, h.recorded)
    assert live == attach == replay


def test_in_place_the_serving_unit_is_not_an_install_seen_outside_the_console() -> None:
    """In place the new unit is the old one, serving since before the swap: the observer took it
    for the new unit found installed outside the console, and the console's own install then kept
    the flag ("observed") under the console's words."""
    h = Host(old=NEW, new=NEW)
    h.units(T0, "active", "active")
    install = h.state.swap.steps["install"]
    assert install.state == "pending" and not install.observed


def test_in_place_on_one_unit_the_installs_change_is_the_unit_before_it_against_the_unit_after() -> None:
    """One unit is old and new: the install rewrites the file that serves, so every reading after it
    compares that file with itself (no change). The observer keeps the unit as the last reading before
    the install's intent saw it, and writes the install's change at the first reading after it; the
    gate counts that change (a reading of the unit against itself counted none)."""
    unit = "one.service"
    before = side_from_text(unit, UNIT.format(model="old"))
    after = side_from_text(unit, UNIT.format(model="new").replace("--tp 4", "--tp 4 --served-model-name new"))
    h = Host(unit, unit)
    for at, side in ((T0, before), (T0 + 10, before)):
        h.feed(ReadingChanged("h", "service", Reading("service", build_report(side, side, HostFacts()), ok_at_s=at)))
    title = "Install the new unit"
    h.feed(SwapStepChanged("h", SwapStep("install", title, "running", T0 + 12, None, "", who="ana")))
    h.feed(SwapStepChanged("h", SwapStep("install", title, "done", T0 + 12, T0 + 13, "installed", who="ana")))
    assert h.state.swap.install_diff() == {}  # nothing read after the install yet
    h.feed(ReadingChanged("h", "service", Reading("service", build_report(after, after, HostFacts()),
                                                  ok_at_s=T0 + 14)))
    fact = h.state.swap.install_diff()
    changes = {c["flag"]: (c["change"], c["old"], c["new"]) for c in fact["changes"]}
    assert changes == {"--model-path": ("changed", "/m/old", "/m/new"),
                       "--served-model-name": ("added", None, "new")}, changes
    assert (fact["unit"], fact["before_at"], fact["count"]) == (unit, T0 + 10, 2), fact
    assert check_diff(h.state).reason == "2 changes, no error in the lints"
    assert h.state.data("service").change_count == 0  # the reading itself: the unit against itself
