"""The container swap through the console's own runner and controller against the real dockerd, over
OpenSSH's sshd with the real docker CLI on its PATH (tests/real/docker_host.py): check the image and
the new container, the gate, stop the old container and drain (a stand-in nvidia-smi on the host's
PATH whose memory follows this test's own containers' servers: no GPUs here), start the new one and
wait for ready, then the rollback. The module runs that swap once (its fixture); its report is then
read section by section against what Docker itself recorded: `docker inspect` (the containers' own
start and finish times, their PIDs and arguments), `docker events` (start, die, stop), `docker logs -t`
(the servers' lines with Docker's times), and the audit file. And a container that exits at once,
started through the same controller."""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from console.config import HostProfile
from console.core.derive.swap_observer import log_time
from tests.real.console_on_host import (
    WHO, LivedSwapFacts, audit_entries, check_audit_is_the_file, check_renders_every_section, check_step_rows,
    console_on, console_profile, logged)
from tests.real.console_on_host import server_stamp as _stamp
from tests.real.daemons import Dockerd
from tests.real.docker_host import (
    RealDockerHost, close_host, docker_event, docker_events, docker_logs, docker_time, inspect, open_host, run_sglang,
    require_sshd, standin_gpus)
from tests.real.ports import free_port

# The module's one swap and rollback (its fixture) runs inside its first test's time.
pytestmark = [pytest.mark.real_docker, pytest.mark.timeout(480)]


def profile(host: RealDockerHost, directory: Path, new: str, old: str, port: int, **changes: Any) -> HostProfile:
    assert host.sshd is not None, "the console's swap is tested over OpenSSH's sshd"
    return console_profile("real-docker", host.sshd.options(), container=new, compare_container=old,
                           server_port=port, **changes)


@pytest.fixture
async def host(dockerd: Dockerd, tmp_path: Path) -> Any:
    require_sshd()
    h = await open_host(dockerd, tmp_path / "host")
    try:
        yield h
    finally:
        await close_host(h)


@dataclass
class LivedSwap(LivedSwapFacts):
    """One container swap and its rollback as the console reported it, and what Docker recorded."""

    old: str
    new: str
    at_start: dict[str, dict[str, Any]]  # docker inspect of both after the swap's start_new
    at_end: dict[str, dict[str, Any]]  # after the rollback
    old_pid: int
    events: list[tuple[float, str, str]]
    logs: dict[str, list[tuple[float, str]]]


def _swap_and_roll_back(dockerd: Dockerd, directory: Path) -> LivedSwap:
    async def drive() -> LivedSwap:
        host = await open_host(dockerd, directory / "host")
        tag = secrets.token_hex(4)
        standin_gpus(host, tag)
        port = free_port()
        new, old = f"gc-cs-new-{tag}", f"gc-cs-old-{tag}"
        run_sglang(dockerd, old, port, model="/models/Qwen3-8B", env=(f"STANDIN_NVIDIA_SMI_TAG={tag}",))
        run_sglang(dockerd, new, port, create=True, model="/models/Qwen3-14B", env=(f"STANDIN_NVIDIA_SMI_TAG={tag}",))
        try:
            async with console_on(profile(host, directory, new, old, port), directory / "console",
                                  label="real-docker") as console:
                await console.until(lambda: (g := console.state.data("gpu")) is not None and any(
                    (x.memory_used_mib or 0) > 0 for x in g.gpus), 90, "the old container's server on the stand-in GPUs")
                began = time.time()
                said = {"install": await console.run_step("install")}
                for check in console.swap.evaluate_gate():
                    if not check.passes:  # no model directory, no GPUs: the operator overrides by name
                        assert console.swap.override(check.name, check.name, WHO) is None
                old_pid = inspect(dockerd, old)["State"]["Pid"]
                for key in ("preflight", "stop_old", "start_new"):
                    said[key] = await console.run_step(key)
                at_start = {n: inspect(dockerd, n) for n in (old, new)}
                said["rollback"] = await console.run_step("rollback")
                back = inspect(dockerd, old)["State"]["Pid"]
                # The processes column is read every few seconds: the report is taken once a GPU
                # reading names the old container's new server (what the host runs now).
                await console.until(lambda: any(p.pid is not None and str(p.pid) == str(back)
                                                for g in console.state.data("gpu").gpus for p in g.processes or ()),
                                    60, "the GPUs held by the old container again")
                report = console.report()
                steps = dict(console.state.swap.steps)
                downtime = console.state.swap.downtime
            return LivedSwap(
                old=old, new=new, report=report, steps=steps, said=said, downtime=downtime, began_s=began,
                at_start=at_start, at_end={n: inspect(dockerd, n) for n in (old, new)}, old_pid=old_pid,
                events=docker_events(dockerd, began - 1, time.time() + 1, old, new),
                logs={n: docker_logs(dockerd, n) for n in (old, new)},
                audit_file=audit_entries(directory / "console"))
        finally:
            dockerd.docker("rm", "-f", old, new, check=False)
            await close_host(host)

    return asyncio.run(drive())


