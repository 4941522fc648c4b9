"""The console's own steps are timed from the host's own records, not from when the executor's
intent or outcome reached the state (issue 33, item 2): a run begins at its first audited command's
issue; the stop ends at the drained reading (GPU memory back to the floor, else systemd's "Stopped"
line at journald's time); the start at the new server's ready line; the in-place update at its
"Update weights end." line. An executor whose reply comes late moves none of them, a fact that
comes after the outcome dates it again, and a late attach and a replay of the recording read the
same times. The same for an operator's swap seen on the host."""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from console.core.derive.swap_view import SwapStepChanged
from console.core.recording import read_recording
from console.core.state import HostState, LogAppended, ReadingChanged
from console.demo.swap_demo import run_path_demo
from console.domain.swap.report import report_from_recording
from console.host.parsers.sglang_log import parse_line
from tests.kit.downtime import SimHost
from tests.kit.observed import NEW, OLD, T0, ObservedHost, stamp

FULL, FLOOR = 90_000, 500


def _stop_and_start(h: ObservedHost, *, late_s: float) -> None:
    """The console's restart; every reply of the host reaches the executor `late_s` late."""
    h.units(T0, "active", "inactive")
    h.gpu(T0 + 1, FULL, FULL)
    h.at(T0 + 2).intent("stop_old", state="running", detail="", who="ana")
    # the gate and the approval take 3 s; the stop is sent at T0 + 5, systemd stops it, the GPUs drain
    h.unit_line(T0 + 5.2, OLD, "stopping")
    h.gpu(T0 + 6, 40_000, 40_000)
    h.unit_line(T0 + 7.4, OLD, "stopped")
    h.gpu(T0 + 8, FLOOR, FLOOR)
    h.at(T0 + 8 + late_s).audit("stop_old", f"timeout -k 5 120 systemctl stop -- {OLD}", at=T0 + 8 + late_s,
                                took=3 + late_s)
    h.at(T0 + 8.5 + late_s).intent("stop_old", state="done", detail="stopped; GPU memory drained")
    h.at(T0 + 9 + late_s).intent("start_new", state="running", detail="", who="ana")
    start = T0 + 10 + late_s
    h.at(start + 0.3 + late_s).audit("start_new", f"timeout -k 5 90 systemctl start -- {NEW}",
                                     at=start + 0.3 + late_s, took=0.3 + late_s)
    h.units(start + 1, "inactive", "active")
    h.ready_line(start + 20)
    h.server(start + 21, NEW, "ready")
    h.at(start + 21.5 + late_s).intent("start_new", state="done", detail="ready after systemctl start")


def test_the_consoles_stop_and_start_are_the_hosts_times_whenever_the_executors_replies_came() -> None:
    on_time, late = ObservedHost(), ObservedHost()
    _stop_and_start(on_time, late_s=0.0)
    _stop_and_start(late, late_s=30.0)
    stop, start = on_time.state.swap.steps["stop_old"], on_time.state.swap.steps["start_new"]
    # the stop: from its command's issue to the drained reading; not the intent (T0 + 2), not the outcome
    assert (stop.started_at_s, stop.ended_at_s) == (T0 + 5, T0 + 8)
    # the start: from its command's issue to the server's ready line; not the reading (start + 21)
    assert (start.started_at_s, start.ended_at_s) == (T0 + 10, T0 + 30)
    assert stop.who == start.who == "ana" and not stop.observed and not start.observed
    late_stop, late_start = late.state.swap.steps["stop_old"], late.state.swap.steps["start_new"]
    assert (late_stop.started_at_s, late_stop.ended_at_s) == (T0 + 5, T0 + 8)
    # the late start was sent 30 s later on the host (the stop's reply came 30 s late): its own times
    assert (late_start.started_at_s, late_start.ended_at_s) == (T0 + 40, T0 + 60)
    for h in (on_time, late):
        live, attach, replay = h.views()
        assert live == attach == replay


