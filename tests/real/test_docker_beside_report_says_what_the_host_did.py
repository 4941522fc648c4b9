"""The beside swap of SGLang in containers through the console's own controller on a real dockerd (over
OpenSSH's sshd, the real docker CLI on its PATH): the 397B's container serves on GPUs 0-3
(`--gpus '"device=0,1,2,3"'`) behind a router (the simulated sgl-router, a process of this host); the
122B's container is created for GPUs 4-7 and the next port; plan the paths (beside chosen: another
architecture), check the image and the new container, the gate, start it beside the old one, then
move the traffic (the router adds the new worker, removes the old, the old container is stopped).

There are no GPUs here: this module's dockerd has a STAND-IN of the NVIDIA container toolkit's hook
on its PATH (tests/real/daemons.py, GPU_HOOK), so Docker accepts and starts `--gpus` containers with
its own DeviceRequests and NVIDIA_VISIBLE_DEVICES, which the stand-in nvidia-smi reads. The module
runs that swap once (its fixture); its report is then read section by section against what Docker
recorded: `docker inspect`, `docker events`, `docker logs -t`, the router's log and the audit file."""

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
from tests.real.console_on_host import (
    audit_entries,
    check_audit_is_the_file,
    check_renders_every_section,
    check_step_rows,
    console_on,
    console_profile,
    LivedSwapFacts,
    logged,
    router_stamp,
    WHO,
)
from tests.real.console_on_host import server_stamp as _stamp
from tests.real.daemons import DaemonUnavailable, Dockerd, pooled_root, require_dockerd, start_dockerd
from tests.real.docker_host import (
    CHECKOUT, close_host, docker_event, docker_events, docker_logs, inspect, open_host, require_sshd, run_sglang,
    standin_gpus)
from tests.real.ports import free_port

pytestmark = [pytest.mark.real_docker, pytest.mark.timeout(480)]

OLD_MODEL, NEW_MODEL = "Qwen3.5-397B-A17B-NVFP4", "Qwen3.5-122B-A10B"
STEPS = ("paths", "install", "preflight", "beside", "switch_traffic")


@pytest.fixture(scope="module")
def gpu_dockerd() -> Iterator[Dockerd]:
    """A dockerd of this module's own with the stand-in GPU hook (the session's has none: its tests
    check that `--gpus` fails there, as on this machine)."""
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
    old: str
    new: str
    port: int
    router_port: int
    models: Path
    old_before: dict[str, Any]
    at_end: dict[str, dict[str, Any]]
    events: list[tuple[float, str, str]]
    logs: dict[str, list[tuple[float, str]]]
    router_log: str


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
        old, new = f"gc-bs-old-{tag}", f"gc-bs-new-{tag}"
        env = (f"STANDIN_NVIDIA_SMI_TAG={tag}",)
        run_sglang(dockerd, old, port, model=f"/models/{OLD_MODEL}", models_dir=models, env=env,
                   gpus='"device=0,1,2,3"', extra=("--served-model-name", "qwen3.5-397b", "--tp", "4"))
        run_sglang(dockerd, new, port + 1, create=True, model=f"/models/{NEW_MODEL}", models_dir=models, env=env,
                   gpus='"device=4,5,6,7"', extra=("--served-model-name", "qwen3.5-122b", "--tp", "4"))
        router_log = directory / "router.log"
        with open(router_log, "wb") as log:
            router = subprocess.Popen(
                ["python3", "-m", "console.demo.hostsim.fake_sglang.router", "--port", str(router_port),
                 "--worker-startup-timeout-secs", "30", "--worker-urls", f"http://127.0.0.1:{port}"],
                env={**os.environ, "PYTHONPATH": str(CHECKOUT), "PYTHONUNBUFFERED": "1"}, stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        assert host.sshd is not None
        o = host.sshd.options()
        prof = console_profile("real-docker", o, container=new, compare_container=old, server_port=port,
                               model_dir=str(models / NEW_MODEL), router_url=f"http://127.0.0.1:{router_port}")
        try:
            async with console_on(prof, directory / "console", label="real-docker") as console:
                await console.until(lambda: (r := console.state.reading("server")) is not None and r.data is not None
                                    and r.data.status == "ready", 90, "the old container's server ready")
                await console.until(lambda: (g := console.state.data("gpu")) is not None and any(
                    (x.memory_used_mib or 0) > 0 for x in g.gpus), 90, "the old server on the stand-in GPUs")
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
                                    "the swap's GPU memory after: the new container's GPUs only")
                report = console.report()
                steps = dict(console.state.swap.steps)
                downtime = console.state.swap.downtime
            return LivedSwap(
                old=old, new=new, port=port, router_port=router_port, models=models, report=report, steps=steps,
                said=said, downtime=downtime, began_s=began, old_before=old_before,
                at_end={n: inspect(dockerd, n) for n in (old, new)},
                events=docker_events(dockerd, began - 1, time.time() + 1, old, new),
                logs={n: docker_logs(dockerd, n) for n in (old, new)}, router_log=router_log.read_text(),
                audit_file=audit_entries(directory / "console"))
        finally:
            router.terminate()
            router.wait(timeout=30)
            dockerd.docker("rm", "-f", old, new, check=False)
            await close_host(host)

    return asyncio.run(drive())


