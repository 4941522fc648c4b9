"""Issue 33, "Done when", for SGLang in containers on the in-place path: the swap driven by the
controller on the simulated host (console/demo/hostsim/downtime_scenario.py, runtime "container":
the 122B serving in its container with /shared/models mounted at /models, the fine-tune's container
created, not started), and each section of its report checked against what the simulated host
recorded itself: the containers' `docker inspect` and `docker logs`, the server's lifecycle file,
the console's bench and audit files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from console.demo.hostsim import story
from console.demo.hostsim.downtime_scenario import FT_CONTAINER
from console.demo.swap_demo import main
from tests.kit.downtime import (
    SimHost,
    assert_the_console_ran_a_container_paths_steps,
    play_path,
    report_headline,
)

OLD, NEW = story.NEW_CONTAINER, FT_CONTAINER  # the 122B's container serves; the fine-tune's is created


@pytest.fixture(scope="module")
def lived(tmp_path_factory: pytest.TempPathFactory) -> tuple[SimHost, Any, dict, str]:
    _, state, r, out = play_path(tmp_path_factory, "in-place", runtime="container", name="swap-report")
    return SimHost("in-place", out.parent / "w", OLD, NEW), state, r, (out / "swap-report.md").read_text()


def _began(host: SimHost) -> float:
    """Docker's time of the update's first begin line (each rank writes one)."""
    begins = host.logged_at(OLD, "Update engine weights online from disk begin")
    return min(t for t in begins if t >= begins[-1] - 1.0)


def _ended(host: SimHost) -> float:
    """Docker's time of the update's last end line."""
    return host.logged_at(OLD, "Update weights end.")[-1]


def test_the_headline_says_what_the_containers_did(lived: tuple[SimHost, Any, dict, str]) -> None:
    host, _, r, md = lived
    head = report_headline(md)
    # the running container keeps the name it was started with until a restart
    assert head[0] == f"{host.served_as(OLD)} → {host.served_as(NEW)} (still served as {host.served_as(OLD)} until restart)"
    assert head[1].startswith("downtime ") and "in-place pause (requests held while the weights load)" in head[1]
    assert "boot to ready" not in head[1]
    assert head[2].startswith("time to ready ") and "–" not in head[2].split("(")[0], head
    assert head[3].startswith("output tok/s ") and " before → " in head[3], head


def test_old_and_new_are_the_containers_and_the_model_directories_on_the_host(
        lived: tuple[SimHost, Any, dict, str]) -> None:
    """The old model's directory is its container's --model-path read through its bind mount (the
    host path, as the new one is), and the row names containers, not units."""
    host, _, r, md = lived
    on = r["old_new"]
    assert (on["old_unit"], on["new_unit"]) == (OLD, NEW)
    served, source = map(host.named, host.model_dir_on_host(OLD))
    assert on["old_model_dir"] == served
    assert on["old_model_dir"] != on["model_dir"] and on["model_dir"].startswith(source)
    assert f"| container | {OLD} | {NEW} |" in md.replace("\\", "")


def test_the_steps_are_the_ones_the_host_lived(lived: tuple[SimHost, Any, dict, str]) -> None:
    host, state, r, _ = lived
    steps = assert_the_console_ran_a_container_paths_steps(r, state)
    assert steps["install"]["state"] == "done" and f"{NEW} exists" in steps["install"]["detail"]
    s = state.swap.steps["in_place"]
    assert s.state == "done" and s.started_at_s <= _began(host)
    assert s.ended_at_s == pytest.approx(_ended(host), abs=0.01)  # the server's own "Update weights end."
    (option,) = [o for o in state.swap.paths["plan"].data()["plan"]["options"] if o["path"] == "in-place"]
    assert not any(" unit" in line for line in option["details"]), option["details"]  # the words of a container
    # The plan and the update step tell one story of a later restart: the new container must be started
    # (before, the plan said "a later restart serves the same model", a unit's story, and the update
    # step called the container the scenario had made "created by the install step")
    assert any("a later restart must start it" in line for line in option["details"]), option["details"]
    assert "same model" not in " ".join(option["details"])
    assert f"a later restart is `docker start {NEW}` (on the host, not started)" in s.detail, s.detail


def test_the_downtime_is_the_pause_the_containers_log_says(lived: tuple[SimHost, Any, dict, str]) -> None:
    host, state, r, _ = lived
    d = state.swap.downtime
    assert d.started_at_s == pytest.approx(_began(host), abs=0.01)
    assert d.ended_at_s == pytest.approx(_ended(host), abs=0.01)
    parts = r["timing"]["downtime_parts"]
    assert [p["part"] for p in parts] == ["in-place pause (requests held while the weights load)"]
    assert sum(p["seconds"] for p in parts) == pytest.approx(r["downtime_s"], abs=0.05)


def test_time_to_ready_is_the_running_containers_return_with_the_new_weights(
        lived: tuple[SimHost, Any, dict, str]) -> None:
    host, _, r, _ = lived
    assert r["timing"]["time_to_ready_s"] == pytest.approx(_ended(host) - _began(host), abs=0.05)


def test_gpu_memory_is_the_serving_containers_throughout(lived: tuple[SimHost, Any, dict, str]) -> None:
    host, _, r, _ = lived
    g = r["gpu"]
    held = {x["gpu"]: x for x in g["before"] if x["used_mib"] > 1024}
    after = {x["gpu"]: x for x in g["after"] if x["used_mib"] > 1024}
    gpus = host.life(story.NEW_UNIT)["gpus"]  # the unit the serving container mirrors
    assert sorted(held) == sorted(after) == gpus
    expected = {f"{story.NEW_PID_BASE + rank} sglang::scheduler_TP{rank}" for rank in range(len(gpus))}
    assert {p for x in held.values() for p in x["processes"]} == expected
    assert {p for x in after.values() for p in x["processes"]} == expected
    assert g["freed"] == [] and g["freed_by"] == "the swap"  # nothing stopped: the weights were replaced


def test_the_boot_timeline_is_the_update_in_the_containers_log(lived: tuple[SimHost, Any, dict, str]) -> None:
    host, _, r, _ = lived
    rows = {b["phase"]: b for b in r["boot"]}
    assert list(rows) == ["update begin", "update end"] and "no server booted" in r["boot_note"]
    assert rows["update end"]["seconds"] == pytest.approx(_ended(host) - _began(host), abs=0.05)


def test_the_benchmarks_are_the_runs_either_side_of_the_update(lived: tuple[SimHost, Any, dict, str]) -> None:
    host, _, r, _ = lived
    b = r["bench"]
    assert b["before"] is not None and b["after"] and b["note"] is None
    assert host.bench_time(b["before"]) < _began(host) and b["before"]["model"] == host.served_as(OLD)
    assert all(host.bench_time(x) >= _ended(host) for x in b["after"])
    assert b["compared"]["before"]["concurrency"] == b["compared"]["after"]["concurrency"]


def test_the_audit_is_the_update_posted_with_the_containers_own_path(lived: tuple[SimHost, Any, dict, str]) -> None:
    host, _, r, _ = lived
    written = [json.loads(line) for line in (host.work / "audit.jsonl").read_text().splitlines()]
    assert [(a["action"], a["command"]) for a in r["audit"]] == [(a["action"], a["command"]) for a in written]
    assert {a["who"] for a in r["audit"]} == {"ana"} and r["approvals"] == []
    (update,) = [a for a in r["audit"] if a["action"] == "in_place"]
    assert "update_weights_from_disk" in update["command"] and '"/models/Qwen3.5-122B-A10B-ft"' in update["command"]
    said = " ".join(a["command"] for a in r["audit"])
    assert "docker stop" not in said and "docker start" not in said and "systemctl" not in said.replace(
        "systemctl is-active", "")


def test_the_demo_refuses_a_runtime_without_a_path_it_has(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for argv, said in (([str(tmp_path), "--runtime", "container"], "--runtime container goes with --path"),
                       ([str(tmp_path), "--path", "beside", "--runtime", "compose"],
                        "--runtime compose goes with --path restart (the compose service is created by the swap)")):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].endswith(said), err
        assert not any("Traceback" in line for line in err)


def test_the_pause_is_predicted_within_ten_percent_of_the_containers_update(
        lived: tuple[SimHost, Any, dict, str]) -> None:
    """Issue 33, item 4, in a container: the in-place pause predicted from the container's recorded
    boot against the pause its log says (Docker's times of the update's lines)."""
    host, _, r, _ = lived
    (pause,) = [x for x in r["downtime_paths"]["phases"] if x["phase"] == "pause"]
    assert pause["measured_s"] == pytest.approx(_ended(host) - _began(host), abs=0.05)
    assert pause["measured_s"] == pytest.approx(pause["predicted_s"], rel=0.10), pause
    assert r["predicted_downtime_s"] == pause["predicted_s"]


def test_the_restart_it_weighed_starts_the_container_as_docker_recorded_it(
        lived: tuple[SimHost, Any, dict, str]) -> None:
    """The restart the plan weighed (had it restarted instead) starts a container, not a unit: its
    start before the server's first log line is Docker's (the serving container's State.StartedAt up
    to its launch line), never a unit's, never an assumed 0."""
    host, state, r, md = lived
    assert not [a for a in r["downtime_paths"]["assumptions"] if "first log line" in a], r["downtime_paths"]
    restart = state.swap.paths["plan"].data()["restart"]
    booted = host.logged_at(OLD, "server_args=")[0] - host.started_at(OLD)  # its one start: the earlier boot
    assert 0 < booted < 5 and restart["phases_s"]["start"] == pytest.approx(booted, abs=0.1), restart
    assert "the unit's start" not in md
