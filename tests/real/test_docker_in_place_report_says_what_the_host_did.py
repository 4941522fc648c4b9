"""The in-place swap of SGLang in a container through the console's own controller on the real dockerd
(over OpenSSH's sshd, the real docker CLI on its PATH): the serving container runs the model from a
directory of this machine bind-mounted at /models; the fine-tune's container is created, not started
(the launch a later restart uses); plan the paths (in place chosen: the same config.json), check the
image and the new container, the gate, then POST /update_weights_from_disk with the container's path
of the new weights to the running server (the simulated SGLang answers it as SGLang does). The module
runs that swap once (its fixture); its report is then read section by section against what Docker
recorded: `docker inspect` (the same process, never restarted), `docker events` (no stop, no start),
`docker logs -t` (the update's begin and end lines) and the audit file."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from console.demo.hostsim.downloader import qwen122b_config
from tests.real.console_on_host import (
    WHO, LivedSwapFacts, audit_entries, check_audit_is_the_file, check_in_place_gpu_memory, check_renders_every_section, check_step_rows,
    console_on, console_profile, logged)
from tests.real.daemons import Dockerd
from tests.real.docker_host import (
    close_host, docker_events, docker_logs, inspect, open_host, require_sshd, run_sglang, standin_gpus)
from tests.real.ports import free_port

pytestmark = [pytest.mark.real_docker, pytest.mark.timeout(480)]

OLD_MODEL, NEW_MODEL = "Qwen3.5-122B-A10B", "Qwen3.5-122B-A10B-ft"
STEPS = ("paths", "install", "preflight", "in_place")


@dataclass
class LivedSwap(LivedSwapFacts):
    old: str
    new: str
    models: Path
    before: dict[str, Any]  # docker inspect of the serving container before the swap
    after: dict[str, Any]
    new_after: dict[str, Any]
    events: list[tuple[float, str, str]]
    log: list[tuple[float, str]]


def _swap_in_place(dockerd: Dockerd, directory: Path) -> LivedSwap:
    models = directory / "models"
    for name in (OLD_MODEL, NEW_MODEL):
        (models / name).mkdir(parents=True)
        (models / name / "config.json").write_text(json.dumps(qwen122b_config(), indent=2))
        with open(models / name / "model-00001-of-00001.safetensors", "wb") as fh:
            fh.truncate(64 << 20)

    async def drive() -> LivedSwap:
        host = await open_host(dockerd, directory / "host")
        tag = secrets.token_hex(4)
        standin_gpus(host, tag)
        port = free_port()
        old, new = f"gc-ip-old-{tag}", f"gc-ip-new-{tag}"
        env = (f"STANDIN_NVIDIA_SMI_TAG={tag}",)
        run_sglang(dockerd, old, port, model=f"/models/{OLD_MODEL}", models_dir=models, env=env,
                   extra=("--served-model-name", "qwen3.5-122b"))
        run_sglang(dockerd, new, port, create=True, model=f"/models/{NEW_MODEL}", models_dir=models, env=env,
                   extra=("--served-model-name", "qwen3.5-122b-ft"))
        assert host.sshd is not None
        o = host.sshd.options()
        prof = console_profile("real-docker", o, container=new, compare_container=old, server_port=port,
                               model_dir=str(models / NEW_MODEL))
        try:
            async with console_on(prof, directory / "console", label="real-docker") as console:
                await console.until(lambda: (r := console.state.reading("server")) is not None and r.data is not None
                                    and r.data.status == "ready", 90, "the serving container's server ready")
                await console.until(lambda: (g := console.state.data("gpu")) is not None and any(
                    (x.memory_used_mib or 0) > 0 for x in g.gpus), 90, "the server on the stand-in GPUs")
                before = inspect(dockerd, old)
                began = time.time()
                said: dict[str, tuple[str, str]] = {}
                for key in STEPS:
                    if key == "preflight":
                        for check in console.swap.evaluate_gate():  # no GPUs: the operator overrides by name
                            if not check.passes:
                                assert console.swap.override(check.name, check.name, WHO) is None
                    said[key] = await console.run_step(key)
                    assert said[key][0] == "done", f"{key}: {said[key][1]}"
                done = time.time()
                await console.until(lambda: console.state.reading("gpu").ok_at_s > done, 60, "a GPU reading after it")
                report = console.report()
                steps = dict(console.state.swap.steps)
                downtime = console.state.swap.downtime
            return LivedSwap(
                old=old, new=new, models=models, report=report, steps=steps, said=said, downtime=downtime,
                began_s=began, before=before, after=inspect(dockerd, old), new_after=inspect(dockerd, new),
                events=docker_events(dockerd, began - 1, time.time() + 1, old, new), log=docker_logs(dockerd, old),
                audit_file=audit_entries(directory / "console"))
        finally:
            dockerd.docker("rm", "-f", old, new, check=False)
            await close_host(host)

    return asyncio.run(drive())


@pytest.fixture(scope="module")
def lived(dockerd: Dockerd, tmp_path_factory: pytest.TempPathFactory) -> LivedSwap:
    """One in-place swap per module, through the console's controller on the real dockerd."""
    require_sshd()
    return _swap_in_place(dockerd, tmp_path_factory.mktemp("docker-in-place"))