def test_a_stop_with_no_gpu_reading_ends_at_systemds_stopped_line() -> None:
    h = ObservedHost()
    h.units(T0, "active", "inactive")
    h.at(T0 + 1).intent("stop_old", state="running", detail="", who="ana")
    h.unit_line(T0 + 2.5, OLD, "stopping")
    h.unit_line(T0 + 6.25, OLD, "stopped")
    h.at(T0 + 20).audit("stop_old", f"timeout -k 5 120 systemctl stop -- {OLD}", at=T0 + 20, took=18)
    h.at(T0 + 21).intent("stop_old", state="done", detail="stopped")
    stop = h.state.swap.steps["stop_old"]
    assert (stop.started_at_s, stop.ended_at_s) == (T0 + 2, T0 + 6.25)


def test_a_ready_line_that_comes_after_the_outcome_dates_the_start_again() -> None:
    """The log's batch can reach the state after the server poll said ready and the step ended."""
    h = ObservedHost()
    h.units(T0, "active", "inactive")
    h.audit("stop_old", f"timeout -k 5 120 systemctl stop -- {OLD}", at=T0 + 4, took=1)
    h.units(T0 + 5, "inactive", "inactive")
    h.at(T0 + 6).intent("start_new", state="running", detail="", who="ana")
    h.at(T0 + 7).audit("start_new", f"timeout -k 5 90 systemctl start -- {NEW}", at=T0 + 7, took=0.5)
    h.units(T0 + 8, "inactive", "active")
    h.server(T0 + 40, NEW, "ready")
    h.at(T0 + 41).intent("start_new", state="done", detail="ready after systemctl start")
    assert h.state.swap.steps["start_new"].ended_at_s == T0 + 41  # nothing of the host's yet: the outcome
    h.at(T0 + 45).ready_line(T0 + 33)
    start = h.state.swap.steps["start_new"]
    assert (start.started_at_s, start.ended_at_s) == (T0 + 6.5, T0 + 33)
    assert h.state.swap.downtime.ended_at_s == T0 + 33
    live, attach, replay = h.views()
    assert live == attach == replay


def test_the_consoles_in_place_update_runs_from_its_request_to_the_servers_end_line() -> None:
    """The step waits for the log after the reply (it trails it), so its outcome is later still."""
    h = ObservedHost(old=NEW, new=NEW)
    h.units(T0, "active", "active")
    h.at(T0 + 1).intent("in_place", state="running", detail="", who="ana")
    h.log(T0 + 3.2, "[2026-12-01 10:00:03] Update engine weights online from disk begin. avail mem=4.26 GB")
    h.log(T0 + 15.7, "[2026-12-01 10:00:15] Update weights end.")
    reply = json.dumps({"success": True, "message": "Succeeded", "num_paused_requests": 2}) + "\n200"
    h.at(T0 + 16).audit("in_place", "curl -s -X POST http://127.0.0.1:30000/update_weights_from_disk",
                        at=T0 + 16, took=13.0, output=reply)
    h.at(T0 + 18).intent("in_place", state="done", detail="weights updated in place")
    step = h.state.swap.steps["in_place"]
    assert (step.started_at_s, step.ended_at_s) == (T0 + 3, T0 + 15.7)
    assert step.who == "ana" and not step.observed


