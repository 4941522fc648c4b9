"""The beside swap through the console's own controller on the real systemd 252 (PID 1 in a container,
over its sshd): the 397B unit serves on GPUs 0-3 behind a router (the simulated sgl-router, itself a
unit of the host); plan the paths (beside chosen: another architecture, GPUs 4-7 free), install the
new unit drafted for GPUs 4-7 and the next port, the gate, start it beside the old one, then move the
traffic (the router adds the new worker, removes the old, the old unit is stopped). The module runs
that swap once (its fixture); its report is then read section by section against what the host
recorded itself: systemd's own lines and `systemctl show` of both units, the units' journal lines
(the new server's boot, the router's worker changes), the unit file on the host, and the audit file."""

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
    WHO, LivedSwapFacts, audit_entries, check_audit_is_the_file, check_renders_every_section, check_step_rows,
    console_on, console_profile, logged, ready_reading)
from tests.real.console_on_host import server_stamp as _stamp
from tests.real.systemd_host import (
    MOUNTED_CONSOLE, NEW_UNIT, OLD_UNIT, SystemdHost, require_curl, said_by_systemd, systemd_lines, unit_lines,
    unit_text)

pytestmark = [pytest.mark.real_systemd, pytest.mark.timeout(480)]

ROUTER_UNIT = "sglang-router.service"
OLD_DIR, NEW_DIR = "/data/models/Qwen3.5-397B-A17B-NVFP4", "/shared/models/Qwen3.5-122B-A10B"
STEPS = ("paths", "install", "preflight", "beside", "switch_traffic")


def router_port(host: SystemdHost) -> int:
    return host.server_port + 2  # the new server takes the next port (server_port + 1): both the kit's


def profile(host: SystemdHost, directory: Path) -> HostProfile:
    draft = directory / NEW_UNIT
    draft.parent.mkdir(parents=True, exist_ok=True)
    draft.write_text(unit_text(NEW_UNIT, host.server_port))
    return console_profile("real-systemd", host.ssh_options(), unit=NEW_UNIT, compare_unit=OLD_UNIT,
                           server_port=host.server_port, unit_draft=str(draft), model_dir=NEW_DIR,
                           router_url=f"http://127.0.0.1:{router_port(host)}", router_log=f"journal:{ROUTER_UNIT}")


def model_dirs(host: SystemdHost) -> None:
    """Both checkpoints on the host: config.json (two architectures) and sparse shards (no disk used)."""
    from console.demo.hostsim.downloader import qwen122b_config, qwen122b_files
    from console.demo.hostsim.downtime_scenario import qwen397b_config

    sizes = [f.size for f in qwen122b_files() if f.path.endswith(".safetensors")]
    shards = " ".join(f"&& truncate -s {size} {NEW_DIR}/model-{i:05d}-of-{len(sizes):05d}.safetensors"
                      for i, size in enumerate(sizes, 1))
    host.sh(f"mkdir -p {OLD_DIR} {NEW_DIR} {shards}", check=True)
    host.put(f"{NEW_DIR}/config.json", json.dumps(qwen122b_config(), indent=2))
    host.put(f"{OLD_DIR}/config.json", json.dumps(qwen397b_config(), indent=2))


@dataclass
class LivedSwap(LivedSwapFacts):
    old_pid: int
    new_shown: dict[str, str]
    old_shown: dict[str, str]
    new_log: list[tuple[float, int, str]]
    router_log: list[tuple[float, int, str]]
    systemd: list[tuple[float, str]]
    installed: str
    fresh_router: Any  # the router as a console started after the switch read it (its journal)
    fresh_steps: dict[str, Any]  # that console's steps