@pytest.fixture(scope="module")
def lived(dockerd: Dockerd, tmp_path_factory: pytest.TempPathFactory) -> LivedSwap:
    """One container swap and its rollback per module, through the console's controller on the real dockerd."""
    require_sshd()
    return _swap_and_roll_back(dockerd, tmp_path_factory.mktemp("docker-swap"))


def _step_keys() -> tuple[str, ...]:
    return ("install", "preflight", "stop_old", "start_new", "rollback")


def _event(lived: LivedSwap, action: str, name: str, after_s: float = 0.0) -> float:
    return docker_event(lived.events, action, name, after_s)


def _line(lived: LivedSwap, name: str, text: str, after_s: float = 0.0) -> tuple[float, str]:
    """The first line of the container's `docker logs -t` containing TEXT after a time: (Docker's time, line)."""
    return logged(lived.logs[name], text, since_s=after_s, who=name)  # type: ignore[return-value]


# -- the run itself ------------------------------------------------------------------------------------
def test_every_step_of_the_swap_and_the_rollback_ran_on_the_real_dockerd(lived: LivedSwap) -> None:
    said, old, new = lived.said, lived.old, lived.new
    assert {k: v[0] for k, v in said.items()} == {k: "done" for k in _step_keys()}, said
    assert said["install"][1].endswith(f"{new} exists (created)"), said["install"]
    assert said["stop_old"][1].startswith(f"{old} stopped; GPU memory drained"), said["stop_old"]
    assert said["start_new"][1].startswith("ready after docker start"), said["start_new"]
    assert said["rollback"][1].startswith(f"{old} ready again"), said["rollback"]
    # Docker's own account: the new container ran after the start; after the rollback the old runs
    # again (a new process) and the new is stopped.
    assert lived.at_start[new]["State"]["Running"] is True and lived.at_start[new]["RestartCount"] == 0
    assert lived.at_start[old]["State"]["Running"] is False
    assert lived.at_end[old]["State"]["Running"] is True and lived.at_end[new]["State"]["Running"] is False
    assert lived.at_end[old]["State"]["Pid"] not in (0, lived.old_pid)
    assert [(a, n) for _, a, n in lived.events if a in ("start", "die")] == [
        ("die", old), ("start", new), ("die", new), ("start", old)], lived.events


# -- the report, section by section ------------------------------------------------------------------
def test_the_reports_steps_say_what_ran_in_the_order_docker_lived_it(lived: LivedSwap) -> None:
    steps = {s["key"]: s for s in lived.report["steps"]}
    for key in _step_keys():
        assert (steps[key]["state"], steps[key]["detail"]) == ("done", lived.said[key][1]), steps[key]
    # Not run here, and not claimed.
    assert steps["download"]["state"] == "pending"
    # rolled back: the new model's benchmark is not run, and says why (it stayed "pending" before)
    assert steps["benchmark"]["state"] == "skipped" and "rolled back" in steps["benchmark"]["detail"], \
        steps["benchmark"]
    assert steps["verify"]["state"] == "skipped" and steps["verify"]["who"] is None, steps["verify"]
    ran = [s["key"] for s in lived.report["steps"] if s["state"] == "done"]
    assert ran == list(_step_keys()), ran  # the report's order is the order they ran
    order = [lived.steps[k] for k in _step_keys()]
    assert all(a.ended_at_s <= b.started_at_s for a, b in zip(order, order[1:])), order


