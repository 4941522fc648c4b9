"""The restart swap of a compose service through the console's own controller on the real dockerd (over
OpenSSH's sshd, the real docker CLI and the test run's Compose v2 plugin on its PATH): a compose project
(tests/real/compose_host.py) whose service `sglang` serves and whose `sglang-next` is the fine-tune's;
the console's install creates `sglang-next`'s container (`docker compose create`), the gate, stop the
old service's container and drain, start the new one and follow it to ready. The module runs that swap
once (its fixture); its report is then read section by section against what Docker and Compose
recorded: `docker inspect` (Compose's labels, the containers' PIDs and arguments), `docker events`
(create, start, die), `docker compose logs` (the servers' lines with Docker's times) and the audit
file."""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from console.core.derive.swap_observer import log_time
from tests.real.compose_host import ComposeProject, compose_config, compose_down, compose_logs, compose_project
from tests.real.console_on_host import (
    WHO,
    LivedSwapFacts,
    audit_entries,
    check_audit_is_the_file,
    check_renders_every_section,
    check_step_rows,
    console_on,
    console_profile,
    logged,
)
from tests.real.console_on_host import server_stamp as _stamp
from tests.real.daemons import Dockerd
from tests.real.docker_host import (
    close_host,
    docker_event,
    docker_events,
    docker_time,
    inspect,
    open_host,
    require_sshd,
    standin_gpus,
)
from tests.real.ports import free_port

pytestmark = [pytest.mark.real_docker, pytest.mark.timeout(480)]

STEPS = ("install", "preflight", "stop_old", "start_new")
OLD_MODEL, NEW_MODEL = "/models/Qwen3-8B", "/models/Qwen3-14B"


@dataclass
class LivedSwap(LivedSwapFacts):
    compose: ComposeProject
    old: str
    new: str
    old_before: dict[str, Any]  # docker inspect of the old service's container before the swap
    at_end: dict[str, dict[str, Any]]
    events: list[tuple[float, str, str]]
    logs: dict[str, list[tuple[float, str]]]  # `docker compose logs -t SERVICE`: (Docker's time, line)
    compose_config: dict[str, Any]  # `docker compose config --format json`


def _swap_restart(dockerd: Dockerd, directory: Path) -> LivedSwap:
    async def drive() -> LivedSwap:
        host = await open_host(dockerd, directory / "host")
        tag = secrets.token_hex(4)
        standin_gpus(host, tag)
        port = free_port()
        project = compose_project(dockerd, directory / "project", f"gcrs{tag}", old_port=port, new_port=port,
                                  old_model=OLD_MODEL, new_model=NEW_MODEL,
                                  env={"STANDIN_NVIDIA_SMI_TAG": tag})
        old, new = project.old, project.new
        assert host.sshd is not None
        prof = console_profile("real-compose", host.sshd.options(), compose=str(project.file),
                               compose_service=project.new_service, compare_container=old, server_port=port)
        try:
            async with console_on(prof, directory / "console", label="real-compose") as console:
                await console.until(lambda: (g := console.state.data("gpu")) is not None and any(
                    (x.memory_used_mib or 0) > 0 for x in g.gpus), 90, "the old service's server on the stand-in GPUs")
                await console.until(lambda: (s := console.state.data("service")) is not None and s.new is not None
                                    and s.new.name == new, 60, "the service pane naming Compose's new container")
                old_before = inspect(dockerd, old)
                began = time.time()
                said = {"install": await console.run_step("install")}
                for check in console.swap.evaluate_gate():
                    if not check.passes:  # no model directory, no GPUs: the operator overrides by name
                        assert console.swap.override(check.name, check.name, WHO) is None
                for key in STEPS[1:]:
                    said[key] = await console.run_step(key)
                    assert said[key][0] == "done", f"{key}: {said[key][1]}"
                pid = inspect(dockerd, new)["State"]["Pid"]
                # The processes column is read every few seconds: the report is taken once a GPU reading
                # names the new container's server (what the host runs now).
                await console.until(lambda: any(str(p.pid) == str(pid) for g in console.state.data("gpu").gpus
                                                for p in g.processes or ()), 60, "the GPUs held by the new container")
                # The step is done at /health_generate's answer; the ready line reaches the console's log
                # by `docker logs` on its own cadence (under load, after the GPU reading): the operator's
                # downtime ends when the console has read it, and so is the report taken.
                await console.until(lambda: (d := console.state.swap.downtime) is not None
                                    and d.ended_at_s is not None, 60, "the new server's ready line read")
                report = console.report()
                steps = dict(console.state.swap.steps)
                downtime = console.state.swap.downtime
            return LivedSwap(
                compose=project, old=old, new=new, report=report, steps=steps, said=said, downtime=downtime,
                began_s=began, old_before=old_before, at_end={n: inspect(dockerd, n) for n in (old, new)},
                events=docker_events(dockerd, began - 1, time.time() + 1, old, new),
                logs={s: compose_logs(dockerd, project, s) for s in (project.old_service, project.new_service)},
                audit_file=audit_entries(directory / "console"),
                compose_config=compose_config(dockerd, project))
        finally:
            compose_down(dockerd, project)
            await close_host(host)

    return asyncio.run(drive())