def test_an_update_seen_on_the_host_is_dated_by_journalds_time_of_its_lines_not_their_whole_second_stamps() -> None:
    """SGLang stamps its lines in whole seconds; journald records when each was written (µs). An
    update whose begin line is stamped 10:00:09 but written at 10:00:09.6 begins at 09.6: a GPU
    reading taken at 09.3, inside that second but before the line, is the memory "before" (read
    as after it, the swap had no "before" at all)."""
    h = ObservedHost(old=NEW, new=NEW)
    h.units(T0, "active", "active")
    h.gpu(T0 + 9.3, 90_000, 90_000)
    h.journal_line(T0 + 9.6, "Update engine weights online from disk begin. avail mem=4.26 GB")
    h.gpu(T0 + 12, 93_000, 93_000)
    h.journal_line(T0 + 15.7, "Update weights end.")
    h.gpu(T0 + 16.5, 91_000, 91_000)
    step = h.state.swap.steps["in_place"]
    assert (step.started_at_s, step.ended_at_s) == (T0 + 9.6, T0 + 15.7) and step.observed
    d = h.state.swap.downtime
    assert (d.started_at_s, d.ended_at_s) == (T0 + 9.6, T0 + 15.7)
    before = h.state.swap.memory().get("before")
    assert before is not None and before["at"] == T0 + 9.3, h.state.swap.memory()
    assert [g["used_mib"] for g in before["gpus"]] == [90_000, 90_000]
    live, attach, replay = h.views()
    assert live == attach == replay


def test_beside_ends_at_journalds_time_of_the_ready_line_not_its_whole_second_stamp() -> None:
    """The new server's ready line stamped 10:00:22 and written at 10:00:22.7: the beside step ends
    at 22.7."""
    h = ObservedHost()
    h.units(T0, "active", "inactive")
    h.at(T0 + 1).intent("beside", state="running", detail="", who="ana")
    h.at(T0 + 2.5).audit("beside", f"timeout -k 5 90 systemctl start -- {NEW}", at=T0 + 2.5, took=0.5)
    h.units(T0 + 3, "active", "active")
    h.journal_line(T0 + 22.7, "The server is fired up and ready to roll!")
    h.server(T0 + 23, NEW, "ready")
    h.at(T0 + 23.5).intent("beside", state="done", detail="ready on port 30001")
    step = h.state.swap.steps["beside"]
    assert (step.started_at_s, step.ended_at_s) == (T0 + 2, T0 + 22.7)
    live, attach, replay = h.views()
    assert live == attach == replay


def test_a_step_with_no_command_keeps_its_intent_and_outcome_times() -> None:
    h = ObservedHost()
    h.at(T0 + 1).intent("preflight", state="running", detail="", who="ana")
    h.at(T0 + 4).intent("preflight", state="done", detail="the gate passes")
    step = h.state.swap.steps["preflight"]
    assert (step.started_at_s, step.ended_at_s) == (T0 + 1, T0 + 4)


def test_an_operators_start_seen_ready_by_a_poll_ends_at_its_ready_line_that_came_later() -> None:
    h = ObservedHost()
    h.units(T0, "active", "inactive")
    h.units(T0 + 10, "inactive", "inactive")
    h.units(T0 + 12, "inactive", "active")
    h.server(T0 + 44, NEW, "ready")
    assert h.state.swap.steps["start_new"].ended_at_s == T0 + 44
    h.at(T0 + 46).ready_line(T0 + 40)
    start = h.state.swap.steps["start_new"]
    assert start.observed and start.state == "done" and start.ended_at_s == T0 + 40
    assert "ready 10:00:40" in start.detail and "28s after the start" in start.detail
    live, attach, replay = h.views()
    assert live == attach == replay


