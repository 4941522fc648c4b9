"""The beside swap of a compose service through the console's own controller on a real dockerd (over
OpenSSH's sshd, the real docker CLI and the test run's Compose v2 plugin on its PATH): a compose project
(tests/real/compose_host.py) whose service `sglang` serves the 397B on GPUs 0-3 (Compose's
`deploy.resources.reservations.devices`) behind a router (the simulated sgl-router, a process of this
host), and whose `sglang-next` is the 122B's on GPUs 4-7 and the next port; plan the paths (beside
chosen: another architecture), the install creates `sglang-next`'s container (`docker compose create`),
the gate, start it beside the old one, then move the traffic (the router adds the new worker, removes the
old, the old service's container is stopped).

There are no GPUs here: this module's dockerd has the stand-in of the NVIDIA container toolkit's hook on
its PATH (tests/real/daemons.py, GPU_HOOK), so Docker starts the services' GPU reservations as its own
DeviceRequests. The module runs that swap once (its fixture); its report is then read section by section
against what Docker and Compose recorded: `docker inspect`, `docker events`, `docker compose logs`,
`docker compose config`, the router's log and the audit file."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from console.core.derive.swap_observer import log_time
from console.demo.hostsim.downloader import qwen122b_config, qwen122b_files
from console.demo.hostsim.downtime_scenario import qwen397b_config
from console.domain.swap.report import render
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
    router_stamp,
)
from tests.real.console_on_host import server_stamp as _stamp
from tests.real.daemons import DaemonUnavailable, Dockerd, pooled_root, require_dockerd, start_dockerd
from tests.real.docker_host import (
    CHECKOUT,
    close_host,
    docker_event,
    docker_events,
    inspect,
    open_host,
    require_sshd,
    standin_gpus,
)
from tests.real.ports import free_port

pytestmark = [pytest.mark.real_docker, pytest.mark.timeout(480)]

OLD_MODEL, NEW_MODEL = "Qwen3.5-397B-A17B-NVFP4", "Qwen3.5-122B-A10B"
STEPS = ("paths", "install", "preflight", "beside", "switch_traffic")


@pytest.fixture(scope="module")
def gpu_dockerd() -> Iterator[Dockerd]:
    """A dockerd of this module's own with the stand-in GPU hook (the session's has none)."""
    require_dockerd()
    with pooled_root() as root:
        try:
            daemon = start_dockerd(root, gpu_hook=True)
        except DaemonUnavailable as exc:
            pytest.fail(str(exc), pytrace=False)
        try:
            daemon.ensure_image()
            yield daemon
        finally:
            daemon.stop(keep_data=True)


@dataclass
class LivedSwap(LivedSwapFacts):
    compose: ComposeProject
    old: str
    new: str
    port: int
    router_port: int
    models: Path
    old_before: dict[str, Any]
    at_end: dict[str, dict[str, Any]]
    events: list[tuple[float, str, str]]
    logs: dict[str, list[tuple[float, str]]]  # by service: `docker compose logs -t`
    router_log: str
    compose_config: dict[str, Any]


def _swap_beside(dockerd: Dockerd, directory: Path) -> LivedSwap:
    models = directory / "models"
    sizes = [f.size for f in qwen122b_files() if f.path.endswith(".safetensors")]
    for name, config, shards in ((OLD_MODEL, qwen397b_config(), [1 << 20]), (NEW_MODEL, qwen122b_config(), sizes)):
        (models / name).mkdir(parents=True)
        (models / name / "config.json").write_text(json.dumps(config, indent=2))
        for i, size in enumerate(shards, 1):
            with open(models / name / f"model-{i:05d}-of-{len(shards):05d}.safetensors", "wb") as fh:
                fh.truncate(size)  # sparse: no disk used

    async def drive() -> LivedSwap:
        host = await open_host(dockerd, directory / "host")
        tag = secrets.token_hex(4)
        standin_gpus(host, tag)
        port, router_port = free_port(2), free_port()  # the new server takes the next port
        project = compose_project(
            dockerd, directory / "project", f"gcbs{tag}", old_port=port, new_port=port + 1,
            old_model=f"/models/{OLD_MODEL}", new_model=f"/models/{NEW_MODEL}",
            old_extra=("--served-model-name", "qwen3.5-397b", "--tp", "4"),
            new_extra=("--served-model-name", "qwen3.5-122b", "--tp", "4"),
            env={"STANDIN_NVIDIA_SMI_TAG": tag}, models_dir=models, old_gpus=("0", "1", "2", "3"),
            new_gpus=("4", "5", "6", "7"))
        old, new = project.old, project.new
        router_log = directory / "router.log"
        with open(router_log, "wb") as log:
            router = subprocess.Popen(
                ["python3", "-m", "console.demo.hostsim.fake_sglang.router", "--port", str(router_port),
                 "--worker-startup-timeout-secs", "30", "--worker-urls", f"http://127.0.0.1:{port}"],
                env={**os.environ, "PYTHONPATH": str(CHECKOUT), "PYTHONUNBUFFERED": "1"}, stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        assert host.sshd is not None
        prof = console_profile("real-compose", host.sshd.options(), compose=str(project.file),
                               compose_service=project.new_service, compare_container=old, server_port=port,
                               model_dir=str(models / NEW_MODEL), router_url=f"http://127.0.0.1:{router_port}")
        try:
            async with console_on(prof, directory / "console", label="real-compose") as console:
                await console.until(lambda: (r := console.state.reading("server")) is not None and r.data is not None
                                    and r.data.status == "ready", 90, "the old service's server ready")
                await console.until(lambda: (g := console.state.data("gpu")) is not None and any(
                    (x.memory_used_mib or 0) > 0 for x in g.gpus), 90, "the old server on the stand-in GPUs")
                await console.until(lambda: (s := console.state.data("service")) is not None and s.new is not None
                                    and s.new.name == new, 60, "the service pane naming Compose's new container")
                first = console.state.reading("gpu").ok_at_s
                await console.until(lambda: console.state.reading("gpu").ok_at_s > first + 1.5, 60, "a later GPU reading")
                old_before = inspect(dockerd, old)
                began = time.time()
                said: dict[str, tuple[str, str]] = {}
                for key in STEPS:
                    if key == "preflight":
                        for check in console.swap.evaluate_gate():  # no GPUs: the operator overrides by name
                            if not check.passes:
                                assert console.swap.override(check.name, check.name, WHO) is None
                    said[key] = await console.run_step(key)
                    assert said[key][0] == "done", f"{key}: {said[key][1]}"
                await console.until(lambda: console.memory_after_on({4, 5, 6, 7}), 60,
                                    "the swap's GPU memory after: the new service's GPUs only")
                report = console.report()
                steps = dict(console.state.swap.steps)
                downtime = console.state.swap.downtime
            return LivedSwap(
                compose=project, old=old, new=new, port=port, router_port=router_port, models=models, report=report,
                steps=steps, said=said, downtime=downtime, began_s=began, old_before=old_before,
                at_end={n: inspect(dockerd, n) for n in (old, new)},
                events=docker_events(dockerd, began - 1, time.time() + 1, old, new),
                logs={s: compose_logs(dockerd, project, s) for s in (project.old_service, project.new_service)},
                router_log=router_log.read_text(), compose_config=compose_config(dockerd, project),
                audit_file=audit_entries(directory / "console"))
        finally:
            router.terminate()
            router.wait(timeout=30)
            compose_down(dockerd, project)
            await close_host(host)

    return asyncio.run(drive())


@pytest.fixture(scope="module")
def lived(gpu_dockerd: Dockerd, tmp_path_factory: pytest.TempPathFactory) -> LivedSwap:
    """One beside swap of a compose service per module, through the console's controller on the real dockerd."""
    require_sshd()
    return _swap_beside(gpu_dockerd, tmp_path_factory.mktemp("compose-beside"))