def test_the_reports_times_hold_dockers_own_times(lived: LivedSwap) -> None:
    """Each step's span holds what Docker recorded of it: the old container's die (and its
    `State.FinishedAt`) inside the stop, the new one's start (`State.StartedAt`) inside the start,
    the new one's die and the old one's start again inside the rollback."""
    s, old, new = lived.steps, lived.old, lived.new
    stop, start, back = s["stop_old"], s["start_new"], s["rollback"]
    died_old = _event(lived, "die", old, lived.began_s)
    assert stop.started_at_s <= died_old <= stop.ended_at_s
    # Docker's two records of one exit (State.FinishedAt, then the die event) lie 0.16 s apart on a loaded
    # machine: each is checked against the step, not against the other.
    assert stop.started_at_s <= docker_time(lived.at_start[old]["State"]["FinishedAt"]) <= stop.ended_at_s
    started_new = _event(lived, "start", new, died_old)
    assert start.started_at_s <= started_new <= start.ended_at_s + 1
    assert start.started_at_s <= docker_time(lived.at_start[new]["State"]["StartedAt"]) <= start.ended_at_s + 1
    died_new = _event(lived, "die", new, started_new)
    started_old = _event(lived, "start", old, died_new)
    assert back.started_at_s <= died_new <= started_old <= back.ended_at_s
    assert back.started_at_s <= docker_time(lived.at_end[old]["State"]["StartedAt"]) <= back.ended_at_s
    check_step_rows(lived.report, s)


def test_the_reports_who_and_audit_name_the_operator_and_the_exact_docker_commands(lived: LivedSwap) -> None:
    r, old, new = lived.report, lived.old, lived.new
    steps = {s["key"]: s for s in r["steps"]}
    assert {steps[k]["who"] for k in _step_keys()} == {WHO}
    # The report's audit is the audit file, entry for entry.
    check_audit_is_the_file(r, lived.audit_file)
    commands = [(a["action"], a["command"]) for a in r["audit"] if a["exit_status"] == 0]
    for action, expected in (("stop_old", f"docker stop -t 60 -- {old}"), ("start_new", f"docker start -- {new}"),
                             ("rollback", f"docker stop -t 60 -- {new}"), ("rollback", f"docker start -- {old}")):
        assert any(a == action and c.endswith(expected) and c.startswith("timeout -k 5 ") for a, c in commands), (
            action, expected, commands)
    assert not any("systemctl" in c for _, c in commands)
    overridden = [g for g in r["gate"] if g["overridden_by"]]
    assert overridden and all(g["overridden_by"] == WHO for g in overridden)
    assert {a["command"] for a in r["audit"] if a["note"] == "gate override"} == {
        f"override gate check {g['check']}" for g in overridden}


def test_the_reports_downtime_and_its_parts_are_the_containers_own_lines_and_events(lived: LivedSwap) -> None:
    """From the old server's last served request (its line in `docker logs`, at Docker's time of it, not
    the server's whole-second stamp) to the new server's ready line (the same); the parts add up to it
    and fall at Docker's events."""
    t, s, d, old, new = lived.report["timing"], lived.steps, lived.downtime, lived.old, lived.new
    assert d is not None and not t["downtime_running"] and d.end_source == f"{new} ready", t
    died_old = _event(lived, "die", old, lived.began_s)
    started_new = _event(lived, "start", new, died_old)
    ready_at, ready = _line(lived, new, "The server is fired up", started_new)
    assert d.ended_at_s == pytest.approx(ready_at, abs=1e-6) and _stamp(ready) <= d.ended_at_s, (d, ready_at)
    served = [(at, line) for at, line in lived.logs[old] if at < died_old and ("Decode batch" in line
                                                                                or "Prefill batch" in line)]
    assert served, "the old server logged no batch"
    if t["downtime_from_source"] == "the old server's last served request, in its log":
        # a batch's Docker time (the last one served before the stop: one served while it stopped is after it)
        assert any(at == pytest.approx(d.started_at_s, abs=1e-6) for at, _ in served), (d, served[-3:])
    else:  # written after the stop command (a batch served while stopping): the clock starts at the stop command
        assert t["downtime_from_source"].endswith("(the log's last request is stamped after it)"), t
    assert d.started_at_s <= died_old
    assert t["downtime_s"] == pytest.approx(d.ended_at_s - d.started_at_s, abs=0.01)
    parts = {p["part"]: p["seconds"] for p in t["downtime_parts"]}
    assert sum(parts.values()) == pytest.approx(t["downtime_s"], abs=0.05), parts
    assert list(parts)[-1] == "boot to ready" and "drain" in parts, parts
    # the drain ends with the stop step, which holds Docker's die; the boot ends at the ready line
    assert parts["boot to ready"] == pytest.approx(d.ended_at_s - s["start_new"].started_at_s, abs=0.6), parts
    # Time to ready: from the console's docker start (Docker's start comes inside it) to the ready line.
    assert t["time_to_ready_from"] == "the new container's start (docker start)", t
    assert t["time_to_ready_s"] == pytest.approx(d.ended_at_s - s["start_new"].started_at_s, abs=0.01), t
    assert s["start_new"].started_at_s <= started_new < d.ended_at_s + 1