@pytest.fixture(scope="module")
def lived(dockerd: Dockerd, tmp_path_factory: pytest.TempPathFactory) -> LivedSwap:
    """One restart swap of a compose service per module, through the console's controller on the real dockerd."""
    require_sshd()
    return _swap_restart(dockerd, tmp_path_factory.mktemp("compose-restart"))


def _event(lived: LivedSwap, action: str, name: str, after_s: float = 0.0) -> float:
    return docker_event(lived.events, action, name, after_s)


def _line(lived: LivedSwap, service: str, text: str, after_s: float = 0.0) -> tuple[float, str]:
    return logged(lived.logs[service], text, since_s=after_s, who=service)  # type: ignore[return-value]


def _services(lived: LivedSwap) -> dict[str, Any]:
    """The compose file as Compose itself reads it (`docker compose config --format json`)."""
    services: dict[str, Any] = lived.compose_config["services"]
    return services


# -- the run itself ------------------------------------------------------------------------------------
def test_compose_created_the_new_service_and_docker_stopped_the_old_before_starting_it(lived: LivedSwap) -> None:
    old, new, c = lived.old, lived.new, lived.compose
    assert {k: v[0] for k, v in lived.said.items()} == {k: "done" for k in STEPS}, lived.said
    assert lived.said["install"][1].endswith(f"created {new} from {c.file}"), lived.said
    assert lived.said["stop_old"][1].startswith(f"{old} stopped; GPU memory drained"), lived.said
    assert lived.said["start_new"][1].startswith("ready after docker start"), lived.said
    # Compose's own account: the new container is the service's, of this file and project, created by the swap
    labels = lived.at_end[new]["Config"]["Labels"]
    assert (labels["com.docker.compose.project"], labels["com.docker.compose.service"],
            labels["com.docker.compose.project.config_files"]) == (c.project, c.new_service, str(c.file)), labels
    assert lived.old_before["Config"]["Labels"]["com.docker.compose.service"] == c.old_service
    # Docker's: created, then the old one stopped, then the new one started; it runs, the old does not
    assert [(a, n) for _, a, n in lived.events if a in ("create", "die", "start")] == [
        ("create", new), ("die", old), ("start", new)], lived.events
    assert lived.at_end[new]["State"]["Running"] is True and lived.at_end[old]["State"]["Running"] is False


# -- the report, section by section ------------------------------------------------------------------
def test_the_reports_steps_are_the_restart_in_the_order_compose_and_docker_lived_it(lived: LivedSwap) -> None:
    steps = {s["key"]: s for s in lived.report["steps"]}
    for key in STEPS:
        assert (steps[key]["state"], steps[key]["detail"], steps[key]["who"]) == ("done", lived.said[key][1], WHO)
    assert steps["install"]["title"] == "Check the image, create the new container", steps["install"]
    assert steps["download"]["state"] == "pending" and steps["verify"]["state"] == "skipped", steps
    ran = [s["key"] for s in lived.report["steps"] if s["state"] == "done"]
    assert ran == list(STEPS), ran
    order = [lived.steps[k] for k in STEPS]
    assert all(a.ended_at_s <= b.started_at_s for a, b in zip(order, order[1:], strict=False)), order