@pytest.fixture(scope="module")
def lived(gpu_dockerd: Dockerd, tmp_path_factory: pytest.TempPathFactory) -> LivedSwap:
    """One beside swap per module, through the console's controller on the real dockerd."""
    require_sshd()
    return _swap_beside(gpu_dockerd, tmp_path_factory.mktemp("docker-beside"))


def _event(lived: LivedSwap, action: str, name: str) -> float:
    return docker_event(lived.events, action, name)


def _line(lived: LivedSwap, name: str, text: str) -> tuple[float, str]:
    return logged(lived.logs[name], text, since_s=lived.began_s - 1, who=name)  # type: ignore[return-value]


def _router(lived: LivedSwap, text: str) -> float:
    return router_stamp(lived.router_log, text)


# -- the run itself ------------------------------------------------------------------------------------
def test_the_new_container_served_beside_the_old_one_before_docker_stopped_it(lived: LivedSwap) -> None:
    old, new, port = lived.old, lived.new, lived.port + 1
    assert {k: v[0] for k, v in lived.said.items()} == {k: "done" for k in STEPS}, lived.said
    assert lived.said["beside"][1].startswith(f"ready on port {port} (GPUs 4,5,6,7)"), lived.said
    assert lived.said["switch_traffic"][1].startswith(f"the router sends traffic to port {port}"), lived.said
    assert lived.said["switch_traffic"][1].endswith(f"{old} stopped: downtime 0"), lived.said
    # Docker's own account: the new container started (its GPUs Docker's DeviceRequests), its server
    # was ready, the router moved the traffic, and only then was the old container stopped.
    devices = lived.at_end[new]["HostConfig"]["DeviceRequests"][0]["DeviceIDs"]
    assert devices == ["4", "5", "6", "7"], lived.at_end[new]["HostConfig"]["DeviceRequests"]
    started, died = _event(lived, "start", new), _event(lived, "die", old)
    ready = _line(lived, new, "The server is fired up")[0]
    assert started < ready < died, (started, ready, died)
    assert int(ready) <= _router(lived, f"Added worker http://127.0.0.1:{port}") \
        <= _router(lived, "Removed worker") <= died
    assert [(a, n) for _, a, n in lived.events if a in ("start", "die")] == [("start", new), ("die", old)]
    assert lived.at_end[new]["State"]["Running"] is True and lived.at_end[old]["State"]["Running"] is False


# -- the report, section by section ------------------------------------------------------------------
def test_the_reports_steps_are_the_beside_path_and_say_why_the_others_did_not_run(lived: LivedSwap) -> None:
    steps = {s["key"]: s for s in lived.report["steps"]}
    for key in STEPS:
        assert (steps[key]["state"], steps[key]["detail"], steps[key]["who"]) == ("done", lived.said[key][1], WHO)
    assert steps["paths"]["detail"].startswith("beside: predicted downtime 0s"), steps["paths"]
    for key in ("stop_old", "start_new"):  # skipped with the reason (a container's words), never "pending"
        assert steps[key]["state"] == "skipped" and steps[key]["detail"].startswith("beside: the "), steps[key]
        assert "container" in steps[key]["detail"], steps[key]
    ran = [s["key"] for s in lived.report["steps"] if s["state"] == "done"]
    assert ran == list(STEPS), ran
    order = [lived.steps[k] for k in STEPS]
    assert all(a.ended_at_s <= b.started_at_s for a, b in zip(order, order[1:])), order


def test_the_reports_times_hold_dockers_own_times(lived: LivedSwap) -> None:
    s, old, new = lived.steps, lived.old, lived.new
    beside, switch = s["beside"], s["switch_traffic"]
    started = _event(lived, "start", new)
    ready = _line(lived, new, "The server is fired up")[0]
    assert beside.started_at_s <= started <= ready <= beside.ended_at_s + 1, (beside, started, ready)
    assert switch.started_at_s <= _event(lived, "kill", old) <= _event(lived, "die", old) <= switch.ended_at_s + 1
    assert int(switch.started_at_s) <= _router(lived, "Added worker") <= switch.ended_at_s
    check_step_rows(lived.report, s)


