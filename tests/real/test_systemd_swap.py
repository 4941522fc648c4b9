"""A whole swap through the console's own controller and runner against the real systemd 252 (PID 1
in a container, over its sshd): install the new unit, the gate, stop the old unit and drain its GPUs
(the stand-in nvidia-smi follows the processes systemd really runs), start the new unit and wait for
ready, then the rollback. The swap report of that run is then read section by section against what
the host itself recorded (systemd's own journal lines and times, the units' PIDs, the files).

The faults on the real daemon, each through the same controller: a crash-looping new unit, a
missing ExecStart binary (203/EXEC with `systemctl start` returning 0), an OOM at start (the
simulated SGLang dies while booting), and a crash-looping old unit at the rollback."""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from console.config import HostProfile
from console.core.derive.swap_observer import log_time
from tests.real.console_on_host import (
    WHO, Console, check_renders_every_section, check_step_rows, console_on, console_profile, ready_reading)
from tests.real.systemd_host import (
    NEW_UNIT, OLD_UNIT, SystemdHost, said_by_systemd, systemd_lines, unit_lines, unit_text)

# The module's one swap and rollback (its fixture) runs inside its first test's time: under three workers on
# two cores the whole swap took up to 200 s, so the module has the room of two ordinary tests.
pytestmark = [pytest.mark.real_systemd, pytest.mark.timeout(480)]

# The drafted new unit: the seed's, with one change the diff and the gate must see.
DRAFT_CHANGE = ("--mem-fraction-static 0.85", "--mem-fraction-static 0.83")


def profile(host: SystemdHost, directory: Path, **changes: Any) -> HostProfile:
    draft = directory / NEW_UNIT
    draft.parent.mkdir(parents=True, exist_ok=True)
    draft.write_text(unit_text(NEW_UNIT, host.server_port).replace(*DRAFT_CHANGE))
    return console_profile("real-systemd", host.ssh_options(), unit=NEW_UNIT, compare_unit=OLD_UNIT,
                           server_port=host.server_port, unit_draft=str(draft), **changes)


def model_dirs(host: SystemdHost) -> None:
    """Both units' model directories on the host, the new one with its config.json (no weights: the
    gate's diff checks the paths exist, its fit reads the config)."""
    from console.demo.hostsim.downloader import qwen122b_config

    host.sh("mkdir -p /data/models/Qwen3.5-397B-A17B-NVFP4 /shared/models/Qwen3.5-122B-A10B", check=True)
    host.put("/shared/models/Qwen3.5-122B-A10B/config.json", json.dumps(qwen122b_config(), indent=2))


def main_pid(host: SystemdHost, unit: str) -> int:
    return int(host.show(unit, "MainPID")["MainPID"])


def server_pids(host: SystemdHost, unit: str, since_s: float) -> set[int]:
    """The PIDs the unit's own lines came from (its server), since a time."""
    out = host.sh(f"journalctl -u {unit} -o json --no-pager --output-fields=_PID,_SYSTEMD_UNIT "
                  f"--since=@{int(since_s)}", check=True).stdout
    return {int(e["_PID"]) for e in map(json.loads, out.splitlines()) if e.get("_SYSTEMD_UNIT") == unit}


async def old_serving(host: SystemdHost, console: Console) -> None:
    """The old unit serving, read as such by the console (server, service and GPU panes)."""
    await console.until(lambda: ready_reading(console, NEW_UNIT) or ready_reading(console, OLD_UNIT)
                        or console.state.data("service") is not None, 60, "the first readings")
    await console.until(lambda: (g := console.state.data("gpu")) is not None
                        and sum(x.memory_used_mib or 0 for x in g.gpus) > 0, 60, "the old server's GPU memory")


@dataclass
class LivedSwap:
    """One swap and its rollback as the console reported it, and what the host recorded."""

    report: dict[str, Any]
    steps: dict[str, Any]
    said: dict[str, tuple[str, str]]
    began_s: float
    old_pid: int
    new_pids: set[int]
    old_pid_after: int
    journal: list[tuple[float, str]]  # systemd's own lines about the two units
    backups: list[str]
    installed: str
    draft: str
    downtime: Any = None
    old_log: list[tuple[float, int, str]] | None = None
    new_log: list[tuple[float, int, str]] | None = None