def _beside_and_switch(h: ObservedHost, *, late_s: float, log_late_s: float = 0.0) -> dict[str, tuple[float, float]]:
    """The console's beside path: the new server started beside the old one, then the router's moves
    and the old one's stop; every reply reaches the executor `late_s` after the host gave it, the
    log's batches `log_late_s` after the host wrote them. The steps' times by the host's records."""

    def command(key: str, text: str, sent: float, took: float, output: str = "") -> float:
        """Sent at `sent`, done on the host `took` later, its reply at the console `late_s` after that."""
        at = sent + took + late_s
        h.at(at).audit(key, text, at=at, took=took + late_s, output=output)
        return at

    ok = '{"status": "ok"}\n200'
    h.units(T0, "active", "inactive")
    h.at(T0 + 1).intent("beside", state="running", detail="", who="ana")
    t = command("beside", "cat /proc/net/tcp", T0 + 2, 0.1)
    started = t + 0.1
    t = command("beside", f"timeout -k 5 90 systemctl start -- {NEW}", started, 0.5)
    h.units(started + 1, "active", "active")
    ready = started + 20
    if not log_late_s:
        h.ready_line(ready)
    h.server(ready + 1, NEW, "ready")
    t = max(t, ready + 1 + late_s)
    h.at(t).intent("beside", state="done", detail="ready on port 30001")
    if log_late_s:
        h.at(ready + log_late_s).ready_line(ready)
    h.at(t + 0.5).intent("switch_traffic", state="running", detail="", who="ana")
    moved = t + 1
    t = command("switch_traffic", "curl -s -X POST http://127.0.0.1:30100/add_worker?url=x", moved, 0.2, ok)
    t = command("switch_traffic", "curl -s -X POST http://127.0.0.1:30100/remove_worker?url=y", t + 0.1, 0.2, ok)
    stop = t + 0.1
    h.unit_line(stop + 0.2, OLD, "stopping")
    if not log_late_s:
        h.unit_line(stop + 2.5, OLD, "stopped")
    t = command("switch_traffic", f"timeout -k 5 120 systemctl stop -- {OLD}", stop, 3.0)
    h.at(t + 0.5).intent("switch_traffic", state="done", detail="the router sends traffic to 30001")
    if log_late_s:
        h.at(stop + 2.5 + log_late_s).unit_line(stop + 2.5, OLD, "stopped")
    return {"beside": (T0 + 2, ready), "switch_traffic": (moved, stop + 2.5)}


def test_the_consoles_beside_and_traffic_switch_end_at_the_hosts_ready_and_stopped_lines() -> None:
    """Beside ends at the new server's ready line (not when the executor heard /health answer), the
    traffic switch at systemd's "Stopped" line of the old unit (its last act), however late the
    executor's replies came; a late attach and a replay read the same."""
    for late_s in (0.0, 30.0):
        h = ObservedHost()
        host = _beside_and_switch(h, late_s=late_s)
        for key in ("beside", "switch_traffic"):
            step = h.state.swap.steps[key]
            assert (step.started_at_s, step.ended_at_s) == pytest.approx(host[key], abs=0.01), (key, late_s)
            assert step.who == "ana" and not step.observed
        live, attach, replay = h.views()
        assert live == attach == replay


def test_a_ready_or_stopped_line_that_comes_after_the_outcome_dates_beside_and_the_switch_again() -> None:
    h = ObservedHost()
    host = _beside_and_switch(h, late_s=0.0, log_late_s=20.0)
    for key in ("beside", "switch_traffic"):
        step = h.state.swap.steps[key]
        assert (step.started_at_s, step.ended_at_s) == pytest.approx(host[key], abs=0.01), key
    live, attach, replay = h.views()
    assert live == attach == replay


def test_beside_the_old_containers_ready_line_never_ends_the_new_ones_boot() -> None:
    """Both containers' logs are followed at once: a ready line the old one writes (its own restart
    of a worker, a backlog read again) is not the new server's."""
    h = ObservedHost(old="sglang-old", new="sglang-new")
    h.units(T0, "active", "inactive")
    h.at(T0 + 1).intent("beside", state="running", detail="", who="ana")
    h.audit("beside", "timeout -k 5 60 docker start -- sglang-new", at=T0 + 2, took=0.5)
    h.feed(LogAppended("h", (replace(parse_line("The server is fired up and ready to roll!"), ts=stamp(T0 + 10),
                                     fields={"container": "sglang-old"}),)))
    h.feed(LogAppended("h", (replace(parse_line("The server is fired up and ready to roll!"), ts=stamp(T0 + 20),
                                     fields={"container": "sglang-new"}),)))
    h.at(T0 + 30).intent("beside", state="done", detail="ready on port 30001")
    assert h.state.swap.steps["beside"].ended_at_s == T0 + 20