def _line(lived: LivedSwap, text: str) -> tuple[float, str]:
    return logged(lived.log, text, since_s=lived.began_s - 1, last=True, who=lived.old)  # type: ignore[return-value]


def _first_line(lived: LivedSwap, text: str) -> tuple[float, str]:
    """The first of the update's lines with `text` (each TP rank writes one): (Docker's time, line)."""
    return logged(lived.log, text, since_s=lived.began_s - 1, who=lived.old)  # type: ignore[return-value]


# -- the run itself ------------------------------------------------------------------------------------
def test_the_update_ran_in_the_running_container_docker_never_stopped_or_started_one(lived: LivedSwap) -> None:
    assert {k: v[0] for k, v in lived.said.items()} == {k: "done" for k in STEPS}, lived.said
    assert lived.said["in_place"][1].startswith("weights updated in place: "), lived.said
    assert lived.said["install"][1].endswith(f"{lived.new} exists (created)"), lived.said
    # Docker's own account: the same process, never restarted; no container event at all during the swap.
    b, a = lived.before["State"], lived.after["State"]
    assert (a["Pid"], a["StartedAt"], a["Running"], lived.after["RestartCount"]) == (b["Pid"], b["StartedAt"], True, 0)
    assert lived.new_after["State"]["Status"] == "created"  # the fine-tune's launch, for a later restart
    assert not [e for e in lived.events if e[1] in ("start", "stop", "die", "kill", "restart")], lived.events
    _line(lived, "Update engine weights online from disk begin")
    _line(lived, "Update weights end.")


# -- the report, section by section ------------------------------------------------------------------
def test_the_reports_steps_are_the_in_place_path_and_say_why_the_others_did_not_run(lived: LivedSwap) -> None:
    steps = {s["key"]: s for s in lived.report["steps"]}
    for key in STEPS:
        assert (steps[key]["state"], steps[key]["detail"], steps[key]["who"]) == ("done", lived.said[key][1], WHO)
    for key in ("stop_old", "start_new"):  # skipped with the reason (in a container's words), never "pending"
        assert steps[key]["state"] == "skipped" and steps[key]["detail"].startswith("in place: "), steps[key]
        assert "container" in steps[key]["detail"] and " unit" not in steps[key]["detail"], steps[key]
    ran = [s["key"] for s in lived.report["steps"] if s["state"] == "done"]
    assert ran == list(STEPS), ran
    order = [lived.steps[k] for k in STEPS]
    # one step after the other (a time the observer took from the server's line is Docker's time of it)
    assert all(a.ended_at_s <= b.started_at_s + 0.01 for a, b in zip(order, order[1:])), [
        (s.key, s.started_at_s, s.ended_at_s) for s in order]


def test_the_reports_times_hold_the_containers_own_lines(lived: LivedSwap) -> None:
    step = lived.steps["in_place"]
    began, ended = _first_line(lived, "Update engine weights online from disk begin"), _line(lived, "Update weights end.")
    assert step.started_at_s <= began[0] <= ended[0], (step, began, ended)
    # its end: Docker's time of the last "Update weights end." line, not the server's whole-second stamp
    assert step.ended_at_s == pytest.approx(ended[0], abs=1e-6), (step, ended)
    check_step_rows(lived.report, lived.steps)