def _event(lived: LivedSwap, action: str, name: str) -> float:
    return docker_event(lived.events, action, name)


def _line(lived: LivedSwap, service: str, text: str) -> tuple[float, str]:
    return logged(lived.logs[service], text, since_s=lived.began_s - 1, who=service)  # type: ignore[return-value]


def _router(lived: LivedSwap, text: str) -> float:
    return router_stamp(lived.router_log, text)


# -- the run itself ------------------------------------------------------------------------------------
def test_the_new_service_served_beside_the_old_one_before_docker_stopped_it(lived: LivedSwap) -> None:
    old, new, port, c = lived.old, lived.new, lived.port + 1, lived.compose
    assert {k: v[0] for k, v in lived.said.items()} == {k: "done" for k in STEPS}, lived.said
    assert lived.said["install"][1].endswith(f"created {new} from {c.file}"), lived.said
    assert lived.said["beside"][1].startswith(f"ready on port {port} (GPUs 4,5,6,7)"), lived.said
    assert lived.said["switch_traffic"][1].endswith(f"{old} stopped: downtime 0"), lived.said
    # Compose's and Docker's own account: the service's container with its reservation as Docker's
    # DeviceRequests; created, started, ready, the router moved the traffic, and only then the old one stopped.
    labels = lived.at_end[new]["Config"]["Labels"]
    assert (labels["com.docker.compose.service"], labels["com.docker.compose.project.config_files"]) == (
        c.new_service, str(c.file)), labels
    devices = lived.at_end[new]["HostConfig"]["DeviceRequests"][0]["DeviceIDs"]
    assert devices == ["4", "5", "6", "7"], lived.at_end[new]["HostConfig"]["DeviceRequests"]
    started, died = _event(lived, "start", new), _event(lived, "die", old)
    ready = _line(lived, c.new_service, "The server is fired up")[0]
    assert started < ready < died, (started, ready, died)
    assert int(ready) <= _router(lived, f"Added worker http://127.0.0.1:{port}") \
        <= _router(lived, "Removed worker") <= died
    assert [(a, n) for _, a, n in lived.events if a in ("create", "start", "die")] == [
        ("create", new), ("start", new), ("die", old)], lived.events
    assert lived.at_end[new]["State"]["Running"] is True and lived.at_end[old]["State"]["Running"] is False