def _swap_and_roll_back(host: SystemdHost, directory: Path) -> LivedSwap:
    async def drive() -> LivedSwap:
        host.reset_units()
        model_dirs(host)
        host.sh(f"systemctl start {OLD_UNIT}", check=True)
        host.wait(lambda: host.healthy(host.server_port), 120, "the old server healthy")
        old_pid = main_pid(host, OLD_UNIT)
        prof = profile(host, directory)
        said: dict[str, tuple[str, str]] = {}
        async with console_on(prof, directory / "console", label="real-systemd") as console:
            await old_serving(host, console)
            began = time.time()
            said["install"] = await console.run_step("install")
            assert said["install"][0] == "done", said["install"]
            gate = console.swap.evaluate_gate()
            # The operator overrides what the gate cannot judge on this host (no model directory
            # watched, no GPUs: the stand-in), by typing each check's name.
            for check in gate:
                if not check.passes:
                    assert console.swap.override(check.name, check.name, WHO) is None
            said["preflight"] = await console.run_step("preflight")
            said["stop_old"] = await console.run_step("stop_old")
            said["start_new"] = await console.run_step("start_new")
            new_pids = server_pids(host, NEW_UNIT, began)
            said["rollback"] = await console.run_step("rollback")
            back = main_pid(host, OLD_UNIT)
            # The processes column is read every few seconds: the report is taken once a GPU
            # reading names the old unit's new server (what the host runs now).
            await console.until(lambda: any(str(p.pid) == str(back) for g in console.state.data("gpu").gpus
                                            for p in g.processes or ()), 60, "the GPUs held by the old unit again")
            # ... and the swap's memory fact "after" has followed it there (it follows the readings a minute
            # after the rollback: a first reading may name the booting server before it holds memory)
            await console.until(lambda: console.memory_after_on({0, 1, 2, 3}), 60,
                                "the swap's GPU memory after: the old unit's GPUs again")
            report = console.report()
            steps = dict(console.state.swap.steps)
            downtime = console.state.swap.downtime
        return LivedSwap(
            report=report, steps=steps, said=said, began_s=began, old_pid=old_pid, new_pids=new_pids,
            old_pid_after=main_pid(host, OLD_UNIT), journal=systemd_lines(host, began - 1, OLD_UNIT, NEW_UNIT),
            backups=host.sh(f"ls /etc/systemd/system/ | grep -F {NEW_UNIT}.bak- || true").stdout.split(),
            installed=host.sh(f"cat /etc/systemd/system/{NEW_UNIT}", check=True).stdout,
            draft=(directory / NEW_UNIT).read_text(), downtime=downtime,
            old_log=unit_lines(host, OLD_UNIT, began - 120), new_log=unit_lines(host, NEW_UNIT, began))

    return asyncio.run(drive())


@pytest.fixture(scope="module")
def lived(real_host: SystemdHost, tmp_path_factory: pytest.TempPathFactory) -> LivedSwap:
    """One swap and its rollback per module, run through the console's controller on the real host."""
    return _swap_and_roll_back(real_host, tmp_path_factory.mktemp("swap"))


# -- the run itself ------------------------------------------------------------------------------------
def test_every_step_of_the_swap_and_the_rollback_ran_on_the_real_host(lived: LivedSwap) -> None:
    said = lived.said
    assert {k: v[0] for k, v in said.items()} == {
        "install": "done", "preflight": "done", "stop_old": "done", "start_new": "done", "rollback": "done"}, said
    assert said["install"][1].startswith(f"installed /etc/systemd/system/{NEW_UNIT}; kept ")
    assert said["install"][1].endswith("; daemon-reload done")
    assert lived.installed == lived.draft and len(lived.backups) == 1  # the draft in place, the old file kept
    assert said["stop_old"][1].startswith(f"{OLD_UNIT} stopped; GPU memory drained ("), said["stop_old"]
    # the figure is the observer's (the step's own times, from the host), never the executor's in its words
    assert re.match(r"ready after systemctl start: serving", said["start_new"][1]), said["start_new"]
    assert re.match(rf"{re.escape(OLD_UNIT)} ready again", said["rollback"][1]), said["rollback"]
    # The host's own account: systemd stopped the old unit, started the new, and back.
    j = lived.journal
    stopped_old = said_by_systemd(j, rf"Stopped .*Qwen3\.5-397B|Stopped {re.escape(OLD_UNIT)}", lived.began_s)
    started_new = said_by_systemd(j, rf"Started .*Qwen3\.5-122B|Started {re.escape(NEW_UNIT)}", stopped_old)
    stopped_new = said_by_systemd(j, rf"Stopped .*Qwen3\.5-122B|Stopped {re.escape(NEW_UNIT)}", started_new)
    said_by_systemd(j, rf"Started .*Qwen3\.5-397B|Started {re.escape(OLD_UNIT)}", stopped_new)
    assert lived.new_pids and lived.old_pid not in lived.new_pids
    assert lived.old_pid_after not in (0, lived.old_pid)  # the rollback started the old unit anew


