"""The in-place swap of a compose service through the console's own controller on the real dockerd (over
OpenSSH's sshd, the real docker CLI and the test run's Compose v2 plugin on its PATH): a compose project
(tests/real/compose_host.py) whose service `sglang` serves the model from a directory of this machine
bind-mounted at /models, and whose `sglang-next` is the fine-tune's launch; plan the paths (in place
chosen: the same config.json), the install creates `sglang-next`'s container (`docker compose create`,
not started: the launch a later restart uses), the gate, then POST /update_weights_from_disk with the
container's path of the new weights to the serving container. The module runs that swap once (its
fixture); its report is then read section by section against what Docker and Compose recorded:
`docker inspect` (the same process, never restarted), `docker events` (the create only), `docker
compose logs` (the update's begin and end lines), `docker compose config` and the audit file."""

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
from tests.real.compose_host import ComposeProject, compose_config, compose_down, compose_logs, compose_project
from tests.real.console_on_host import (
    WHO,
    LivedSwapFacts,
    audit_entries,
    check_audit_is_the_file,
    check_in_place_gpu_memory,
    check_renders_every_section,
    check_step_rows,
    console_on,
    console_profile,
    logged,
)
from tests.real.daemons import Dockerd
from tests.real.docker_host import (
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

OLD_MODEL, NEW_MODEL = "Qwen3.5-122B-A10B", "Qwen3.5-122B-A10B-ft"
STEPS = ("paths", "install", "preflight", "in_place")


@dataclass
class LivedSwap(LivedSwapFacts):
    compose: ComposeProject
    old: str
    new: str
    models: Path
    before: dict[str, Any]  # docker inspect of the serving container before the swap
    after: dict[str, Any]
    new_after: dict[str, Any]
    events: list[tuple[float, str, str]]
    log: list[tuple[float, str]]  # the serving service's `docker compose logs -t`
    compose_config: dict[str, Any]


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
        project = compose_project(dockerd, directory / "project", f"gcip{tag}", old_port=port, new_port=port,
                                  old_model=f"/models/{OLD_MODEL}", new_model=f"/models/{NEW_MODEL}",
                                  old_extra=("--served-model-name", "qwen3.5-122b"),
                                  new_extra=("--served-model-name", "qwen3.5-122b-ft"),
                                  env={"STANDIN_NVIDIA_SMI_TAG": tag}, models_dir=models)
        old, new = project.old, project.new
        assert host.sshd is not None
        prof = console_profile("real-compose", host.sshd.options(), compose=str(project.file),
                               compose_service=project.new_service, compare_container=old, server_port=port,
                               model_dir=str(models / NEW_MODEL))
        try:
            async with console_on(prof, directory / "console", label="real-compose") as console:
                await console.until(lambda: (r := console.state.reading("server")) is not None and r.data is not None
                                    and r.data.status == "ready", 90, "the serving service's server ready")
                await console.until(lambda: (g := console.state.data("gpu")) is not None and any(
                    (x.memory_used_mib or 0) > 0 for x in g.gpus), 90, "the server on the stand-in GPUs")
                await console.until(lambda: (s := console.state.data("service")) is not None and s.new is not None
                                    and s.new.name == new, 60, "the service pane naming Compose's new container")
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
                compose=project, old=old, new=new, models=models, report=report, steps=steps, said=said,
                downtime=downtime, began_s=began, before=before, after=inspect(dockerd, old),
                new_after=inspect(dockerd, new), events=docker_events(dockerd, began - 1, time.time() + 1, old, new),
                log=compose_logs(dockerd, project, project.old_service), compose_config=compose_config(dockerd, project),
                audit_file=audit_entries(directory / "console"))
        finally:
            compose_down(dockerd, project)
            await close_host(host)

    return asyncio.run(drive())


@pytest.fixture(scope="module")
def lived(dockerd: Dockerd, tmp_path_factory: pytest.TempPathFactory) -> LivedSwap:
    """One in-place swap of a compose service per module, through the console's controller on the real dockerd."""
    require_sshd()
    return _swap_in_place(dockerd, tmp_path_factory.mktemp("compose-in-place"))


