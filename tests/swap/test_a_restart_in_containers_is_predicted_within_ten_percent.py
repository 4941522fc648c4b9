"""Issue 33, item 4, for SGLang in containers: the restart driven by the controller on the simulated
host (console/demo/hostsim/downtime_scenario.py, runtime "container": the 397B serving in its
container, the 122B's container created, not started; runtime "compose": the 122B a compose
service whose container the install creates), and its predicted downtime against the one the
observer measured within 10 %, each phase's figure against what the simulated Docker recorded
(the containers' `docker inspect` and `docker logs`)."""

from __future__ import annotations

from typing import Any

import pytest

from console.demo.hostsim import story
from tests.kit.downtime import SimHost, play_path

OLD, NEW = story.OLD_CONTAINER, story.NEW_CONTAINER
RUNTIMES = ("container", "compose")


@pytest.fixture(scope="module", params=RUNTIMES)
def restarted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[SimHost, Any, dict]:
    # Speed 8 and no pre-warm, as the systemd restart's check (tests/swap/test_downtime_swap.py): the
    # console's own round trips do not shrink with the simulator's clock; a cold read checks the disk rate.
    _, state, r, out = play_path(tmp_path_factory, "restart", runtime=request.param, speed=8.0, name="swap-report",
                                 steps=("download", "paths", "install", "preflight", "stop_old", "start_new",
                                        "benchmark"))
    return SimHost("restart", out.parent / "w", OLD, NEW), state, r


def test_the_restart_in_a_container_is_predicted_within_ten_percent(restarted: tuple[SimHost, Any, dict]) -> None:
    host, state, r = restarted
    assert {k: state.swap.steps[k].state for k in ("stop_old", "start_new")} == {"stop_old": "done",
                                                                                  "start_new": "done"}
    d = r["downtime_paths"]
    assert d["chosen"] == "restart" and [x["phase"] for x in d["phases"] if x["phase"] != "gap"][:2] == [
        "stop", "start"], d
    # the measured phases are the downtime's, in parts: from the last request to ready they add up to it
    # (the log's own clock against the observer's dates: within 5 %; before, the gap between the last
    # request and the stop was left out)
    assert sum(x["measured_s"] for x in d["phases"]) == pytest.approx(r["downtime_s"], rel=0.05), d["phases"]
    weights = next(x for x in d["phases"] if x["phase"] == "weights")
    assert weights["measured_s"] == pytest.approx(weights["predicted_s"], rel=0.10), d["phases"]
    assert r["downtime_s"] == pytest.approx(r["predicted_downtime_s"], rel=0.10), d["phases"]
    assert "from 1 earlier boot on this host" in d["prediction_text"] and "0 % in page cache" in d["prediction_text"]


def test_the_container_start_it_predicted_is_the_one_docker_recorded_for_the_earlier_boot(
        restarted: tuple[SimHost, Any, dict]) -> None:
    """The start before the server's first line is learned from the old container's earlier boot:
    Docker's State.StartedAt up to its launch line; never counted as 0, never a unit's."""
    host, state, r = restarted
    d = r["downtime_paths"]
    assert not [a for a in d["assumptions"] if "first log line" in a], d["assumptions"]
    start = next(x for x in d["phases"] if x["phase"] == "start")
    booted = host.logged_at(OLD, "server_args=")[0] - host.started_at(OLD)  # stopped since, never started again
    assert 0 < booted < 5 and start["predicted_s"] == pytest.approx(booted, abs=0.06), (start, booted)
    # the new container's boot: Docker's start of it, then its launch line
    assert host.started_at(NEW) <= host.logged_at(NEW, "server_args=")[-1]


def test_the_stop_is_the_old_containers_exit_as_docker_recorded_it(restarted: tuple[SimHost, Any, dict]) -> None:
    """The measured stop ends no earlier than the old container's exit (Docker's FinishedAt): the
    new container starts only after the old one has exited and its memory drained."""
    host, state, r = restarted
    stop = state.swap.steps["stop_old"]
    finished = host.inspect(OLD)["State"]["FinishedAt"]
    assert finished != "0001-01-01T00:00:00Z" and not host.inspect(OLD)["State"]["Running"]
    assert stop.ended_at_s is not None and stop.ended_at_s <= host.started_at(NEW)
    audit = " ".join(a["command"] for a in r["audit"])
    assert "docker stop -t " in audit and f"docker start -- {NEW}" in audit, audit


@pytest.fixture(scope="module")
def prewarmed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict]:
    _, state, r, _ = play_path(tmp_path_factory, "restart", runtime="container", speed=8.0, name="swap-report",
                               steps=("download", "paths", "prewarm", "paths", "install", "preflight", "stop_old",
                                      "start_new", "benchmark"))
    return state, r


def test_a_prewarmed_container_restart_reads_the_page_cache_no_slower_than_the_disk(
        prewarmed: tuple[Any, dict]) -> None:
    """Item 2: after a pre-warm the container's weights are predicted at the page cache's rate, never
    below the disk's (the rate measured by dd on a cached shard, or the disk's), and the warm read
    the new container did is within 10 % of it."""
    state, r = prewarmed
    restart = state.swap.paths["plan"].data()["restart"]  # the plan after the pre-warm (the last one)
    assert restart["cached_fraction"] == pytest.approx(1.0, abs=0.01), restart
    assert restart["cache_gbps"] >= restart["disk_gbps"] > 0, restart
    cold_s = restart["weights_bytes"] / 1e9 / restart["disk_gbps"]
    d = r["downtime_paths"]
    weights = next(x for x in d["phases"] if x["phase"] == "weights")
    assert weights["predicted_s"] <= cold_s, (weights, cold_s)
    assert weights["measured_s"] == pytest.approx(weights["predicted_s"], rel=0.10), d["phases"]
    said = [a for a in d["assumptions"] if "page-cache read rate" in a]
    assert len(said) == 1, d["assumptions"]  # named once