def _swap_beside(host: SystemdHost, directory: Path) -> LivedSwap:
    async def drive() -> LivedSwap:
        host.reset_units()
        # The new unit is not on the host yet (its drop-in with the simulated SGLang's environment is).
        host.sh(f"rm /etc/systemd/system/{NEW_UNIT} && systemctl daemon-reload", check=True)
        host.sh(f"systemctl stop {ROUTER_UNIT}; systemctl reset-failed {ROUTER_UNIT}", timeout_s=60)
        model_dirs(host)
        host.sh(f"systemctl start {OLD_UNIT}", check=True)
        host.wait(lambda: host.healthy(host.server_port), 120, "the old server healthy")
        host.sh(f"systemd-run --unit {ROUTER_UNIT} -p Environment=PYTHONPATH={MOUNTED_CONSOLE} "
                f"-p Environment=PYTHONUNBUFFERED=1 /usr/bin/python3 -m console.demo.hostsim.fake_sglang.router "
                f"--port {router_port(host)} --worker-startup-timeout-secs 30 "
                f"--worker-urls http://127.0.0.1:{host.server_port}", check=True)
        host.wait(lambda: host.sh(f"curl -sS --max-time 2 http://127.0.0.1:{router_port(host)}/list_workers")
                  .returncode == 0, 60, "the router answering")
        old_pid = int(host.show(OLD_UNIT, "MainPID")["MainPID"])
        prof = profile(host, directory)
        said: dict[str, tuple[str, str]] = {}
        async with console_on(prof, directory / "console", label="real-systemd") as console:
            await console.until(lambda: ready_reading(console, None), 90, "the old server read as ready")
            await console.until(lambda: (g := console.state.data("gpu")) is not None
                                and sum(x.memory_used_mib or 0 for x in g.gpus) > 0, 60, "the old server's GPU memory")
            began = time.time()
            for key in STEPS:
                if key == "preflight":
                    for check in console.swap.evaluate_gate():  # no GPUs here (the stand-in): overridden by name
                        if not check.passes:
                            assert console.swap.override(check.name, check.name, WHO) is None
                said[key] = await console.run_step(key)
                assert said[key][0] == "done", f"{key}: {said[key][1]}"
            new_pid = int(host.show(NEW_UNIT, "MainPID")["MainPID"])
            await console.until(lambda: any(str(p.pid) == str(new_pid) for g in console.state.data("gpu").gpus
                                            for p in g.processes or ()) and not any(
                str(p.pid) == str(old_pid) for g in console.state.data("gpu").gpus for p in g.processes or ()),
                60, "the GPUs held by the new unit only")
            # ... and the swap's memory fact has followed it (the observer writes it from the readings)
            await console.until(lambda: console.memory_after_on({4, 5, 6, 7}), 60,
                                "the swap's GPU memory after: the new unit's GPUs only")
            report = console.report()
            steps = dict(console.state.swap.steps)
            downtime = console.state.swap.downtime
        # A console started after the switch (its audit log the same file): the router's moves from
        # the router's own record in journald (router_log journal:UNIT), as the router wrote them.
        async with console_on(prof, directory / "console", label="real-systemd") as fresh:
            await fresh.until(lambda: (r := fresh.state.data("router")) is not None and len(r.moves) >= 2
                              and (s := fresh.state.swap.steps.get("switch_traffic")) is not None
                              and s.state == "done", 90,
                              "the fresh console's router moves, read from its journal, and the switch done")
            fresh_router, fresh_steps = fresh.state.data("router"), dict(fresh.state.swap.steps)
        props = ("MainPID", "ActiveState", "ExecMainStartTimestamp", "NRestarts")
        return LivedSwap(
            report=report, steps=steps, said=said, downtime=downtime, began_s=began, old_pid=old_pid,
            new_shown=host.show(NEW_UNIT, *props), old_shown=host.show(OLD_UNIT, *props),
            new_log=unit_lines(host, NEW_UNIT, began - 1), router_log=unit_lines(host, ROUTER_UNIT, began - 1),
            systemd=systemd_lines(host, began - 1, OLD_UNIT, NEW_UNIT),
            installed=host.sh(f"cat /etc/systemd/system/{NEW_UNIT}", check=True).stdout,
            audit_file=audit_entries(directory / "console"), fresh_router=fresh_router, fresh_steps=fresh_steps)

    try:
        return asyncio.run(drive())
    except Exception as exc:  # the units' own account of it: why a unit did not come up, say
        raise AssertionError(f"{exc}\n{host.account(OLD_UNIT, NEW_UNIT, ROUTER_UNIT)}") from exc
    finally:
        host.sh(f"systemctl stop {ROUTER_UNIT}", timeout_s=60)