def test_the_reports_who_and_audit_are_the_start_the_router_calls_and_the_stop(lived: LivedSwap) -> None:
    r, old, new, port = lived.report, lived.old, lived.new, lived.port
    check_audit_is_the_file(r, lived.audit_file)
    ran = [(a["action"], a["command"]) for a in r["audit"] if a["exit_status"] == 0]
    router = f"http://127.0.0.1:{lived.router_port}"
    for action, expected in (("beside", f"docker start -- {new}"),
                             ("switch_traffic", f"'{router}/add_worker?url=http://127.0.0.1:{port + 1}'"),
                             ("switch_traffic", f"'{router}/remove_worker?url=http://127.0.0.1:{port}'"),
                             ("switch_traffic", f"docker stop -t 60 -- {old}")):
        assert any(a == action and c.endswith(expected) and c.startswith("timeout -k 5 ") for a, c in ran), (
            action, expected, ran)
    assert not any("systemctl" in c or f"docker stop -t 60 -- {new}" in c for _, c in ran)
    beside = [c for a, c in ran if a == "beside"]  # the port checked first: the container is on the host network
    assert len(beside) == 2 and "-- /proc/net/tcp /proc/net/tcp6" in beside[0] and beside[1].endswith(
        f"docker start -- {new}"), beside


def test_the_reports_downtime_is_none_and_time_to_ready_is_the_new_containers_boot(lived: LivedSwap) -> None:
    t, d = lived.report["timing"], lived.downtime
    assert t["downtime_s"] == 0.0 and t["downtime_parts"] == [] and not t["downtime_running"], t
    assert t["downtime_from_source"] == "beside: the router moved traffic before the old server stopped", t
    assert d.started_at_s == d.ended_at_s, d
    # the clock's one instant: the old container's stop (Docker's kill, die, stop events around it)
    assert _event(lived, "kill", lived.old) - 1 <= d.started_at_s <= _event(lived, "stop", lived.old) + 1, (
        d, lived.events)
    # Time to ready: from docker start of the new container to its ready line, as the server stamped it (in
    # whole seconds, so up to 1 s before Docker's own time of the line), or the readiness poll just after.
    booted = _line(lived, lived.new, "The server is fired up")[0] - _event(lived, "start", lived.new)
    assert t["time_to_ready_from"] == "the new container's start (docker start)", t
    assert booted - 1.0 <= t["time_to_ready_s"] <= booted + 2.0, (t, booted)


def test_the_reports_old_and_new_and_diff_are_the_two_containers_launches(lived: LivedSwap) -> None:
    r, old, new = lived.report, lived.old, lived.new
    on = r["old_new"]
    assert (on["old_unit"], on["new_unit"], on["kind"]) == (old, new, "container")
    assert (on["old_model"], on["new_model"]) == ("qwen3.5-397b", "qwen3.5-122b")
    assert (on["old_model_dir"], on["model_dir"]) == (str(lived.models / OLD_MODEL), str(lived.models / NEW_MODEL))
    changes = {c["flag"]: (c["old"], c["new"]) for c in r["diff"]["changes"]}
    assert changes["--model-path"] == (f"/models/{OLD_MODEL}", f"/models/{NEW_MODEL}"), changes
    assert changes["--port"] == (str(lived.port), str(lived.port + 1)), changes
    # the GPUs: Docker's own DeviceRequests of the two containers
    ids = [",".join(lived.at_end[n]["HostConfig"]["DeviceRequests"][0]["DeviceIDs"]) for n in (old, new)]
    assert changes["gpus"] == (f"device={ids[0]}", f"device={ids[1]}"), changes


def test_the_reports_gpu_memory_moved_from_the_old_containers_gpus_to_the_new_ones(lived: LivedSwap) -> None:
    g = lived.report["gpu"]
    held = {x["gpu"]: x for x in g["before"] if x["used_mib"]}
    after = {x["gpu"]: x for x in g["after"] if x["used_mib"]}
    assert sorted(held) == [0, 1, 2, 3] and sorted(after) == [4, 5, 6, 7], g
    assert {p.split()[0] for x in held.values() for p in x["processes"]} == {str(lived.old_before["State"]["Pid"])}
    assert {p.split()[0] for x in after.values() for p in x["processes"]} == {str(lived.at_end[lived.new]["State"]["Pid"])}
    freed = {f["gpu"]: f["mib"] for f in g["freed"]}
    assert freed == {i: x["used_mib"] for i, x in held.items()} and g["freed_by"] == "the swap", g
    assert g["after_what"] == "after the old server stopped (traffic on the new one)", g
    assert log_time(g["after_at"]) >= int(_event(lived, "die", lived.old)), g


def test_the_reports_boot_timeline_is_the_new_containers_boot_in_docker_logs(lived: LivedSwap) -> None:
    boot = lived.report["boot"]
    launch, ready = _line(lived, lived.new, "server_args="), _line(lived, lived.new, "The server is fired up")
    assert boot and (log_time(boot[0]["stamp"]), log_time(boot[-1]["stamp"])) == (_stamp(launch[1]), _stamp(ready[1]))


def test_the_reports_boot_note_is_gone_once_the_new_containers_boot_is_in_the_log(lived: LivedSwap) -> None:
    """The log follows both containers beside: the new one's boot is there, so no note says it is not."""
    assert lived.report["boot"] and not lived.report.get("boot_note"), lived.report.get("boot_note")


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_the_report_renders_every_section(lived: LivedSwap, fmt: str) -> None:
    check_renders_every_section(lived.report, fmt, "beside", shows=(lived.new,))