def test_the_reports_who_and_audit_are_the_update_with_the_containers_own_path(lived: LivedSwap) -> None:
    r = lived.report
    check_audit_is_the_file(r, lived.audit_file)
    assert r["approvals"] == []
    (update,) = [a for a in r["audit"] if a["action"] == "in_place"]
    assert update["exit_status"] == 0 and update["command"].startswith("timeout -k 5 ")
    assert f'"model_path": "/models/{NEW_MODEL}"' in update["command"]  # the container's path, not the host's
    said = " ".join(a["command"] for a in r["audit"])
    assert "docker stop" not in said and "docker start" not in said and "systemctl" not in said


def test_the_reports_downtime_is_the_pause_the_containers_log_says(lived: LivedSwap) -> None:
    t, d = lived.report["timing"], lived.downtime
    began, ended = _first_line(lived, "Update engine weights online from disk begin"), _line(lived, "Update weights end.")
    # Docker's times of the update's first begin line and its last end line, not their whole-second stamps
    assert d.started_at_s == pytest.approx(began[0], abs=1e-6), (d, began)
    assert d.ended_at_s == pytest.approx(ended[0], abs=1e-6), (d, ended)
    assert not t["downtime_running"] and t["downtime_s"] == pytest.approx(d.ended_at_s - d.started_at_s, abs=0.01)
    assert [p["part"] for p in t["downtime_parts"]] == ["in-place pause (requests held while the weights load)"]
    assert sum(p["seconds"] for p in t["downtime_parts"]) == pytest.approx(t["downtime_s"], abs=0.05)
    assert t["time_to_ready_from"] == "the update's begin (the server's log)", t
    assert t["time_to_ready_s"] == pytest.approx(d.ended_at_s - d.started_at_s, abs=0.01), t


def test_the_reports_old_and_new_and_diff_are_the_containers_and_the_model_directories_on_the_host(
        lived: LivedSwap) -> None:
    r = lived.report
    on = r["old_new"]
    assert (on["old_unit"], on["new_unit"], on["kind"]) == (lived.old, lived.new, "container")
    assert (on["old_model"], on["new_model"]) == ("qwen3.5-122b", "qwen3.5-122b-ft")
    # the old model's directory: its --model-path read through Docker's bind mount (the host path)
    (source, inside), = [b.split(":")[:2] for b in lived.before["HostConfig"]["Binds"] if b.split(":")[1] == "/models"]
    args = lived.before["Args"]
    assert on["old_model_dir"] == args[args.index("--model-path") + 1].replace(inside, source, 1)
    assert (on["old_model_dir"], on["model_dir"]) == (str(lived.models / OLD_MODEL), str(lived.models / NEW_MODEL))
    changes = {c["flag"]: (c["old"], c["new"]) for c in r["diff"]["changes"]}
    assert changes == {"--model-path": (f"/models/{OLD_MODEL}", f"/models/{NEW_MODEL}"),
                       "--served-model-name": ("qwen3.5-122b", "qwen3.5-122b-ft")}, changes


def test_the_reports_gpu_memory_is_the_serving_containers_process_throughout(lived: LivedSwap) -> None:
    # the stand-in: no CUDA_VISIBLE_DEVICES, GPU 0; Docker's State.Pid, before and after
    check_in_place_gpu_memory(lived.report, [0], lived.before["State"]["Pid"])


def test_the_reports_boot_timeline_is_the_update_in_the_containers_log(lived: LivedSwap) -> None:
    r = lived.report
    rows = {b["phase"]: b for b in r["boot"]}
    assert list(rows) == ["update begin", "update end"], r["boot"]
    began = _first_line(lived, "Update engine weights online from disk begin")[0]
    ended = _line(lived, "Update weights end.")[0]
    # each row at the host's time of its line (the server stamps whole seconds)
    assert rows["update begin"]["at_s"] == pytest.approx(began, abs=0.01), rows
    assert rows["update end"]["at_s"] == pytest.approx(ended, abs=0.01), rows
    assert {row["clock"] for row in rows.values()} == {"docker"}, rows
    assert r["boot_note"].startswith("in place: no server booted"), r["boot_note"]
    launch = [x for x in lived.log if "server_args=" in x[1]]
    assert len(launch) == 1 and launch[0][0] < lived.began_s and launch[0][1][1:20] in r["boot_note"]


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_the_report_renders_every_section(lived: LivedSwap, fmt: str) -> None:
    check_renders_every_section(lived.report, fmt, "in-place", shows=("in-place pause", lived.old))