@pytest.fixture(scope="module")
def lived(real_host: SystemdHost, tmp_path_factory: pytest.TempPathFactory) -> LivedSwap:
    require_curl(real_host, "the router's calls")
    return _swap_beside(real_host, tmp_path_factory.mktemp("beside"))


def _new_line(lived: LivedSwap, text: str) -> tuple[float, int, str]:
    return logged(lived.new_log, text, who=NEW_UNIT)  # type: ignore[return-value]


def _router(lived: LivedSwap, text: str) -> float:
    return float(logged(lived.router_log, text, who="the router")[0])


def _systemd(lived: LivedSwap, pattern: str) -> float:
    return said_by_systemd(lived.systemd, pattern)


def _new_port(lived: LivedSwap) -> int:
    args = lived.installed.split()
    return int(args[args.index("--port") + 1])


# -- the run itself ------------------------------------------------------------------------------------
def test_the_new_unit_served_beside_the_old_one_before_systemd_stopped_it(lived: LivedSwap) -> None:
    assert {k: v[0] for k, v in lived.said.items()} == {k: "done" for k in STEPS}, lived.said
    port = _new_port(lived)
    assert "\nEnvironment=CUDA_VISIBLE_DEVICES=4,5,6,7\n" in lived.installed  # drafted for the free GPUs
    assert lived.said["beside"][1].startswith(f"ready on port {port} (GPUs 4,5,6,7)"), lived.said
    assert lived.said["switch_traffic"][1].startswith(f"the router sends traffic to port {port}"), lived.said
    assert lived.said["switch_traffic"][1].endswith(f"{OLD_UNIT} stopped: downtime 0"), lived.said
    # The host's own account, in order: systemd started the new unit, its server was ready, the router
    # added it and removed the old worker, then systemd stopped the old unit.
    started = _systemd(lived, rf"Started {re.escape(NEW_UNIT)}")
    ready = _new_line(lived, "The server is fired up")[0]
    added = _router(lived, f"Added worker http://127.0.0.1:{port}")
    removed = _router(lived, "Removed worker http://127.0.0.1:")
    stopping = _systemd(lived, rf"Stopping {re.escape(OLD_UNIT)}")
    assert started < ready <= added <= removed <= stopping, (started, ready, added, removed, stopping)
    assert (lived.new_shown["ActiveState"], lived.old_shown["ActiveState"]) == ("active", "inactive")
    assert {pid for _, pid, _ in lived.new_log} == {int(lived.new_shown["MainPID"])}


# -- the report, section by section ------------------------------------------------------------------
def test_the_reports_steps_are_the_beside_path_and_say_why_the_others_did_not_run(lived: LivedSwap) -> None:
    steps = {s["key"]: s for s in lived.report["steps"]}
    for key in STEPS:
        assert (steps[key]["state"], steps[key]["detail"], steps[key]["who"]) == ("done", lived.said[key][1], WHO)
    assert steps["paths"]["detail"].startswith("beside: predicted downtime 0s"), steps["paths"]
    for key in ("stop_old", "start_new"):  # skipped with the reason, never "pending"
        assert steps[key]["state"] == "skipped" and steps[key]["detail"].startswith("beside: "), steps[key]
    ran = [s["key"] for s in lived.report["steps"] if s["state"] == "done"]
    assert ran == list(STEPS), ran
    order = [lived.steps[k] for k in STEPS]
    assert all(a.ended_at_s <= b.started_at_s for a, b in zip(order, order[1:])), order