def _line(lived: LivedSwap, text: str) -> tuple[float, str]:
    return logged(lived.log, text, since_s=lived.began_s - 1, last=True, who=lived.old)  # type: ignore[return-value]


def _first_line(lived: LivedSwap, text: str) -> tuple[float, str]:
    """The first of the update's lines with `text` (each TP rank writes one): (Docker's time, line)."""
    return logged(lived.log, text, since_s=lived.began_s - 1, who=lived.old)  # type: ignore[return-value]


# -- the run itself ------------------------------------------------------------------------------------
def test_the_update_ran_in_the_serving_services_container_compose_only_created_the_next(lived: LivedSwap) -> None:
    c = lived.compose
    assert {k: v[0] for k, v in lived.said.items()} == {k: "done" for k in STEPS}, lived.said
    assert lived.said["in_place"][1].startswith("weights updated in place: "), lived.said
    assert lived.said["install"][1].endswith(f"created {lived.new} from {c.file}"), lived.said
    # Docker's own account: the same process, never restarted; Compose created the next service's container
    # (its labels), which never started: the one container event of the swap is that create.
    b, a = lived.before["State"], lived.after["State"]
    assert (a["Pid"], a["StartedAt"], a["Running"], lived.after["RestartCount"]) == (b["Pid"], b["StartedAt"], True, 0)
    labels = lived.new_after["Config"]["Labels"]
    assert (labels["com.docker.compose.service"], labels["com.docker.compose.project.config_files"]) == (
        c.new_service, str(c.file)), labels
    assert lived.new_after["State"]["Status"] == "created"
    assert [(act, n) for _, act, n in lived.events] == [("create", lived.new)], lived.events
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
    assert all(a.ended_at_s <= b.started_at_s + 0.01 for a, b in zip(order, order[1:], strict=False)), [
        (s.key, s.started_at_s, s.ended_at_s) for s in order]


def test_the_reports_times_hold_composes_create_and_the_services_own_lines(lived: LivedSwap) -> None:
    install, step = lived.steps["install"], lived.steps["in_place"]
    created = docker_event(lived.events, "create", lived.new)
    assert install.started_at_s <= created <= install.ended_at_s, (install, created)
    began, ended = _first_line(lived, "Update engine weights online from disk begin"), _line(lived, "Update weights end.")
    assert step.started_at_s <= began[0] <= ended[0], (step, began, ended)
    assert step.ended_at_s == pytest.approx(ended[0], abs=1e-6), (step, ended)
    check_step_rows(lived.report, lived.steps)


def test_the_reports_who_and_audit_are_the_compose_create_and_the_update_with_the_containers_path(
        lived: LivedSwap) -> None:
    r, c = lived.report, lived.compose
    check_audit_is_the_file(r, lived.audit_file)
    assert r["approvals"] == []
    ran = [(a["action"], a["command"]) for a in r["audit"] if a["exit_status"] == 0]
    assert ("install", f"timeout -k 5 300 docker compose -f {c.file} create --no-recreate -- {c.new_service}") in ran
    (update,) = [a for a in r["audit"] if a["action"] == "in_place"]
    assert update["exit_status"] == 0 and update["command"].startswith("timeout -k 5 ")
    assert f'"model_path": "/models/{NEW_MODEL}"' in update["command"]  # the container's path, not the host's
    said = " ".join(a["command"] for a in r["audit"])
    assert "docker stop" not in said and "docker start" not in said and "systemctl" not in said


def test_the_reports_downtime_is_the_pause_the_services_log_says(lived: LivedSwap) -> None:
    t, d = lived.report["timing"], lived.downtime
    began, ended = _first_line(lived, "Update engine weights online from disk begin"), _line(lived, "Update weights end.")
    assert d.started_at_s == pytest.approx(began[0], abs=1e-6), (d, began)
    assert d.ended_at_s == pytest.approx(ended[0], abs=1e-6), (d, ended)
    assert not t["downtime_running"] and t["downtime_s"] == pytest.approx(d.ended_at_s - d.started_at_s, abs=0.01)
    assert [p["part"] for p in t["downtime_parts"]] == ["in-place pause (requests held while the weights load)"]
    assert sum(p["seconds"] for p in t["downtime_parts"]) == pytest.approx(t["downtime_s"], abs=0.05)
    assert t["time_to_ready_from"] == "the update's begin (the server's log)", t
    assert t["time_to_ready_s"] == pytest.approx(d.ended_at_s - d.started_at_s, abs=0.01), t