def test_the_reports_times_hold_dockers_own_times(lived: LivedSwap) -> None:
    """Compose's create inside the install, Docker's die of the old container inside the stop, the start of
    the new one inside the start."""
    s, old, new = lived.steps, lived.old, lived.new
    created = _event(lived, "create", new)
    assert s["install"].started_at_s <= created <= s["install"].ended_at_s, (s["install"], created)
    assert s["install"].started_at_s <= docker_time(lived.at_end[new]["Created"]) <= s["install"].ended_at_s
    died = _event(lived, "die", old, lived.began_s)
    assert s["stop_old"].started_at_s <= died <= s["stop_old"].ended_at_s, (s["stop_old"], died)
    started = _event(lived, "start", new, died)
    assert s["start_new"].started_at_s <= started <= s["start_new"].ended_at_s, (s["start_new"], started)
    assert s["start_new"].started_at_s <= docker_time(lived.at_end[new]["State"]["StartedAt"]) \
        <= s["start_new"].ended_at_s
    check_step_rows(lived.report, s)


def test_the_reports_who_and_audit_are_the_exact_docker_compose_and_docker_commands(lived: LivedSwap) -> None:
    r, old, new, c = lived.report, lived.old, lived.new, lived.compose
    check_audit_is_the_file(r, lived.audit_file)
    ran = [(a["action"], a["command"]) for a in r["audit"] if a["exit_status"] == 0]
    assert ran == [
        ("install", "timeout -k 5 30 docker image inspect --format '{{.Id}}' -- gpuconsole-test/bookworm:1"),
        ("install", f"timeout -k 5 300 docker compose -f {c.file} create --no-recreate -- {c.new_service}"),
        ("stop_old", f"timeout -k 5 90 docker stop -t 60 -- {old}"),
        ("start_new", f"timeout -k 5 60 docker start -- {new}")], ran
    overridden = [g for g in r["gate"] if g["overridden_by"]]
    assert overridden and all(g["overridden_by"] == WHO for g in overridden)
    assert {a["command"] for a in r["audit"] if a["note"] == "gate override"} == {
        f"override gate check {g['check']}" for g in overridden}
    assert not any("systemctl" in a["command"] for a in r["audit"])


def test_the_reports_downtime_and_its_parts_are_the_services_own_lines_and_events(lived: LivedSwap) -> None:
    """From the old service's last served request (its line in `docker compose logs`, at Docker's time) to
    the new service's ready line; the parts add up to it and fall at Docker's events."""
    t, s, d, old, new, c = (lived.report["timing"], lived.steps, lived.downtime, lived.old, lived.new,
                            lived.compose)
    assert d is not None and not t["downtime_running"] and d.end_source == f"{new} ready", t
    died = _event(lived, "die", old, lived.began_s)
    started = _event(lived, "start", new, died)
    ready_at, ready = _line(lived, c.new_service, "The server is fired up", started)
    assert d.ended_at_s == pytest.approx(ready_at, abs=1e-6) and _stamp(ready) <= d.ended_at_s, (d, ready_at)
    served = [at for at, line in lived.logs[c.old_service] if at < died and ("Decode batch" in line
                                                                              or "Prefill batch" in line)]
    assert served, "the old server logged no batch"
    if t["downtime_from_source"] == "the old server's last served request, in its log":
        assert any(at == pytest.approx(d.started_at_s, abs=1e-6) for at in served), (d, served[-3:])
    else:  # a batch served while stopping: the clock starts at the stop command
        assert t["downtime_from_source"].endswith("(the log's last request is stamped after it)"), t
    assert d.started_at_s <= died
    assert t["downtime_s"] == pytest.approx(d.ended_at_s - d.started_at_s, abs=0.01)
    parts = {p["part"]: p["seconds"] for p in t["downtime_parts"]}
    assert list(parts) == ["drain", "boot to ready"], parts
    assert sum(parts.values()) == pytest.approx(t["downtime_s"], abs=0.05), parts
    assert parts["boot to ready"] == pytest.approx(d.ended_at_s - s["start_new"].started_at_s, abs=0.6), parts
    assert t["time_to_ready_from"] == "the new container's start (docker start)", t
    assert t["time_to_ready_s"] == pytest.approx(d.ended_at_s - s["start_new"].started_at_s, abs=0.01), t