# -- the report, section by section ------------------------------------------------------------------
def test_the_reports_steps_are_the_beside_path_and_say_why_the_others_did_not_run(lived: LivedSwap) -> None:
    steps = {s["key"]: s for s in lived.report["steps"]}
    for key in STEPS:
        assert (steps[key]["state"], steps[key]["detail"], steps[key]["who"]) == ("done", lived.said[key][1], WHO)
    assert steps["paths"]["detail"].startswith("beside: predicted downtime 0s"), steps["paths"]
    for key in ("stop_old", "start_new"):  # skipped with the reason (a compose service's words), never "pending"
        assert steps[key]["state"] == "skipped" and steps[key]["detail"].startswith("beside: the "), steps[key]
        assert "compose service" in steps[key]["detail"] and " unit" not in steps[key]["detail"], steps[key]
    ran = [s["key"] for s in lived.report["steps"] if s["state"] == "done"]
    assert ran == list(STEPS), ran
    order = [lived.steps[k] for k in STEPS]
    assert all(a.ended_at_s <= b.started_at_s for a, b in zip(order, order[1:], strict=False)), order


def test_the_reports_paths_step_names_the_gpus_as_the_compose_file_reserves_them(lived: LivedSwap) -> None:
    """The plan's GPUs for a compose service are its compose file's reservation (what Compose gave Docker as
    DeviceRequests), never a `docker run --gpus` flag the swap did not use."""
    detail = {s["key"]: s for s in lived.report["steps"]}["paths"]["detail"]
    reserved = lived.compose_config["services"][lived.compose.new_service]["deploy"]["resources"]["reservations"]
    ids = reserved["devices"][0]["device_ids"]
    assert ids == ["4", "5", "6", "7"], reserved
    assert "--gpus" not in detail, detail
    assert f"boots on GPUs 4,5,6,7 (device_ids {json.dumps(ids)} of the compose service's " \
           "deploy.resources.reservations)" in detail, detail