def test_the_reports_times_hold_the_hosts_own_times(lived: LivedSwap) -> None:
    """The beside step holds systemd's start of the new unit and its server's ready line; the
    traffic step holds the router's worker changes and systemd's stop of the old unit."""
    s = lived.steps
    beside, switch = s["beside"], s["switch_traffic"]
    ready = _new_line(lived, "The server is fired up")
    # The beside step ends at the ready line as the server stamped it (whole seconds: up to 1 s before
    # journald's own time of the line).
    assert beside.started_at_s <= _systemd(lived, rf"Started {re.escape(NEW_UNIT)}") <= ready[0]
    # (journald's time of the line can be more than 1 s after that stamp on a loaded machine: 1.009 s once)
    assert _stamp(ready[2]) <= beside.ended_at_s <= ready[0] + 2.0, (beside, ready)
    assert switch.started_at_s <= _router(lived, "Added worker") <= _router(lived, "Removed worker") \
        <= _systemd(lived, rf"Stopping {re.escape(OLD_UNIT)}") <= _systemd(lived, rf"Stopped {re.escape(OLD_UNIT)}") \
        <= switch.ended_at_s
    check_step_rows(lived.report, s)


def test_the_reports_who_and_audit_are_the_start_the_router_calls_and_the_stop(lived: LivedSwap) -> None:
    r, port = lived.report, _new_port(lived)
    check_audit_is_the_file(r, lived.audit_file)
    ran = [(a["action"], a["command"]) for a in r["audit"] if a["exit_status"] == 0]
    router = f"http://127.0.0.1:{router_port_of(lived)}"
    for action, expected in (("beside", f"systemctl start -- {NEW_UNIT}"),
                             ("switch_traffic", f"'{router}/add_worker?url=http://127.0.0.1:{port}'"),
                             ("switch_traffic", f"'{router}/remove_worker?url=http://127.0.0.1:{port - 1}'"),
                             ("switch_traffic", f"systemctl stop -- {OLD_UNIT}")):
        assert any(a == action and c.endswith(expected) and c.startswith("timeout -k 5 ") for a, c in ran), (
            action, expected, ran)
    assert not any(f"systemctl stop -- {NEW_UNIT}" in c for _, c in ran)
    overridden = [g for g in r["gate"] if g["overridden_by"]]
    assert all(g["overridden_by"] == WHO for g in overridden)


def router_port_of(lived: LivedSwap) -> int:
    return _new_port(lived) + 1


def test_the_reports_downtime_is_none_and_time_to_ready_is_the_new_units_boot(lived: LivedSwap) -> None:
    t, d, switch = lived.report["timing"], lived.downtime, lived.steps["switch_traffic"]
    assert t["downtime_s"] == 0.0 and t["downtime_parts"] == [] and not t["downtime_running"], t
    assert t["downtime_from_source"] == "beside: the router moved traffic before the old server stopped", t
    # The clock's one instant: the old unit's stop, after the router removed its worker.
    # (dated by the audited stop's reply, which systemctl gives just after systemd's Stopped line, where
    # the traffic step ends)
    assert d.started_at_s == d.ended_at_s and switch.started_at_s <= d.started_at_s <= switch.ended_at_s + 1.0, d
    assert _router(lived, "Removed worker") <= d.started_at_s
    assert d.started_at_s == pytest.approx(_systemd(lived, rf"Stopping {re.escape(OLD_UNIT)}"), abs=1.0)
    # Time to ready: from systemctl start of the new unit to its ready line as the server stamped it (whole
    # seconds, so up to 1 s before journald's time of the line), or the readiness poll just after.
    ready = _new_line(lived, "The server is fired up")
    started = _systemd(lived, rf"Started {re.escape(NEW_UNIT)}")
    booted = ready[0] - started
    assert t["time_to_ready_from"] == "the new unit's start (systemctl start)", t
    assert _stamp(ready[2]) - started - 0.5 <= t["time_to_ready_s"] <= booted + 2.0, (t, booted)


def test_the_reports_old_and_new_and_diff_are_the_two_units(lived: LivedSwap) -> None:
    r, port = lived.report, _new_port(lived)
    on = r["old_new"]
    assert (on["old_unit"], on["new_unit"], on["kind"]) == (OLD_UNIT, NEW_UNIT, "unit")
    assert (on["old_model"], on["new_model"]) == ("qwen3.5-397b", "qwen3.5-122b")
    assert (on["old_model_dir"], on["model_dir"]) == (OLD_DIR, NEW_DIR)
    changes = {c["flag"]: c for c in r["diff"]["changes"]}
    assert (changes["--model-path"]["old"], changes["--model-path"]["new"]) == (OLD_DIR, NEW_DIR)
    assert (changes["--port"]["old"], changes["--port"]["new"]) == (str(port - 1), str(port))  # the installed file's
    assert changes["--quantization"]["change"] == "removed"
    env = {e["name"]: e for e in r["diff"]["env_changes"]}
    assert env.get("CUDA_VISIBLE_DEVICES", {}).get("new") == "4,5,6,7", r["diff"]["env_changes"]


