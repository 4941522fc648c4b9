"""The swap on containers (issue 26, item 5), driven from the console's Swap plan against the
simulator's `--demo-scenario docker-drive`: real SSH, a real shell, the simulated `docker` CLI whose
`start`/`stop` move the story's services, the fake SGLang that boots (or OOMs), the GPUs that drain."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from console.config import HostProfile
from console.demo.hostsim import HostSimulator
from console.demo.hostsim.scenario import NEW_CONTAINER, OLD_CONTAINER
from console.domain.swap.report import report_from_recording
from tests.kit.swap import Driven, driven_host
from tests.kit.swap import run_step as _run
from tests.kit.swap import step as _step
from tests.kit.swap import until as _until

SPEED = 8.0
READ_ONLY = "read-only: this session changes nothing on the host"


def _containers(_sim: HostSimulator, profile: HostProfile) -> HostProfile:
    assert (profile.unit, profile.container, profile.compare_container) == (None, NEW_CONTAINER, OLD_CONTAINER)
    return profile


@pytest.fixture
async def driven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Driven]:
    async with driven_host(tmp_path, monkeypatch, scenario="docker-drive", speed=SPEED, profile=_containers) as d:
        yield d


@pytest.fixture
async def driven_oom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Driven]:
    async with driven_host(tmp_path, monkeypatch, scenario="docker-drive", speed=SPEED, oom=True,
                           profile=_containers) as d:
        yield d


@pytest.fixture
async def driven_read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Driven]:
    async with driven_host(tmp_path, monkeypatch, scenario="docker-drive", speed=SPEED, read_only=True,
                           profile=_containers) as d:
        yield d


async def _running(d: Driven, name: str) -> str:
    r = await d.runner.session.transport.run(f"docker inspect -f '{{{{.State.Running}}}}' -- {name}", timeout=10)
    return r.text.strip()


async def _ready_to_swap(d: Driven) -> None:
    """Readings in, the new container checked (install), every gate check that cannot pass on this
    host without a download overridden by name (the gate still runs: the stop is refused first)."""
    await _until(lambda: d.state.data("gpu") is not None and d.state.data("service") is not None
                 and d.state.data("service").old is not None, 30, "GPU and service readings")
    await _run(d, "install", 60)
    assert _step(d, "install")[0] == "done", _step(d, "install")
    await _run(d, "stop_old", 60)
    assert _step(d, "stop_old")[0] == "refused" and f"{OLD_CONTAINER} still serves" in _step(d, "stop_old")[1]
    assert await _running(d, OLD_CONTAINER) == "true"
    for check in d.runner.swap.evaluate_gate():
        if not check.passes:
            assert d.runner.swap.override(check.name, check.name) is None


def r_step(r: dict, key: str) -> dict:
    return next(s for s in r["steps"] if s["key"] == key)


async def test_the_container_swap_end_to_end_from_the_consoles_actions(driven: Driven) -> None:
    d = driven
    swap = d.runner.swap
    await _until(lambda: d.state.data("gpu") is not None and d.state.data("service") is not None, 30, "readings")
    assert all(g.memory_used_mib > 90_000 for g in d.state.data("gpu").gpus)
    setup = d.state.swap.setup
    assert (setup.old_unit, setup.new_unit) == (OLD_CONTAINER, NEW_CONTAINER)
    # The previews show the exact docker commands, nothing of systemctl.
    why, preview = swap.preview("stop_old")
    assert preview is not None, why
    assert f"timeout -k 5 90 docker stop -t 60 -- {OLD_CONTAINER}" in preview.lines
    assert preview.gate  # the same gate, shown with the stop
    why, preview = swap.preview("install")
    assert preview is not None, why
    assert "timeout -k 5 30 docker image inspect --format '{{.Id}}' -- lmsysorg/sglang:v0.5.23-cu129" in preview.lines
    assert "timeout -k 5 1800 docker pull -- lmsysorg/sglang:v0.5.23-cu129" in preview.lines
    assert not any("systemctl" in line for line in preview.lines)

    await _ready_to_swap(d)
    assert "lmsysorg/sglang:v0.5.23-cu129 is on the host" in _step(d, "install")[1]
    assert f"{NEW_CONTAINER} exists (exited)" in _step(d, "install")[1]
    assert d.state.swap.steps["install"].title == "Check the image, create the new container"

    await _run(d, "stop_old", 60)
    state, detail = _step(d, "stop_old")
    assert state == "done" and f"{OLD_CONTAINER} stopped" in detail and "drained" in detail, detail
    assert await _running(d, OLD_CONTAINER) == "false"
    assert all(g.memory_used_mib <= 1024 for g in d.state.data("gpu").gpus)
    assert d.state.swap.downtime is not None and d.state.swap.downtime.started_at_s is not None

    await _run(d, "start_new", 120)
    state, detail = _step(d, "start_new")
    assert state == "done" and "after docker start" in detail, detail
    assert await _running(d, NEW_CONTAINER) == "true"
    assert d.state.data("server").status == "ready"
    downtime = d.state.swap.downtime
    assert downtime.ended_at_s is not None and downtime.ended_at_s > downtime.started_at_s
    assert downtime.end_source == f"{NEW_CONTAINER} ready"

    await _run(d, "benchmark", 120)
    assert _step(d, "benchmark")[0] == "done", _step(d, "benchmark")

    audit = [(e.command, e.exit_status) for e in d.state.swap.audit]
    assert (f"timeout -k 5 90 docker stop -t 60 -- {OLD_CONTAINER}", 0) in audit
    assert (f"timeout -k 5 60 docker start -- {NEW_CONTAINER}", 0) in audit
    assert not any("systemctl" in c for c, _ in audit)
    lines = [json.loads(x) for x in (d.runner.swap.audit_file or Path("/nonexistent")).read_text().splitlines()]
    assert len(lines) == len(d.state.swap.audit)

    d.recorder.close()
    assert d.recorder.path is not None
    r = report_from_recording(d.recorder.path)
    on = r["old_new"]
    assert on["old_unit"] == OLD_CONTAINER and on["new_unit"] == NEW_CONTAINER
    states = [s["state"] for s in r["steps"]]
    assert states.count("done") >= 4 and "failed" not in states, r["steps"]
    assert NEW_CONTAINER in r["timing"]["downtime_to_source"]
    assert any(f"docker stop -t 60 -- {OLD_CONTAINER}" in a["command"] and a["exit_status"] == 0
               for a in r["audit"])
    assert "hf_sImUlAtEdToKeN" not in json.dumps(r)
    # The report's sections on the container runtime (issue 33): GPU memory freed by the docker stop
    # (before minus the drained reading, the stop step's own words the same), the downtime's parts
    # adding up to it, time to ready the new container's boot.
    g = r["gpu"]
    assert g["freed_by"] == "the stop" and g["freed"] and all(x["used_mib"] <= 1024 for x in g["stopped"]), g
    assert {x["gpu"]: x["mib"] for x in g["freed"]} == {x["gpu"]: x["used_mib"] - y["used_mib"]
                                                       for x, y in zip(g["before"], g["stopped"], strict=True)}
    assert all(f"GPU {x['gpu']} {x['mib']:,} MiB" in r_step(r, "stop_old")["detail"] for x in g["freed"]), r_step(r, "stop_old")
    assert sum(p["seconds"] for p in r["timing"]["downtime_parts"]) == pytest.approx(r["downtime_s"], abs=0.05)
    assert 0 < r["timing"]["time_to_ready_s"] <= r["downtime_s"]


async def test_a_new_container_that_dies_booting_is_rolled_back_by_starting_the_old_one(driven_oom: Driven) -> None:
    d = driven_oom
    await _ready_to_swap(d)
    await _run(d, "stop_old", 60)
    assert _step(d, "stop_old")[0] == "done", _step(d, "stop_old")
    await _run(d, "start_new", 120)
    state, detail = _step(d, "start_new")
    assert state == "failed" and "died while booting" in detail, detail
    assert f"{NEW_CONTAINER} exited (exit code 1)" in detail and "out of memory" in detail.lower(), detail
    assert _step(d, "benchmark")[0] == "pending"  # nothing after it ran
    await _run(d, "rollback", 120)
    state, detail = _step(d, "rollback")
    assert state == "done" and f"{OLD_CONTAINER} ready again" in detail, detail
    assert await _running(d, OLD_CONTAINER) == "true"
    downtime = d.state.swap.downtime
    assert downtime.ended_at_s is not None and "rollback" in downtime.end_source
    audit = [e.command for e in d.state.swap.audit if e.action == "rollback"]
    assert f"timeout -k 5 90 docker stop -t 60 -- {NEW_CONTAINER}" in audit
    assert f"timeout -k 5 60 docker start -- {OLD_CONTAINER}" in audit


HOSTILE = ["x; touch {marker}", "$(touch {marker})", "`touch {marker}`", "--help", "-f", "a b", "a\nb",
           "../x", "a'b", ""]


async def test_hostile_container_names_are_refused_before_any_command(driven: Driven, tmp_path: Path) -> None:
    d = driven
    swap = d.runner.swap
    await _until(lambda: d.state.data("service") is not None, 30, "the service reading")
    marker = tmp_path / "pwned"
    base = swap.profile
    for raw in HOSTILE:
        value = raw.format(marker=marker)
        for field in ("container", "compare_container"):
            if field == "container" and not value:
                continue  # no container at all: the profile names a unit or nothing
            swap.profile = replace(base, **{field: value})
            # Each action that names this container (and the whole plan, which builds them all first).
            keys = ("install", "start_new") if field == "container" else ("stop_old",)
            for key in (*keys, "rollback", "swap"):
                assert swap.request(key) == f"not a container name: {value!r}", (field, key)
    swap.profile = base
    assert not d.state.swap.audit  # nothing ran
    assert not marker.exists()
    assert await _running(d, OLD_CONTAINER) == "true"


async def test_read_only_refuses_every_container_action(driven_read_only: Driven) -> None:
    d = driven_read_only
    swap = d.runner.swap
    await _until(lambda: d.state.data("service") is not None, 30, "the service reading")
    setup = d.state.swap.setup
    assert setup is not None and setup.read_only
    assert (setup.old_unit, setup.new_unit) == (OLD_CONTAINER, NEW_CONTAINER)
    # The actions are there (their docker commands), and every one is refused.
    assert swap.build("stop_old")[0].commands[0].script.endswith(f"docker stop -t 60 -- {OLD_CONTAINER}")
    assert swap.build("rollback")[0].commands[1].script.endswith(f"docker start -- {OLD_CONTAINER}")
    for key in ("download", "install", "preflight", "stop_old", "start_new", "rollback", "benchmark", "swap"):
        assert swap.request(key) == READ_ONLY
        assert swap.preview(key)[1] is None
    assert swap.override("diff", "diff") == READ_ONLY
    assert not d.state.swap.audit
    assert await _running(d, OLD_CONTAINER) == "true" and await _running(d, NEW_CONTAINER) == "false"


async def test_a_compose_service_is_pulled_created_and_swapped_in(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The new side as a compose service whose image is not on the host: install pulls it and
    creates the container (`docker compose create`), named by the file's container_name."""
    from console.demo.hostsim import docker_drive

    def compose_service(sim: HostSimulator, profile: HostProfile) -> HostProfile:
        return replace(profile, container=None, compose=sim.host_path(docker_drive.COMPOSE_FILE),
                       compose_service=docker_drive.COMPOSE_SERVICE)

    async with driven_host(tmp_path, monkeypatch, scenario="docker-drive", speed=SPEED, profile=compose_service,
                           start=lambda sim: docker_drive.start(sim, compose=True), bench_plan=None) as d:
        state, runner = d.state, d.runner
        compose = d.sim.host_path(docker_drive.COMPOSE_FILE)
        await _until(lambda: state.data("service") is not None and state.data("service").old is not None
                     and state.data("service").new.error is None, 30, "the compose service read")
        assert state.data("service").new.name == NEW_CONTAINER  # the file's container_name
        assert await _running(d, NEW_CONTAINER) == ""  # no such container yet
        why, preview = runner.swap.preview("install")
        assert preview is not None, why
        image = docker_drive.COMPOSE_IMAGE
        assert f"timeout -k 5 1800 docker pull -- {image}" in preview.lines
        assert (f"timeout -k 5 300 docker compose -f {compose} create --no-recreate -- "
                f"{docker_drive.COMPOSE_SERVICE}") in preview.lines
        await _ready_to_swap(d)
        detail = _step(d, "install")[1]
        assert f"pulled {image}" in detail and f"created {NEW_CONTAINER} from {compose}" in detail, detail
        assert await _running(d, NEW_CONTAINER) == "false"  # created, not started
        audit = [(e.command, e.exit_status) for e in state.swap.audit]
        assert (f"timeout -k 5 30 docker image inspect --format '{{{{.Id}}}}' -- {image}", 1) in audit
        assert (f"timeout -k 5 1800 docker pull -- {image}", 0) in audit
        await _run(d, "stop_old", 60)
        assert _step(d, "stop_old")[0] == "done", _step(d, "stop_old")
        await _run(d, "start_new", 120)
        assert _step(d, "start_new")[0] == "done", _step(d, "start_new")
        assert await _running(d, NEW_CONTAINER) == "true"
        assert state.swap.setup is not None and state.swap.setup.new_unit == NEW_CONTAINER