def test_the_reports_times_hold_dockers_own_times(lived: LivedSwap) -> None:
    s, old, new, c = lived.steps, lived.old, lived.new, lived.compose
    install, beside, switch = s["install"], s["beside"], s["switch_traffic"]
    assert install.started_at_s <= _event(lived, "create", new) <= install.ended_at_s, install
    started = _event(lived, "start", new)
    ready = _line(lived, c.new_service, "The server is fired up")[0]
    assert beside.started_at_s <= started <= ready, (beside, started, ready)
    # the beside step ends at Docker's time of the new server's ready line (`docker compose logs -t`), not
    # at the console's readiness poll that saw it later
    assert beside.ended_at_s == pytest.approx(ready, abs=1e-3), (beside, ready)
    assert switch.started_at_s <= _event(lived, "kill", old) <= _event(lived, "die", old) <= switch.ended_at_s + 1
    assert int(switch.started_at_s) <= _router(lived, "Added worker") <= switch.ended_at_s
    check_step_rows(lived.report, s)


def test_the_reports_who_and_audit_are_the_compose_create_the_start_the_router_calls_and_the_stop(
        lived: LivedSwap) -> None:
    r, old, new, port, c = lived.report, lived.old, lived.new, lived.port, lived.compose
    check_audit_is_the_file(r, lived.audit_file)
    ran = [(a["action"], a["command"]) for a in r["audit"] if a["exit_status"] == 0]
    router = f"http://127.0.0.1:{lived.router_port}"
    for action, expected in (("install", f"docker compose -f {c.file} create --no-recreate -- {c.new_service}"),
                             ("beside", f"docker start -- {new}"),
                             ("switch_traffic", f"'{router}/add_worker?url=http://127.0.0.1:{port + 1}'"),
                             ("switch_traffic", f"'{router}/remove_worker?url=http://127.0.0.1:{port}'"),
                             ("switch_traffic", f"docker stop -t 60 -- {old}")):
        assert any(a == action and cmd.endswith(expected) and cmd.startswith("timeout -k 5 ") for a, cmd in ran), (
            action, expected, ran)
    assert not any("systemctl" in cmd or f"docker stop -t 60 -- {new}" in cmd for _, cmd in ran)
    beside = [cmd for a, cmd in ran if a == "beside"]  # the port checked first: the container is on the host network
    assert len(beside) == 2 and "-- /proc/net/tcp /proc/net/tcp6" in beside[0] and beside[1].endswith(
        f"docker start -- {new}"), beside


def test_the_reports_downtime_is_none_and_time_to_ready_is_the_new_services_boot(lived: LivedSwap) -> None:
    t, d = lived.report["timing"], lived.downtime
    assert t["downtime_s"] == 0.0 and t["downtime_parts"] == [] and not t["downtime_running"], t
    assert t["downtime_from_source"] == "beside: the router moved traffic before the old server stopped", t
    assert d.started_at_s == d.ended_at_s, d
    assert _event(lived, "kill", lived.old) - 1 <= d.started_at_s <= _event(lived, "stop", lived.old) + 1, (
        d, lived.events)
    booted = _line(lived, lived.compose.new_service, "The server is fired up")[0] - _event(lived, "start", lived.new)
    assert t["time_to_ready_from"] == "the new container's start (docker start)", t
    # from the console's docker start (Docker's start event inside it) to Docker's time of the ready line
    start = [a for a in lived.report["audit"] if a["action"] == "beside" and " start -- " in a["command"]]
    assert len(start) == 1 and start[0]["exit_status"] == 0, start
    ready = _line(lived, lived.compose.new_service, "The server is fired up")[0]
    (sent,) = [a["at_s"] - (a["duration_s"] or 0.0) for a in lived.audit_file
               if a["action"] == "beside" and " start -- " in a["command"]]  # after the port's check
    assert lived.steps["beside"].started_at_s < sent
    assert t["time_to_ready_s"] == pytest.approx(ready - sent, abs=0.01), (t, booted)
    assert booted <= t["time_to_ready_s"] + 0.5, (t, booted)