def test_the_reports_old_and_new_and_diff_are_the_compose_files_two_services(lived: LivedSwap) -> None:
    r, c = lived.report, lived.compose
    # the compose file and both services, named as Compose labels the containers
    on_ = lived.report["old_new"]
    assert (on_["compose_file"], on_["old_service"], on_["new_service"]) == (
        str(lived.compose.file), lived.compose.old_service, lived.compose.new_service), on_
    on = r["old_new"]
    assert (on["old_unit"], on["new_unit"]) == (lived.old, lived.new), on
    services = _services(lived)
    old_cmd, new_cmd = services[c.old_service]["command"], services[c.new_service]["command"]
    # what Docker runs is what the compose file says, for both
    assert lived.old_before["Args"] == old_cmd[1:] and lived.at_end[lived.new]["Args"] == new_cmd[1:]

    def model(cmd: list[str]) -> str:
        return cmd[cmd.index("--model-path") + 1]

    assert (on["old_model"], on["new_model"]) == (model(old_cmd), model(new_cmd)) == (OLD_MODEL, NEW_MODEL)
    # read from the compose file's service (its launch as the file writes it) against the old container: no unit
    assert r["diff"]["from"] == "the compose file's service against the old container", r["diff"]["from"]
    changes = {ch["flag"]: (ch["old"], ch["new"]) for ch in r["diff"]["changes"]}
    # the two services' commands differ in the model only, and their environments not at all: so does the diff
    assert [a for a in old_cmd if a not in new_cmd] == [OLD_MODEL]
    assert changes == {"--model-path": (OLD_MODEL, NEW_MODEL)}, changes
    assert services[c.old_service]["environment"] == services[c.new_service]["environment"]
    assert r["diff"]["env_changes"] == [] and r["diff"]["unit_changes"] == [], r["diff"]
    # neither service mounts a model directory nor reserves GPUs: the diff's lints say so
    lints = {lint["flag"] for lint in r["diff"]["lints"]}
    assert lints == {"--model-path", "gpus"} and "deploy" not in services[c.new_service], r["diff"]["lints"]


def test_the_reports_gpu_memory_is_the_processes_of_the_two_services_containers(lived: LivedSwap) -> None:
    g = lived.report["gpu"]
    held = {x["gpu"]: x for x in g["before"] if x["used_mib"]}
    after = {x["gpu"]: x for x in g["after"] if x["used_mib"]}
    assert sorted(held) == sorted(after) == [0], g  # the stand-in: no CUDA_VISIBLE_DEVICES, GPU 0
    assert {p.split()[0] for x in held.values() for p in x["processes"]} == {str(lived.old_before["State"]["Pid"])}
    assert {p.split()[0] for x in after.values() for p in x["processes"]} == {
        str(lived.at_end[lived.new]["State"]["Pid"])}, g
    stopped = {x["gpu"]: x["used_mib"] for x in g["stopped"]}
    assert g["freed_by"] == "the stop" and all(v == 0 for v in stopped.values()), g
    assert {f["gpu"]: f["mib"] for f in g["freed"]} == {i: x["used_mib"] for i, x in held.items()}, g
    assert g["after_what"] == "after the new server was ready", g


def test_the_reports_boot_timeline_is_the_new_services_boot_in_compose_logs(lived: LivedSwap) -> None:
    boot, c = lived.report["boot"], lived.compose
    assert [b["phase"] for b in boot][0] == "launch" and boot[-1]["phase"] == "ready", boot
    started = _event(lived, "start", lived.new, lived.began_s)
    launch_at, launch = _line(lived, c.new_service, "server_args=", started)
    ready_at, ready = _line(lived, c.new_service, "The server is fired up", started)
    assert (log_time(boot[0]["stamp"]), log_time(boot[-1]["stamp"])) == (_stamp(launch), _stamp(ready)), boot
    assert boot[0]["at_s"] == pytest.approx(launch_at, abs=1e-3) and boot[-1]["at_s"] == pytest.approx(ready_at, abs=1e-3)
    assert boot[-1]["seconds"] == pytest.approx(ready_at - launch_at, abs=0.01)
    assert {b["clock"] for b in boot} == {"docker"} and not lived.report["boot_note"], boot


def _created(lived: LivedSwap) -> str:
    """The install's exact Compose command, as every format of the report must show it."""
    return f"docker compose -f {lived.compose.file} create --no-recreate -- {lived.compose.new_service}"


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_the_report_renders_every_section(lived: LivedSwap, fmt: str) -> None:
    check_renders_every_section(lived.report, fmt, "restart", shows=(lived.old, lived.new, _created(lived)), never=())