# -- the report, section by section ------------------------------------------------------------------
def test_the_reports_steps_say_what_ran_in_the_order_the_host_lived_it(lived: LivedSwap) -> None:
    steps = {s["key"]: s for s in lived.report["steps"]}
    for key in ("install", "preflight", "stop_old", "start_new", "rollback"):
        assert steps[key]["state"] == "done", steps[key]
        assert steps[key]["detail"] == lived.said[key][1]
    # Not run here, and not claimed: the download and verification were never asked for.
    assert steps["download"]["state"] == "pending"
    # rolled back: the new model's benchmark is not run, and says why (it stayed "pending" before)
    assert steps["benchmark"]["state"] == "skipped" and "rolled back" in steps["benchmark"]["detail"], \
        steps["benchmark"]
    assert steps["verify"]["state"] == "skipped" and steps["verify"]["who"] is None, steps["verify"]
    order = [lived.steps[k] for k in ("install", "preflight", "stop_old", "start_new", "rollback")]
    assert all(a.ended_at_s <= b.started_at_s for a, b in zip(order, order[1:])), order


def test_the_reports_times_hold_the_hosts_own_times(lived: LivedSwap) -> None:
    """Each step's span holds what systemd logged of it (the container shares this machine's clock)."""
    j, s = lived.journal, lived.steps
    stop, start, back = s["stop_old"], s["start_new"], s["rollback"]
    stopped_old = said_by_systemd(j, rf"Stopped .*Qwen3\.5-397B|Stopped {re.escape(OLD_UNIT)}", lived.began_s)
    started_new = said_by_systemd(j, rf"Started .*Qwen3\.5-122B|Started {re.escape(NEW_UNIT)}", stopped_old)
    stopped_new = said_by_systemd(j, rf"Stopped .*Qwen3\.5-122B|Stopped {re.escape(NEW_UNIT)}", started_new)
    started_old = said_by_systemd(j, rf"Started .*Qwen3\.5-397B|Started {re.escape(OLD_UNIT)}", stopped_new)
    assert stop.started_at_s - 1 <= stopped_old <= stop.ended_at_s + 1
    assert start.started_at_s - 1 <= started_new <= start.ended_at_s + 1
    assert back.started_at_s - 1 <= stopped_new <= started_old <= back.ended_at_s + 1
    check_step_rows(lived.report, s)


def test_the_reports_who_and_audit_name_the_operator_and_the_exact_commands(lived: LivedSwap) -> None:
    r = lived.report
    steps = {s["key"]: s for s in r["steps"]}
    assert {steps[k]["who"] for k in ("install", "preflight", "stop_old", "start_new", "rollback")} == {WHO}
    audit = r["audit"]
    assert {a["who"] for a in audit} == {WHO}
    commands = [a["command"] for a in audit if a["exit_status"] == 0]
    for expected in (f"systemctl stop -- {OLD_UNIT}", f"systemctl start -- {NEW_UNIT}",
                     f"systemctl stop -- {NEW_UNIT}", f"systemctl start -- {OLD_UNIT}"):
        assert any(c.endswith(expected) and c.startswith("timeout -k 5 ") for c in commands), (expected, commands)
    assert any("daemon-reload" in c and f".{NEW_UNIT}.gpuconsole-new" in c for c in commands)
    overridden = [g for g in r["gate"] if g["overridden_by"]]
    assert all(g["overridden_by"] == WHO for g in overridden)
    assert {a["command"] for a in audit if a["note"] == "gate override"} == {
        f"override gate check {g['check']}" for g in overridden}
    # What the gate judged on the real host itself, not overridden: the diff and the paths.
    passed = {g["check"]: g for g in r["gate"] if g["ok"] is True}
    assert {"diff", "paths"} <= set(passed), [g for g in r["gate"] if g["check"] in ("diff", "paths")]


