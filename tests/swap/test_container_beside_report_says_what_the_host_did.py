"""Issue 33, "Done when", for SGLang in containers on the beside path: the swap driven by the
controller on the simulated 8-GPU host (console/demo/hostsim/downtime_scenario.py, runtime
"container": the 397B serving in its container on GPUs 0-3, the 122B's container created for GPUs
4-7 and the next port, a router in front), and each section of its report checked against what the
simulated host recorded itself: the containers' `docker inspect` and `docker logs`, the servers'
lifecycle files, the console's bench and audit files. Its `docker stop` answers the console 2 s
after the simulated Docker has stopped the old container (an executor whose reply comes late)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from console.core.recording import read_recording
from console.core.state import HostState
from console.demo.hostsim import story
from tests.kit.downtime import (
    SimHost,
    assert_the_console_ran_a_container_paths_steps,
    play_path,
    report_headline,
)

OLD, NEW = story.OLD_CONTAINER, story.NEW_CONTAINER
LATE_S = 2.0  # `docker stop` answers the console this long after Docker stopped the container


@pytest.fixture(scope="module")
def lived(tmp_path_factory: pytest.TempPathFactory) -> tuple[SimHost, Any, dict, str]:
    _, state, r, out = play_path(tmp_path_factory, "beside", runtime="container", name="swap-report",
                                 late_replies={"docker stop": LATE_S})
    return SimHost("beside", out.parent / "w", OLD, NEW), state, r, (out / "swap-report.md").read_text()


def _started(host: SimHost) -> float:
    """The new container's start: the first line of its `docker logs` (Docker's time)."""
    return host.container_log(NEW)[0][0]


def _ready(host: SimHost) -> float:
    """The new server's ready line, at Docker's time of it."""
    return host.logged_at(NEW, "The server is fired up")[-1]


def _stopping(host: SimHost) -> float:
    """The old container's stop, as its output says it (Docker's time of the line)."""
    return [t for t, line in host.container_log(OLD) if line.startswith("Stopping ")][-1]


def test_the_headline_says_what_the_containers_did(lived: tuple[SimHost, Any, dict, str]) -> None:
    host, _, r, md = lived
    head = report_headline(md)
    assert head[0] == f"{host.served_as(OLD)} → {host.served_as(NEW)}"
    assert head[1].startswith("downtime ") and "none, traffic moved to the new server before the old one stopped" \
        in head[1] and "boot to ready" not in head[1]
    assert head[2].startswith("time to ready ") and "(docker start)" in head[2] and "systemctl" not in head[2], head
    assert head[3].startswith("output tok/s ") and " before → " in head[3], head


def test_old_and_new_are_the_containers_and_the_model_directories_on_the_host(
        lived: tuple[SimHost, Any, dict, str]) -> None:
    host, _, r, md = lived
    on = r["old_new"]
    assert (on["old_unit"], on["new_unit"], on["kind"]) == (OLD, NEW, "container")
    assert on["old_model_dir"] == host.named(host.model_dir_on_host(OLD)[0])
    assert f"| container | {OLD} | {NEW} |" in md.replace("\\", "")


def test_the_steps_are_the_ones_the_host_lived(lived: tuple[SimHost, Any, dict, str]) -> None:
    host, state, r, _ = lived
    assert_the_console_ran_a_container_paths_steps(r, state)
    s = state.swap.steps
    assert s["beside"].started_at_s <= _started(host) <= _ready(host) <= s["beside"].ended_at_s
    assert s["switch_traffic"].started_at_s <= _stopping(host) <= s["switch_traffic"].ended_at_s
    ran = [st.started_at_s for st in state.swap.ordered_steps() if st.state == "done" and st.started_at_s]
    assert ran == sorted(ran)


def test_there_was_no_downtime_as_the_hosts_order_says(lived: tuple[SimHost, Any, dict, str]) -> None:
    host, state, r, _ = lived
    assert r["downtime_s"] == 0.0 and r["timing"]["downtime_parts"] == []
    assert _ready(host) < _stopping(host)  # the new server served before the old one was stopped
    d = state.swap.downtime
    assert d.start_source.startswith("beside") and d.started_at_s == d.ended_at_s
    assert abs(d.started_at_s - _stopping(host)) < 5


def test_the_predicted_downtime_is_the_measured_one(lived: tuple[SimHost, Any, dict, str]) -> None:
    """Issue 33, item 4, in containers beside: 0 s predicted (the old server serves until the router
    moved traffic), 0 s measured from the host's order; the row says both."""
    _, _, r, _ = lived
    d = r["downtime_paths"]
    assert d["chosen"] == "beside" and r["predicted_downtime_s"] == 0.0
    assert d["phases"] == [{"phase": "downtime", "title": d["phases"][0]["title"], "predicted_s": 0.0,
                            "measured_s": 0.0, "error_pct": None}], d["phases"]


def test_time_to_ready_is_the_new_containers_boot(lived: tuple[SimHost, Any, dict, str]) -> None:
    host, _, r, _ = lived
    booted = _ready(host) - _started(host)
    assert booted - 0.05 <= r["timing"]["time_to_ready_s"] <= booted + 2.0, (r["timing"], booted)
    assert r["timing"]["time_to_ready_from"] == "the new container's start (docker start)"