def test_the_reports_old_and_new_and_diff_are_the_compose_files_two_services(lived: LivedSwap) -> None:
    r, c = lived.report, lived.compose
    # the compose file and both services, named as Compose labels the containers
    on_ = lived.report["old_new"]
    assert (on_["compose_file"], on_["old_service"], on_["new_service"]) == (
        str(lived.compose.file), lived.compose.old_service, lived.compose.new_service), on_
    on = r["old_new"]
    assert (on["old_unit"], on["new_unit"]) == (lived.old, lived.new), on
    assert (on["old_model"], on["new_model"]) == ("qwen3.5-122b", "qwen3.5-122b-ft")
    # the old model's directory: its --model-path read through the service's bind mount (the host path)
    (source, inside), = [b.split(":")[:2] for b in lived.before["HostConfig"]["Binds"] if b.split(":")[1] == "/models"]
    args = lived.before["Args"]
    assert on["old_model_dir"] == args[args.index("--model-path") + 1].replace(inside, source, 1)
    assert (on["old_model_dir"], on["model_dir"]) == (str(lived.models / OLD_MODEL), str(lived.models / NEW_MODEL))
    services = lived.compose_config["services"]
    old_cmd, new_cmd = services[c.old_service]["command"], services[c.new_service]["command"]
    assert lived.before["Args"] == old_cmd[1:] and lived.new_after["Args"] == new_cmd[1:]
    # read from the compose file's service (its launch as the file writes it) against the old container: no unit
    assert r["diff"]["from"] == "the compose file's service against the old container", r["diff"]["from"]
    changes = {ch["flag"]: (ch["old"], ch["new"]) for ch in r["diff"]["changes"]}
    # the two services' commands differ in the model and its served name only: so does the diff
    assert [(o, n) for o, n in zip(old_cmd, new_cmd, strict=True) if o != n] == list(changes.values())
    assert changes == {"--model-path": (f"/models/{OLD_MODEL}", f"/models/{NEW_MODEL}"),
                       "--served-model-name": ("qwen3.5-122b", "qwen3.5-122b-ft")}, changes
    assert r["diff"]["env_changes"] == [], r["diff"]


def test_the_reports_gpu_memory_is_the_serving_services_process_throughout(lived: LivedSwap) -> None:
    check_in_place_gpu_memory(lived.report, [0], lived.before["State"]["Pid"])


def test_the_reports_boot_timeline_is_the_update_in_the_services_compose_logs(lived: LivedSwap) -> None:
    r = lived.report
    rows = {b["phase"]: b for b in r["boot"]}
    assert list(rows) == ["update begin", "update end"], r["boot"]
    began = _first_line(lived, "Update engine weights online from disk begin")[0]
    ended = _line(lived, "Update weights end.")[0]
    assert rows["update begin"]["at_s"] == pytest.approx(began, abs=0.01), rows
    assert rows["update end"]["at_s"] == pytest.approx(ended, abs=0.01), rows
    assert {row["clock"] for row in rows.values()} == {"docker"}, rows
    assert r["boot_note"].startswith("in place: no server booted"), r["boot_note"]
    launch = [x for x in lived.log if "server_args=" in x[1]]
    assert len(launch) == 1 and launch[0][0] < lived.began_s and launch[0][1][1:20] in r["boot_note"]


def _created(lived: LivedSwap) -> str:
    """The install's exact Compose command, as every format of the report must show it."""
    return f"docker compose -f {lived.compose.file} create --no-recreate -- {lived.compose.new_service}"


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_the_report_renders_every_section(lived: LivedSwap, fmt: str) -> None:
    check_renders_every_section(lived.report, fmt, "in-place", shows=("in-place pause", lived.old, _created(lived)))