def test_the_reports_downtime_runs_from_the_old_servers_last_served_request_to_the_new_ones_ready(
        lived: LivedSwap) -> None:
    t, s, d = lived.report["timing"], lived.steps, lived.downtime
    assert t["downtime_s"] is not None and not t["downtime_running"] and d is not None, t
    assert d.end_source == f"{NEW_UNIT} ready"
    assert s["start_new"].started_at_s < d.ended_at_s <= s["start_new"].ended_at_s
    # Its start: the old server's last batch in the journal before systemd began to stop it (the
    # simulated SGLang serves simulated traffic), never a time after the stop.
    stopping = said_by_systemd(lived.journal, rf"Stopping .*Qwen3\.5-397B|Stopping {re.escape(OLD_UNIT)}",
                               lived.began_s)
    served = [m for at, pid, m in lived.old_log if pid == lived.old_pid and at < stopping
              and re.search(r"(Decode|Prefill) batch", m)]
    assert served, "the old server logged no batch"
    # The journal's batch is stamped in whole seconds: when its stamp falls after the stop command (one
    # run in three under load), the clock starts at the stop command and says so, never at a later time.
    if t["downtime_from_source"] == "the old server's last served request, in its log":
        assert d.started_at_s == pytest.approx(log_time(served[-1][1:20]), abs=1.0), (d, served[-1])
    else:
        assert t["downtime_from_source"].endswith("(the log's last request is stamped after it)"), t
        assert d.started_at_s < (log_time(served[-1][1:20]) or 0) + 1.0, (d, served[-1])
    assert d.started_at_s <= stopping  # never after systemd began to stop it
    assert t["downtime_s"] == pytest.approx(d.ended_at_s - d.started_at_s, abs=0.01)
    # Time to ready: from systemctl start of the new unit to its ready, inside the downtime.
    assert t["time_to_ready_from"] == "the new unit's start (systemctl start)", t
    assert 0 < t["time_to_ready_s"] <= s["start_new"].ended_at_s - s["start_new"].started_at_s + 0.01


def test_the_reports_old_and_new_and_diff_are_the_real_units(lived: LivedSwap) -> None:
    r = lived.report
    on = r["old_new"]
    assert (on["old_unit"], on["new_unit"]) == (OLD_UNIT, NEW_UNIT)
    assert (on["old_model"], on["new_model"]) == ("qwen3.5-397b", "qwen3.5-122b")
    assert on["old_model_dir"] == "/data/models/Qwen3.5-397B-A17B-NVFP4"
    flags = {c["flag"]: c for c in r["diff"]["changes"]}
    assert flags["--model-path"]["new"] == "/shared/models/Qwen3.5-122B-A10B"
    assert flags["--quantization"]["change"] == "removed"


def test_the_reports_gpu_memory_is_the_processes_systemd_ran(lived: LivedSwap) -> None:
    gpu = lived.report["gpu"]
    held_before = {g["gpu"]: g for g in gpu["before"] if g["used_mib"]}
    assert sorted(held_before) == [0, 1, 2, 3], gpu["before"]  # CUDA_VISIBLE_DEVICES=0,1,2,3
    assert all(p.split()[0] == str(lived.old_pid) for g in held_before.values() for p in g["processes"]), gpu
    # After the rollback: the old unit's new server holds them again.
    held_after = {g["gpu"]: g for g in gpu["after"] if g["used_mib"]}
    assert sorted(held_after) == [0, 1, 2, 3], gpu["after"]
    assert {p.split()[0] for g in held_after.values() for p in g["processes"]} == {str(lived.old_pid_after)}, gpu
    assert gpu["after_what"] == "after the rollback", gpu
    # Freed by the stop: the reading before it minus the first drained one, per GPU (the observer's
    # fact, from the GPU readings); the stop step's own words name the same figures.
    stopped = {g["gpu"]: g["used_mib"] for g in gpu["stopped"]}
    assert gpu["freed_by"] == "the stop" and all(v <= 1024 for v in stopped.values()), gpu
    freed = {f["gpu"]: f["mib"] for f in gpu["freed"]}
    assert freed == {i: g["used_mib"] - stopped[i] for i, g in held_before.items()}, gpu
    assert all(f"GPU {i} {mib:,} MiB" in lived.said["stop_old"][1] for i, mib in freed.items()), lived.said


def test_the_reports_boot_timeline_is_the_new_units_boot_in_the_real_journal(lived: LivedSwap) -> None:
    """The swap's boot is the new unit's (its journal lines), never the old unit's boot again at the
    rollback."""
    boot = lived.report["boot"]
    phases = [b["phase"] for b in boot]
    assert phases and phases[0] == "launch" and phases[-1] == "ready", boot
    assert lived.new_log is not None
    launch = [m for _, pid, m in lived.new_log if pid in lived.new_pids and "server_args=" in m]
    ready = [m for _, pid, m in lived.new_log if pid in lived.new_pids and "The server is fired up" in m]
    assert launch and ready, lived.new_log[:5]
    assert (log_time(boot[0]["stamp"]), log_time(boot[-1]["stamp"])) == (log_time(launch[0][1:20]),
                                                                   log_time(ready[0][1:20])), boot


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_the_report_renders_every_section(lived: LivedSwap, fmt: str) -> None:
    check_renders_every_section(lived.report, fmt, "restart", shows=(OLD_UNIT, NEW_UNIT), never=())