def test_gpu_memory_moves_from_the_old_containers_gpus_to_the_new_ones(lived: tuple[SimHost, Any, dict, str]) -> None:
    host, _, r, _ = lived
    g = r["gpu"]
    before = {x["gpu"]: x for x in g["before"] if x["used_mib"] > 1024}
    after = {x["gpu"]: x for x in g["after"] if x["used_mib"] > 1024}
    old_gpus, new_gpus = host.life(story.OLD_UNIT)["gpus"], host.life(story.NEW_UNIT)["gpus"]
    assert sorted(before) == old_gpus == [0, 1, 2, 3] and sorted(after) == new_gpus == [4, 5, 6, 7], g
    assert {p for x in before.values() for p in x["processes"]} == {
        f"{story.OLD_PID_BASE + rank} sglang::scheduler_TP{rank}" for rank in range(4)}
    assert {p for x in after.values() for p in x["processes"]} == {
        f"{story.NEW_PID_BASE + rank} sglang::scheduler_TP{rank}" for rank in range(4)}
    then = {x["gpu"]: x["used_mib"] for x in (g["stopped"] or g["after"])}
    assert {x["gpu"]: x["mib"] for x in g["freed"]} == {i: before[i]["used_mib"] - then[i] for i in old_gpus}


def test_the_boot_timeline_is_the_new_containers_own_lines(lived: tuple[SimHost, Any, dict, str]) -> None:
    host, _, r, _ = lived
    rows = {b["phase"]: b for b in r["boot"]}
    assert rows["launch"]["stamp"] == host.logged(NEW, "server_args=")[-1]
    assert rows["ready"]["stamp"] == host.logged(NEW, "The server is fired up")[-1]
    assert rows["ready"]["at_s"] == pytest.approx(host.logged_at(NEW, "The server is fired up")[-1], abs=1e-3) and rows["ready"]["clock"] == "docker"


def test_the_benchmarks_are_the_old_containers_run_and_the_new_ones(lived: tuple[SimHost, Any, dict, str]) -> None:
    host, _, r, _ = lived
    b = r["bench"]
    assert b["before"] is not None and b["after"] and b["note"] is None
    assert host.bench_time(b["before"]) < _started(host) and b["before"]["model"] == host.served_as(OLD)
    assert all(host.bench_time(x) >= _ready(host) for x in b["after"])
    assert {x["model"] for x in b["after"]} == {host.served_as(NEW)}


def test_the_audit_is_the_containers_start_the_routers_moves_and_the_old_ones_stop(
        lived: tuple[SimHost, Any, dict, str]) -> None:
    host, _, r, _ = lived
    written = [json.loads(line) for line in (host.work / "audit.jsonl").read_text().splitlines()]
    assert [(a["action"], a["command"]) for a in r["audit"]] == [(a["action"], a["command"]) for a in written]
    assert {a["who"] for a in r["audit"]} == {"ana"} and r["approvals"] == []
    said = {a["action"]: [] for a in r["audit"]}
    for a in r["audit"]:
        said[a["action"]].append(a["command"])
    check, start = said["beside"]  # the port checked on the host (the containers share its network), then the start
    assert check.startswith("timeout -k 5 8 grep -h -i -e local_address -e ") and "/proc/net/tcp" in check, check
    assert start == f"timeout -k 5 60 docker start -- {NEW}"
    moves = " ".join(said["switch_traffic"])
    assert "/add_worker?url=http://127.0.0.1:" in moves and "/remove_worker?url=" in moves
    assert said["switch_traffic"][-1] == f"timeout -k 5 90 docker stop -t 60 -- {OLD}"


def _docker_time(stamp: str) -> float:
    """`docker inspect`'s RFC 3339 time with up to 9 digits of fraction, read here on its own."""
    head, _, rest = stamp.rstrip("Z").partition(".")
    return dt.datetime.fromisoformat(head + "+00:00").timestamp() + (float(f"0.{rest}") if rest else 0.0)


def test_the_traffic_switch_ends_at_the_old_containers_exit_as_docker_recorded_it(
        lived: tuple[SimHost, Any, dict, str]) -> None:
    """The switch's last act is the old container's stop: it ends at Docker's own time of the exit
    (`State.FinishedAt`), not when `docker stop` answered the console 2 s later; the beside path's
    instant of no downtime is the same time; a late attach and a replay of the recording read the
    same."""
    host, state, r, _ = lived
    inspect = host.inspect(OLD)["State"]
    assert inspect["Running"] is False and inspect["FinishedAt"] != "0001-01-01T00:00:00Z", inspect
    finished = _docker_time(inspect["FinishedAt"])
    assert _docker_time(inspect["StartedAt"]) < _stopping(host) <= finished
    written = [json.loads(line) for line in (host.work / "audit.jsonl").read_text().splitlines()]
    (stop,) = [a for a in written if a["command"].endswith(f"docker stop -t 60 -- {OLD}")]
    assert stop["at_s"] >= finished + LATE_S  # the reply came late
    switch = state.swap.steps["switch_traffic"]
    assert switch.state == "done" and switch.who == "ana" and not switch.observed
    assert switch.ended_at_s == pytest.approx(finished, abs=1e-3), (switch, inspect["FinishedAt"], stop)
    d = state.swap.downtime
    assert d.started_at_s == d.ended_at_s == pytest.approx(finished, abs=1e-3), d
    steps = {s["key"]: s for s in r["steps"]}
    assert steps["switch_traffic"]["duration_s"] == pytest.approx(switch.ended_at_s - switch.started_at_s, abs=0.01)
    (recording,) = (host.work / "recordings").glob("*.jsonl*")
    replay = HostState(state.host)
    for _, event in read_recording(recording).entries:
        replay.apply(event)
    attach = HostState.from_snapshot(state.snapshot())
    assert replay.swap.to_data() == attach.swap.to_data() == state.swap.to_data()