def _container_beside_switch(h: ObservedHost, *, exit_seen_after_reply: bool) -> float:
    """The console's traffic switch in containers: the router's moves, then `docker stop` of the old
    container, which exits at T0 + 12.5 (Docker's FinishedAt) and answers the console at T0 + 14.6.
    The reading with the exit time comes before the reply, or after the step's outcome."""
    ok = '{"status": "ok"}\n200'
    started = T0 - 3600.0
    h.units(T0, "running", "running", old_started=started)
    h.at(T0 + 1).intent("switch_traffic", state="running", detail="", who="ana")
    h.at(T0 + 2.2).audit("switch_traffic", "curl -s -X POST http://127.0.0.1:30100/add_worker?url=x", at=T0 + 2.2,
                         took=0.2, output=ok)
    h.at(T0 + 2.5).audit("switch_traffic", "curl -s -X POST http://127.0.0.1:30100/remove_worker?url=y",
                         at=T0 + 2.5, took=0.2, output=ok)
    if not exit_seen_after_reply:
        h.units(T0 + 13, "exited", "running", old_started=started, old_finished=T0 + 12.5)
    h.at(T0 + 14.6).audit("switch_traffic", f"timeout -k 5 90 docker stop -t 60 -- {h.old}", at=T0 + 14.6, took=12)
    h.at(T0 + 15).intent("switch_traffic", state="done", detail="the router sends traffic to 30001")
    if exit_seen_after_reply:
        h.units(T0 + 16, "exited", "running", old_started=started, old_finished=T0 + 12.5)
    return T0 + 12.5


def test_the_consoles_switch_in_containers_ends_at_the_old_containers_exit_as_docker_recorded_it() -> None:
    """A container's stop has no line of systemd's: its end is Docker's own record of the exit
    (`docker inspect`'s State.FinishedAt), read before the stop's late reply or after the step's
    outcome; the beside path's instant of no downtime is that time too; a late attach and a replay
    read the same."""
    for after in (False, True):
        h = ObservedHost(old="sglang-old", new="sglang-new")
        exited = _container_beside_switch(h, exit_seen_after_reply=after)
        step = h.state.swap.steps["switch_traffic"]
        assert (step.started_at_s, step.ended_at_s) == pytest.approx((T0 + 2, exited), abs=0.01), after
        assert step.who == "ana" and not step.observed and step.state == "done"
        d = h.state.swap.downtime
        assert d.start_source.startswith("beside") and d.started_at_s == d.ended_at_s == exited, (after, d)
        live, attach, replay = h.views()
        assert live == attach == replay


def test_an_exit_docker_kept_from_an_earlier_run_dates_nothing() -> None:
    """Docker keeps a container's last FinishedAt while a later start runs: an exit before the
    container's last start is not this stop's (and a container not stopped has none)."""
    h = ObservedHost(old="sglang-old", new="sglang-new")
    h.units(T0, "running", "running", old_started=T0 - 60, old_finished=T0 - 120)
    h.at(T0 + 1).intent("switch_traffic", state="running", detail="", who="ana")
    h.units(T0 + 5, "exited", "running", old_started=T0 - 60, old_finished=T0 - 120)
    h.at(T0 + 14.6).audit("switch_traffic", f"timeout -k 5 90 docker stop -t 60 -- {h.old}", at=T0 + 14.6, took=12)
    h.at(T0 + 15).intent("switch_traffic", state="done", detail="the router sends traffic to 30001")
    step = h.state.swap.steps["switch_traffic"]
    assert step.ended_at_s == T0 + 15  # nothing of the host's: the outcome
    assert h.state.swap.downtime.started_at_s == T0 + 14.6  # the stop's reply