async def test_a_docker_daemon_down_at_the_start_is_one_line_and_the_rollback_works_once_it_is_back(
        driven: Driven) -> None:
    from console.demo.hostsim.fake_docker import DAEMON_DOWN

    d = driven
    await _ready_to_swap(d)
    await _run(d, "stop_old", 60)
    assert _step(d, "stop_old")[0] == "done", _step(d, "stop_old")
    down = d.sim.root / ".sim" / "docker-down"
    down.write_text("")
    await _run(d, "start_new", 60)
    state, detail = _step(d, "start_new")
    assert state == "failed" and detail == f"docker start {NEW_CONTAINER} exited 1: {DAEMON_DOWN}", detail
    down.unlink()
    await _run(d, "rollback", 120)
    state, detail = _step(d, "rollback")
    assert state == "done" and f"{OLD_CONTAINER} ready again" in detail, detail
    assert await _running(d, OLD_CONTAINER) == "true"


def test_a_container_that_exits_or_restarts_in_a_loop_is_named_with_its_exit_code() -> None:
    from console.domain.swap.container_steps import why_gone

    up = {"status": "running", "running": "true", "exit_code": "0", "restarts": "0", "oom_killed": "false"}
    assert why_gone("c", up, 0) is None
    assert why_gone("c", {**up, "status": "restarting", "running": "false"}, 0) is None  # may come up yet
    looped = {**up, "status": "restarting", "running": "false", "exit_code": "137", "restarts": "3",
              "oom_killed": "true"}
    assert why_gone("c", looped, 1) == "c is restarting in a loop: 2 restarts since the start, last exit " \
                                      "code 137; OOM-killed"
    assert why_gone("c", {**up, "status": "exited", "running": "false", "exit_code": "1"}, 0) == \
        "c exited (exit code 1)"
    assert why_gone("c", {}, 0) == "c is no longer on the host"


async def test_a_connection_drop_during_docker_stop_is_re_read_from_the_host(driven: Driven) -> None:
    d = driven
    swap = d.runner.swap
    await _ready_to_swap(d)
    assert swap.request("stop_old") is None
    await _until(lambda: any("docker stop" in line for line in d.state.swap.steps["stop_old"].commands), 10,
                 "the stop step")
    for conn in list(d.sim.open_connections):
        conn.close()
    await swap.wait_idle(90)
    state, detail = _step(d, "stop_old")
    host_says = await _running(d, OLD_CONTAINER)
    assert any(e.note == "connection lost" for e in d.state.swap.audit), list(d.state.swap.audit)
    # Whatever the drop did, the step says what `docker inspect` says, never an assumption.
    if host_says == "true":
        assert state == "failed" and "did not take effect" in detail, detail
    else:
        assert state == "done" and "drained" in detail, detail