# -- faults on the real systemd, through the same controller --------------------------------------------
def fault_dropin(host: SystemdHost, unit: str, text: str) -> None:
    host.put(f"/etc/systemd/system/{unit}.d/60-fault.conf", "[Service]\n" + text)
    host.sh("systemctl daemon-reload", check=True)


async def _one_step_with_a_fault(host: SystemdHost, directory: Path, unit: str, fault: str,
                                 key: str) -> tuple[str, str]:
    """Both units reset, UNIT given a FAULT drop-in, then one swap action KEY through the controller."""
    host.reset_units()
    fault_dropin(host, unit, fault)
    async with console_on(profile(host, directory), directory / "console", label="real-systemd") as console:
        await console.until(lambda: console.state.data("service") is not None, 60, "the service pane")
        return await console.run_step(key)


async def _start_new_then_roll_back(host: SystemdHost, directory: Path) -> tuple[tuple[str, str], tuple[str, str],
                                                                                    Console]:
    """With nothing serving, start the new unit through the controller, then the rollback."""
    async with console_on(profile(host, directory), directory / "console", label="real-systemd") as console:
        await console.until(lambda: console.state.data("service") is not None, 60, "the service pane")
        start = await console.run_step("start_new")
        back = await console.run_step("rollback")
        return start, back, console


async def test_a_crash_looping_new_unit_fails_the_start_with_its_restart_count_and_the_rollback_works(
        real_host: SystemdHost, tmp_path: Path) -> None:
    host = real_host
    host.reset_units()
    fault_dropin(host, NEW_UNIT, 'RestartSec=1s\nEnvironment="GPUSIM_OOM=1"\n')
    start, back, _ = await _start_new_then_roll_back(host, tmp_path)
    assert start[0] == "failed", start
    assert start[1].startswith("the new server died while booting:"), start
    assert "activating (auto-restart)" in start[1] and "not ready within" not in start[1], start
    assert "CUDA out of memory" in start[1], start  # the cause, from the server's own last lines
    assert back == ("done", back[1]) and back[1].startswith(f"{OLD_UNIT} ready again"), back
    assert host.show(NEW_UNIT, "ActiveState")["ActiveState"] in ("inactive", "failed")  # no longer restarting


async def test_a_missing_execstart_binary_fails_the_start_naming_203_exec(real_host: SystemdHost,
                                                                          tmp_path: Path) -> None:
    host = real_host
    host.reset_units()
    text = host.sh(f"cat /etc/systemd/system/{NEW_UNIT}", check=True).stdout
    host.put(f"/etc/systemd/system/{NEW_UNIT}", text.replace("/opt/sglang/.venv/bin/python", "/opt/missing/bin/python"))
    fault_dropin(host, NEW_UNIT, "Restart=no\n")
    prof_dir = tmp_path / "c"
    async with console_on(profile(host, prof_dir), prof_dir / "console", label="real-systemd") as console:
        await console.until(lambda: console.state.data("service") is not None, 60, "the service pane")
        state, detail = await console.run_step("start_new")
        audit = [a for a in console.state.swap.audit if a.action == "start_new"]
    assert state == "failed" and "203/EXEC" in detail, detail
    assert audit and audit[-1].exit_status == 0  # systemctl start said yes: the console did not believe it


async def test_an_oom_at_start_fails_the_start_naming_the_out_of_memory(real_host: SystemdHost,
                                                                        tmp_path: Path) -> None:
    host = real_host
    state, detail = await _one_step_with_a_fault(host, tmp_path, NEW_UNIT, 'Restart=no\nEnvironment="GPUSIM_OOM=1"\n',
                                                 "start_new")
    assert state == "failed" and detail.startswith("the new server died while booting:"), detail
    assert "out of memory" in detail.lower(), detail
    assert host.show(NEW_UNIT, "ActiveState")["ActiveState"] == "failed"


async def test_a_crash_looping_old_unit_fails_the_rollback_at_once_naming_the_loop(real_host: SystemdHost,
                                                                                   tmp_path: Path) -> None:
    host = real_host
    state, detail = await _one_step_with_a_fault(host, tmp_path, OLD_UNIT,
                                                 'RestartSec=1s\nEnvironment="GPUSIM_OOM=1"\n', "rollback")
    assert state == "failed", detail
    assert f"{OLD_UNIT} failed to start again:" in detail and "it will take the GPUs back" in detail, detail
    assert "not ready within" not in detail, detail  # named, not waited out (ready_timeout_s is 150 s)
    host.sh(f"systemctl stop {OLD_UNIT}")