def test_the_reports_gpu_memory_moved_from_the_old_units_gpus_to_the_new_ones(lived: LivedSwap) -> None:
    g = lived.report["gpu"]
    held = {x["gpu"]: x for x in g["before"] if x["used_mib"]}
    after = {x["gpu"]: x for x in g["after"] if x["used_mib"]}
    assert sorted(held) == [0, 1, 2, 3] and sorted(after) == [4, 5, 6, 7], g
    assert {p.split()[0] for x in held.values() for p in x["processes"]} == {str(lived.old_pid)}
    assert {p.split()[0] for x in after.values() for p in x["processes"]} == {lived.new_shown["MainPID"]}
    freed = {f["gpu"]: f["mib"] for f in g["freed"]}
    assert freed == {i: x["used_mib"] for i, x in held.items()} and g["freed_by"] == "the swap", g
    assert g["after_what"] == "after the old server stopped (traffic on the new one)", g
    assert log_time(g["after_at"]) >= int(_systemd(lived, rf"Stopped {re.escape(OLD_UNIT)}")), g


def test_the_reports_boot_timeline_is_the_new_units_boot_in_the_journal(lived: LivedSwap) -> None:
    boot = lived.report["boot"]
    assert boot[0]["phase"] == "launch" and boot[-1]["phase"] == "ready", boot
    launch, ready = _new_line(lived, "server_args="), _new_line(lived, "The server is fired up")
    assert (log_time(boot[0]["stamp"]), log_time(boot[-1]["stamp"])) == (_stamp(launch[2]), _stamp(ready[2])), boot
    # its seconds: journald's times of the two lines (the host's, not the server's whole-second stamps)
    assert boot[-1]["seconds"] == pytest.approx(ready[0] - launch[0], abs=0.01)
    assert boot[-1]["at_s"] == pytest.approx(ready[0], abs=1e-3) and boot[-1]["clock"] == "journald", boot
    loaded = [b for b in boot if b["phase"] == "weights loaded"]
    assert loaded and log_time(loaded[0]["stamp"]) == _stamp(_new_line(lived, "Load weight end")[2])
    assert lived.report["boot_note"] is None


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_the_report_renders_every_section(lived: LivedSwap, fmt: str) -> None:
    check_renders_every_section(lived.report, fmt, "beside", shows=(NEW_UNIT, OLD_UNIT))


def test_a_console_started_after_the_switch_reads_the_routers_moves_from_its_journal(lived: LivedSwap) -> None:
    """The router runs as a unit: its record is journald's (router_log journal:UNIT). A console started
    after the switch reads the add and the remove there, at the router's own time (its whole-second
    stamps, within the second journald gave the line), and shows the new server's start and the switch done."""
    r = lived.fresh_router
    assert r.log == f"journal:{ROUTER_UNIT}" and r.log_error is None, r
    port = _new_port(lived)
    added = _router(lived, f"Added worker http://127.0.0.1:{port}")
    removed = _router(lived, "Removed worker http://127.0.0.1:")
    moves = {(m.verb, m.url): m.at_s for m in r.moves}
    assert int(added) - 1 <= moves[("added", f"http://127.0.0.1:{port}")] <= added, (moves, added)
    assert int(removed) - 1 <= moves[("removed", f"http://127.0.0.1:{port - 1}")] <= removed, (moves, removed)
    switch, beside = lived.fresh_steps["switch_traffic"], lived.fresh_steps.get("beside")
    assert switch.state == "done" and beside is not None and beside.state == "done", (switch, beside)
    assert beside.ended_at_s is not None and beside.ended_at_s <= switch.ended_at_s, (beside, switch)