def test_the_reports_old_and_new_and_diff_are_the_real_containers(lived: LivedSwap) -> None:
    r, old, new = lived.report, lived.old, lived.new
    on = r["old_new"]
    assert (on["old_unit"], on["new_unit"], on["kind"]) == (old, new, "container")

    def model(name: str) -> str:
        args = lived.at_start[name]["Args"]
        return str(args[args.index("--model-path") + 1])

    assert (on["old_model"], on["new_model"]) == (model(old), model(new)) == ("/models/Qwen3-8B", "/models/Qwen3-14B")
    changes = {c["flag"]: c for c in r["diff"]["changes"]}
    assert (changes["--model-path"]["old"], changes["--model-path"]["new"]) == (model(old), model(new))
    # Docker's own arguments of the two containers differ in the model only: so does the diff's.
    assert [a for a in lived.at_start[old]["Args"] if a not in lived.at_start[new]["Args"]] == [model(old)]
    assert set(changes) == {"--model-path"}, changes


def test_the_reports_gpu_memory_is_the_processes_docker_ran(lived: LivedSwap) -> None:
    gpu = lived.report["gpu"]
    held_before = {g["gpu"]: g for g in gpu["before"] if g["used_mib"]}
    assert sorted(held_before) == [0], gpu["before"]  # the stand-in: CUDA_VISIBLE_DEVICES unset, GPU 0
    assert {p.split()[0] for g in held_before.values() for p in g["processes"]} == {str(lived.old_pid)}
    # After the rollback: the old container's new process (Docker's State.Pid) holds it again.
    held_after = {g["gpu"]: g for g in gpu["after"] if g["used_mib"]}
    assert {p.split()[0] for g in held_after.values() for p in g["processes"]} == {
        str(lived.at_end[lived.old]["State"]["Pid"])}, gpu["after"]
    assert gpu["after_what"] == "after the rollback", gpu
    stopped = {g["gpu"]: g["used_mib"] for g in gpu["stopped"]}
    assert gpu["freed_by"] == "the stop" and all(v == 0 for v in stopped.values()), gpu
    freed = {f["gpu"]: f["mib"] for f in gpu["freed"]}
    assert freed == {i: g["used_mib"] - stopped[i] for i, g in held_before.items()}, gpu
    assert all(f"GPU {i} {mib:,} MiB" in lived.said["stop_old"][1] for i, mib in freed.items()), lived.said


def test_the_reports_boot_timeline_is_the_new_containers_boot_in_docker_logs(lived: LivedSwap) -> None:
    """The swap's boot is the new server's (its `docker logs`), never the old one's boot again at the
    rollback."""
    new = lived.new
    boot = lived.report["boot"]
    assert [b["phase"] for b in boot][0] == "launch" and boot[-1]["phase"] == "ready", boot
    started_new = _event(lived, "start", new, lived.began_s)
    launch_at, launch = _line(lived, new, "server_args=", started_new)
    ready_at, ready = _line(lived, new, "The server is fired up", started_new)
    assert (log_time(boot[0]["stamp"]), log_time(boot[-1]["stamp"])) == (_stamp(launch), _stamp(ready)), boot
    assert boot[-1]["seconds"] == pytest.approx(ready_at - launch_at, abs=0.01)  # by Docker's times of the lines
    assert boot[-1]["at_s"] == pytest.approx(ready_at, abs=1e-3) and boot[-1]["clock"] == "docker", boot
    loaded = [b for b in boot if b["phase"] == "weights loaded"]
    assert loaded and _stamp(_line(lived, new, "Load weight end", started_new)[1]) == log_time(loaded[0]["stamp"])


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_the_report_renders_every_section(lived: LivedSwap, fmt: str) -> None:
    check_renders_every_section(lived.report, fmt, "restart", shows=(lived.old, lived.new), never=())


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