def test_the_reports_old_and_new_and_diff_are_the_compose_files_two_services(lived: LivedSwap) -> None:
    r, old, new, c = lived.report, lived.old, lived.new, lived.compose
    # the compose file and both services, named as Compose labels the containers
    on_ = lived.report["old_new"]
    assert (on_["compose_file"], on_["old_service"], on_["new_service"]) == (
        str(lived.compose.file), lived.compose.old_service, lived.compose.new_service), on_
    md = render(lived.report, "md").replace("\\", "")
    assert f"| compose service | {lived.compose.old_service} | {lived.compose.new_service} in {lived.compose.file} |" \
        in md, md.split("## Old → new")[1][:600]
    on = r["old_new"]
    assert (on["old_unit"], on["new_unit"]) == (old, new), on
    assert (on["old_model"], on["new_model"]) == ("qwen3.5-397b", "qwen3.5-122b")
    assert (on["old_model_dir"], on["model_dir"]) == (str(lived.models / OLD_MODEL), str(lived.models / NEW_MODEL))
    services = lived.compose_config["services"]
    old_cmd, new_cmd = services[c.old_service]["command"], services[c.new_service]["command"]
    assert lived.old_before["Args"] == old_cmd[1:] and lived.at_end[new]["Args"] == new_cmd[1:]
    # read from the compose file's service (its launch as the file writes it) against the old container: no unit
    assert r["diff"]["from"] == "the compose file's service against the old container", r["diff"]["from"]
    changes = {ch["flag"]: (ch["old"], ch["new"]) for ch in r["diff"]["changes"]}
    # the commands differ in the model, its name and the port; the reservations in their GPUs: so does the diff
    argv = {o: n for o, n in zip(old_cmd, new_cmd, strict=True) if o != n}
    assert {f: v for f, v in changes.items() if f != "gpus"} == {
        "--model-path": (f"/models/{OLD_MODEL}", f"/models/{NEW_MODEL}"),
        "--port": (str(lived.port), str(lived.port + 1)),
        "--served-model-name": ("qwen3.5-397b", "qwen3.5-122b")} and set(argv.values()) == {
        n for _, n in changes.values() if not n.startswith("device=")}, changes
    ids = [",".join(services[x]["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"])
           for x in (c.old_service, c.new_service)]
    docker_ids = [",".join(lived.at_end[n]["HostConfig"]["DeviceRequests"][0]["DeviceIDs"]) for n in (old, new)]
    assert ids == docker_ids and changes["gpus"] == (f"device={ids[0]}", f"device={ids[1]}"), changes


def test_the_reports_gpu_memory_moved_from_the_old_services_gpus_to_the_new_ones(lived: LivedSwap) -> None:
    g = lived.report["gpu"]
    held = {x["gpu"]: x for x in g["before"] if x["used_mib"]}
    after = {x["gpu"]: x for x in g["after"] if x["used_mib"]}
    assert sorted(held) == [0, 1, 2, 3] and sorted(after) == [4, 5, 6, 7], g
    assert {p.split()[0] for x in held.values() for p in x["processes"]} == {str(lived.old_before["State"]["Pid"])}
    assert {p.split()[0] for x in after.values() for p in x["processes"]} == {
        str(lived.at_end[lived.new]["State"]["Pid"])}
    freed = {f["gpu"]: f["mib"] for f in g["freed"]}
    assert freed == {i: x["used_mib"] for i, x in held.items()} and g["freed_by"] == "the swap", g
    assert g["after_what"] == "after the old server stopped (traffic on the new one)", g
    assert log_time(g["after_at"]) >= int(_event(lived, "die", lived.old)), g


def test_the_reports_boot_timeline_is_the_new_services_boot_in_compose_logs(lived: LivedSwap) -> None:
    boot, c = lived.report["boot"], lived.compose
    launch, ready = _line(lived, c.new_service, "server_args="), _line(lived, c.new_service, "The server is fired up")
    assert boot and (log_time(boot[0]["stamp"]), log_time(boot[-1]["stamp"])) == (_stamp(launch[1]), _stamp(ready[1]))
    assert boot[-1]["at_s"] == pytest.approx(ready[0], abs=1e-3) and {b["clock"] for b in boot} == {"docker"}, boot
    assert not lived.report.get("boot_note"), lived.report.get("boot_note")


def _created(lived: LivedSwap) -> str:
    """The install's exact Compose command, as every format of the report must show it."""
    return f"docker compose -f {lived.compose.file} create --no-recreate -- {lived.compose.new_service}"


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_the_report_renders_every_section(lived: LivedSwap, fmt: str) -> None:
    check_renders_every_section(lived.report, fmt, "beside", shows=(lived.new, _created(lived)))