def test_the_consoles_stop_of_a_container_with_no_gpu_reading_ends_at_its_exit() -> None:
    h = ObservedHost(old="sglang-old", new="sglang-new")
    h.units(T0, "running", "exited", old_started=T0 - 3600)
    h.at(T0 + 1).intent("stop_old", state="running", detail="", who="ana")
    h.at(T0 + 20).audit("stop_old", f"timeout -k 5 90 docker stop -t 60 -- {h.old}", at=T0 + 20, took=18)
    h.at(T0 + 21).intent("stop_old", state="done", detail="stopped")
    h.units(T0 + 22, "exited", "exited", old_started=T0 - 3600, old_finished=T0 + 6.25)
    stop = h.state.swap.steps["stop_old"]
    assert (stop.started_at_s, stop.ended_at_s) == (T0 + 2, T0 + 6.25)
    live, attach, replay = h.views()
    assert live == attach == replay


# -- driven on the simulated host: the executor's replies come late ---------------------------------
def test_a_driven_restart_whose_replies_come_late_is_timed_by_the_simulated_hosts_records(
        tmp_path: Path) -> None:
    """The console's stop and start over real SSH on the simulated host; `systemctl stop` and
    `systemctl start` answer the console 5 s after the host ran them. The steps' times are still
    the host's: the audited command's issue, the first drained GPU reading, the new server's ready
    line in its journal. The report and a replay of the recording read the same times."""
    late = 5.0
    saved = dict(os.environ)
    try:
        rec, state = asyncio.run(run_path_demo(
            tmp_path / "out", "restart", speed=8.0, work=tmp_path / "w", quiet=True,
            steps=("download", "paths", "install", "preflight", "stop_old", "start_new"),
            late_replies={"systemctl stop --": late, "systemctl start --": late}))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    setup = state.swap.setup
    host = SimHost("restart", tmp_path / "w", setup.old_unit, setup.new_unit)
    audit = [json.loads(line) for line in (tmp_path / "w" / "audit.jsonl").read_text().splitlines()]

    def issued(action: str, verb: str) -> float:
        (entry,) = [a for a in audit if a["action"] == action and f"systemctl {verb} --" in a["command"]]
        return entry["at_s"] - entry["duration_s"]

    entries = read_recording(rec).entries
    stop, start = state.swap.steps["stop_old"], state.swap.steps["start_new"]
    assert stop.state == start.state == "done" and not stop.observed and not start.observed

    def outcome_at(key: str) -> float:  # when the executor's "done" reached the state
        return next(t for t, e in entries if isinstance(e, SwapStepChanged) and e.step.key == key
                    and e.step.state == "done" and not e.step.observed)

    # the stop: from its command's issue to the first reading of the GPUs back to the floor
    assert stop.started_at_s == pytest.approx(issued("stop_old", "stop"), abs=0.01)
    assert stop.started_at_s <= host.systemd(host.old, "Stopping")
    drained = next(e.reading.data.sampled_at_s for _, e in entries
                   if isinstance(e, ReadingChanged) and e.source == "gpu" and e.reading.data is not None
                   and (e.reading.data.sampled_at_s or 0) >= stop.started_at_s
                   and all((g.memory_used_mib or 0) <= 1024 for g in e.reading.data.gpus))
    assert stop.ended_at_s == pytest.approx(drained, abs=0.01)
    assert stop.ended_at_s < outcome_at("stop_old") - late + 1
    # the start: from its command's issue to the new server's ready line in its journal
    assert start.started_at_s == pytest.approx(issued("start_new", "start"), abs=0.01)
    assert start.started_at_s <= host.systemd(host.new, "Started")
    assert start.ended_at_s == pytest.approx(host.ready(), abs=0.01)
    # (the boot outlasts the late reply: the outcome waits for a server poll after the ready line)
    assert start.ended_at_s <= outcome_at("start_new")
    # a replay of the recording, and the report made from it, read the same times
    replay = HostState("gpu-sim-01")
    for _, event in entries:
        replay.apply(event)
    assert replay.swap.to_data() == state.swap.to_data()
    steps = {s["key"]: s for s in report_from_recording(rec)["steps"]}
    for step in (stop, start):
        assert steps[step.key]["started"] == time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(step.started_at_s))
        assert steps[step.key]["duration_s"] == step.duration_s
