"""The container swap through the console's own runner and controller against the real dockerd, over
OpenSSH's sshd with the real docker CLI on its PATH (tests/real/docker_host.py): check the image and
the new container, the gate, stop the old container and drain (a stand-in nvidia-smi on the host's
PATH whose memory follows this test's own containers' servers: no GPUs here), start the new one and
wait for ready, then the rollback; the report of that run read against what Docker itself says. And
a container that exits at once, started through the same controller."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import pytest

from console.config import HostProfile
from tests.real.console_on_host import WHO, console_on
from tests.real.daemons import Dockerd
from tests.real.docker_host import CHECKOUT, RealDockerHost, close_host, free_port, inspect, open_host, run_sglang

pytestmark = pytest.mark.real_docker


def standin_gpus(host: RealDockerHost, tag: str) -> None:
    """`nvidia-smi` first on the host's PATH: the stand-in, counting only servers tagged `tag`."""
    wrapper = host.bin_dir / "nvidia-smi"
    wrapper.write_text(f"#!/bin/sh\nSTANDIN_NVIDIA_SMI_TAG={tag} PYTHONPATH={CHECKOUT} exec /usr/bin/python3 "
                       f"{CHECKOUT / 'tests/real/standin_nvidia_smi.py'} \"$@\"\n")
    wrapper.chmod(0o755)


def profile(host: RealDockerHost, directory: Path, new: str, old: str, port: int, **changes: Any) -> HostProfile:
    assert host.sshd is not None, "the console's swap is tested over OpenSSH's sshd"
    o = host.sshd.options()
    values: dict[str, Any] = dict(name="real-docker", host=o.host, port=o.port, user=o.user, identity=o.identity,
                                  known_hosts=o.known_hosts, container=new, compare_container=old, server_port=port,
                                  gpu_interval_s=0.5, ready_timeout_s=150.0, drain_timeout_s=90.0,
                                  connect_timeout_s=20.0)
    values.update(changes)
    return HostProfile(**values)


@pytest.fixture
async def host(dockerd: Dockerd, tmp_path: Path) -> Any:
    from console.demo.sshd import find_sshd

    if find_sshd() is None or os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("the container swap must be tested over OpenSSH's sshd in CI")
        pytest.skip("needs OpenSSH's sshd, as root")
    h = await open_host(dockerd, tmp_path / "host")
    try:
        yield h
    finally:
        await close_host(h)


async def test_the_container_swap_and_its_rollback_through_the_consoles_controller(
        host: RealDockerHost, dockerd: Dockerd, tmp_path: Path) -> None:
    tag = secrets.token_hex(4)
    standin_gpus(host, tag)
    port = free_port()
    new, old = f"gc-cs-new-{tag}", f"gc-cs-old-{tag}"
    run_sglang(dockerd, old, port, model="/models/Qwen3-8B", env=(f"STANDIN_NVIDIA_SMI_TAG={tag}",))
    run_sglang(dockerd, new, port, create=True, model="/models/Qwen3-14B", env=(f"STANDIN_NVIDIA_SMI_TAG={tag}",))
    try:
        async with console_on(profile(host, tmp_path, new, old, port), tmp_path / "console",
                              label="real-docker") as console:
            await console.until(lambda: (g := console.state.data("gpu")) is not None and any(
                (x.memory_used_mib or 0) > 0 for x in g.gpus), 90, "the old container's server on the stand-in GPUs")
            said = {"install": await console.run_step("install")}
            for check in console.swap.evaluate_gate():
                if not check.passes:  # no model directory, no GPUs: the operator overrides by name
                    assert console.swap.override(check.name, check.name, WHO) is None
            old_pid = inspect(dockerd, old)["State"]["Pid"]
            for key in ("preflight", "stop_old", "start_new"):
                said[key] = await console.run_step(key)
            new_state = inspect(dockerd, new)
            said["rollback"] = await console.run_step("rollback")
            report = console.report()
            steps = dict(console.state.swap.steps)
            downtime = console.state.swap.downtime
        assert {k: v[0] for k, v in said.items()} == {k: "done" for k in said}, said
        assert said["install"][1].endswith(f"{new} exists (created)"), said["install"]
        assert said["stop_old"][1].startswith(f"{old} stopped"), said["stop_old"]
        assert "GPU memory drained" in said["stop_old"][1], said["stop_old"]
        # The stand-in GPUs before the stop: held by the old container's server, as Docker names its pid.
        before = [p for g in report["gpu"]["before"] for p in g["processes"]]
        assert before and {p.split()[0] for p in before} == {str(old_pid)}, report["gpu"]["before"]
        assert said["start_new"][1].startswith("ready ") and "after docker start" in said["start_new"][1]
        assert said["rollback"][1].startswith(f"{old} ready again"), said["rollback"]
        # Docker's own account: the new container ran while the step said so; after the rollback,
        # the old runs again and the new is stopped.
        assert new_state["State"]["Running"] is True and new_state["RestartCount"] == 0
        assert inspect(dockerd, old)["State"]["Running"] is True and inspect(dockerd, new)["State"]["Running"] is False
        # The report, section by section: steps as they ran, by whom, with Docker's exact commands.
        rsteps = {s["key"]: s for s in report["steps"]}
        for key in said:
            assert (rsteps[key]["state"], rsteps[key]["detail"], rsteps[key]["who"]) == ("done", said[key][1], WHO)
        order = [steps[k] for k in ("install", "preflight", "stop_old", "start_new", "rollback")]
        assert all(a.ended_at_s <= b.started_at_s for a, b in zip(order, order[1:]))
        commands = [a["command"] for a in report["audit"] if a["exit_status"] == 0]
        assert {a["who"] for a in report["audit"]} == {WHO}
        for expected in (f"docker stop -t 60 -- {old}", f"docker start -- {new}", f"docker start -- {old}"):
            assert any(expected in c for c in commands), (expected, commands)
        on = report["old_new"]
        assert (on["old_unit"], on["new_unit"]) == (old, new)
        assert {c["flag"]: c["new"] for c in report["diff"]["changes"]}["--model-path"] == "/models/Qwen3-14B"
        t = report["timing"]
        assert downtime is not None and downtime.ended_at_s is not None and not t["downtime_running"], t
        assert steps["stop_old"].started_at_s - 60 <= downtime.started_at_s <= steps["stop_old"].ended_at_s
        assert steps["start_new"].started_at_s < downtime.ended_at_s <= steps["start_new"].ended_at_s
        assert new in t["downtime_to_source"], t
    finally:
        dockerd.docker("rm", "-f", old, new, check=False)


async def test_a_container_that_exits_at_once_fails_the_controllers_start_with_its_exit_code(
        host: RealDockerHost, dockerd: Dockerd, tmp_path: Path) -> None:
    tag = secrets.token_hex(4)
    standin_gpus(host, tag)
    new, old = f"gc-cx-new-{tag}", f"gc-cx-old-{tag}"
    run_sglang(dockerd, new, 0, create=True, command=["python3", "-c", "raise SystemExit(3)"])
    try:
        async with console_on(profile(host, tmp_path, new, old, free_port()), tmp_path / "console",
                              label="real-docker") as console:
            await console.until(lambda: console.state.data("service") is not None, 60, "the service pane")
            state, detail = await console.run_step("start_new")
        assert state == "failed" and f"{new} exited (exit code 3)" in detail, detail
        assert inspect(dockerd, new)["State"]["ExitCode"] == 3
    finally:
        dockerd.docker("rm", "-f", new, check=False)
