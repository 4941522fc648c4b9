"""The in-place swap through the console's own controller on the real systemd 252 (PID 1 in a
container, over its sshd): the 122B unit serves; the new checkpoint is its fine-tune (same
config.json); plan the paths (in place chosen), install the drafted unit (the new --model-path), the
gate, then POST /update_weights_from_disk to the running server (the simulated SGLang answers it as
SGLang does, through the host's curl). The module runs that swap once (its fixture); its report is
then read section by section against what the host recorded itself: the unit's own journal lines
(the update's begin and end), systemd's lines and `systemctl show` (no stop, no start: the same
process throughout), the unit file on the host, and the audit file."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from console.config import HostProfile
from tests.real.console_on_host import (
    WHO, Console, LivedSwapFacts, audit_entries, check_audit_is_the_file, check_in_place_gpu_memory, check_renders_every_section, check_step_rows,
    console_on, console_profile, logged, ready_reading)
from tests.real.systemd_host import NEW_UNIT, SystemdHost, require_curl, systemd_lines, unit_lines, unit_text

pytestmark = [pytest.mark.real_systemd, pytest.mark.timeout(480)]

UNIT = NEW_UNIT  # one unit: the old weights and the new are served by it
OLD_DIR, NEW_DIR = "/shared/models/Qwen3.5-122B-A10B", "/shared/models/Qwen3.5-122B-A10B-ft"
STEPS = ("paths", "install", "preflight", "in_place")


def profile(host: SystemdHost, directory: Path) -> HostProfile:
    draft = directory / UNIT
    draft.parent.mkdir(parents=True, exist_ok=True)
    draft.write_text(unit_text(UNIT, host.server_port).replace(f"--model-path {OLD_DIR} ", f"--model-path {NEW_DIR} ")
                     .replace("--served-model-name qwen3.5-122b ", "--served-model-name qwen3.5-122b-ft "))
    return console_profile("real-systemd", host.ssh_options(), unit=UNIT, compare_unit=UNIT,
                           server_port=host.server_port, unit_draft=str(draft), model_dir=NEW_DIR)


def model_dirs(host: SystemdHost) -> None:
    """Both checkpoints on the host: the same config.json (same architecture), a sparse shard each."""
    from console.demo.hostsim.downloader import qwen122b_config

    for d in (OLD_DIR, NEW_DIR):
        host.sh(f"mkdir -p {d} && truncate -s 64M {d}/model-00001-of-00001.safetensors", check=True)
        host.put(f"{d}/config.json", json.dumps(qwen122b_config(), indent=2))


@dataclass
class LivedSwap(LivedSwapFacts):
    pid_before: int
    shown_before: dict[str, str]
    shown_after: dict[str, str]
    log: list[tuple[float, int, str]]
    systemd: list[tuple[float, str]]
    installed: str
    draft: str


def _swap_in_place(host: SystemdHost, directory: Path) -> LivedSwap:
    async def drive() -> LivedSwap:
        host.reset_units()
        model_dirs(host)
        host.sh(f"systemctl start {UNIT}", check=True)
        host.wait(lambda: host.sh("python3 -c \"import urllib.request as u; "
                                  f"u.urlopen('http://127.0.0.1:{host.server_port}/health', timeout=2)\"")
                  .returncode == 0, 120, "the server healthy")
        props = ("MainPID", "ExecMainStartTimestamp", "NRestarts", "ActiveState")
        shown_before = host.show(UNIT, *props)
        prof = profile(host, directory)
        said: dict[str, tuple[str, str]] = {}
        async with console_on(prof, directory / "console", label="real-systemd") as console:
            await _serving(console)
            began = time.time()
            for key in STEPS:
                if key == "preflight":
                    # the gate as the operator reads it once the console has read the unit it installed
                    # (its diff is the install's change; before that reading it is unknown)
                    await console.until(lambda: bool(console.state.swap.install_diff()), 60,
                                        "the install's change read")
                    for check in console.swap.evaluate_gate():  # no GPUs here (the stand-in): overridden by name
                        if not check.passes:
                            assert console.swap.override(check.name, check.name, WHO) is None
                said[key] = await console.run_step(key)
                assert said[key][0] == "done", (key, said[key])
            # the GPU reading after the update (the report's "after")
            seen = time.time()
            await console.until(lambda: (g := console.state.reading("gpu")) is not None and g.ok_at_s is not None
                                and g.ok_at_s > seen, 30, "a GPU reading after the update")
            report = console.report()
            steps = dict(console.state.swap.steps)
            downtime = console.state.swap.downtime
        return LivedSwap(
            report=report, steps=steps, said=said, downtime=downtime, began_s=began,
            pid_before=int(shown_before["MainPID"]), shown_before=shown_before, shown_after=host.show(UNIT, *props),
            log=unit_lines(host, UNIT, began - 60), systemd=systemd_lines(host, began - 1, UNIT),
            installed=host.sh(f"cat /etc/systemd/system/{UNIT}", check=True).stdout, draft=prof.unit_draft and
            Path(prof.unit_draft).read_text() or "",
            audit_file=audit_entries(directory / "console"))

    return asyncio.run(drive())


async def _serving(console: Console) -> None:
    await console.until(lambda: ready_reading(console, UNIT), 90, "the server read as ready")
    await console.until(lambda: (g := console.state.data("gpu")) is not None
                        and sum(x.memory_used_mib or 0 for x in g.gpus) > 0, 60, "the server's GPU memory")


@pytest.fixture(scope="module")
def lived(real_host: SystemdHost, tmp_path_factory: pytest.TempPathFactory) -> LivedSwap:
    require_curl(real_host, "the in-place update")
    return _swap_in_place(real_host, tmp_path_factory.mktemp("in-place"))


def _logged(lived: LivedSwap, text: str) -> tuple[float, int, str]:
    return logged(lived.log, text, since_s=lived.began_s - 1, last=True, who="the unit")  # type: ignore[return-value]


def _first_logged(lived: LivedSwap, text: str) -> tuple[float, int, str]:
    """The first of the update's lines with `text` (every TP rank writes one)."""
    return logged(lived.log, text, since_s=lived.began_s - 1, who="the unit")  # type: ignore[return-value]


# -- the run itself ------------------------------------------------------------------------------------
def test_the_update_ran_in_the_running_server_systemd_never_stopped_or_started_it(lived: LivedSwap) -> None:
    assert {k: v[0] for k, v in lived.said.items()} == {k: "done" for k in STEPS}, lived.said
    assert lived.said["in_place"][1].startswith("weights updated in place: "), lived.said
    assert lived.said["in_place"][1].endswith("Succeeded to update model weights."), lived.said
    # systemd's own account: the same process throughout, never restarted, no stop or start line.
    b, a = lived.shown_before, lived.shown_after
    assert (a["MainPID"], a["ExecMainStartTimestamp"], a["NRestarts"], a["ActiveState"]) == (
        b["MainPID"], b["ExecMainStartTimestamp"], "0", "active"), (b, a)
    assert not [m for _, m in lived.systemd if m.startswith(("Stopping", "Stopped", "Starting", "Started"))], \
        lived.systemd
    # The server's own lines: the update's begin and end, from the unit's one process.
    assert _logged(lived, "Update engine weights online from disk begin")[1] == lived.pid_before
    assert _logged(lived, "Update weights end.")[1] == lived.pid_before
    assert lived.installed == lived.draft  # the drafted unit in place (its next start serves the new weights)


# -- the report, section by section ------------------------------------------------------------------
def test_the_reports_steps_are_the_in_place_path_and_say_why_the_others_did_not_run(lived: LivedSwap) -> None:
    steps = {s["key"]: s for s in lived.report["steps"]}
    for key in STEPS:
        assert (steps[key]["state"], steps[key]["detail"], steps[key]["who"]) == ("done", lived.said[key][1], WHO)
    assert steps["paths"]["detail"].startswith("in-place: predicted downtime"), steps["paths"]
    for key in ("stop_old", "start_new"):  # skipped with the reason, never "pending"
        assert steps[key]["state"] == "skipped" and steps[key]["detail"].startswith("in place: "), steps[key]
    assert steps["verify"]["state"] == "skipped" and steps["benchmark"]["state"] == "pending"
    ran = [s["key"] for s in lived.report["steps"] if s["state"] == "done"]
    assert ran == list(STEPS), ran
    order = [lived.steps[k] for k in STEPS]
    # one step after the other (a time the observer took from the server's line is journald's time of it)
    assert all(a.ended_at_s <= b.started_at_s + 0.01 for a, b in zip(order, order[1:])), [
        (s.key, s.started_at_s, s.ended_at_s) for s in order]


def test_the_reports_times_hold_the_servers_own_lines(lived: LivedSwap) -> None:
    """The in-place step holds the update's lines in the journal; its end is journald's time of the last
    "Update weights end." line (the host's time of it, not the server's whole-second stamp)."""
    step = lived.steps["in_place"]
    began = _first_logged(lived, "Update engine weights online from disk begin")[0]
    ended = _logged(lived, "Update weights end.")
    assert step.started_at_s <= began <= ended[0], (step, began, ended)
    assert step.ended_at_s == pytest.approx(ended[0], abs=1e-6), (step, ended)
    check_step_rows(lived.report, lived.steps)


def test_the_reports_who_and_audit_are_the_update_posted_to_the_running_server(lived: LivedSwap) -> None:
    r = lived.report
    check_audit_is_the_file(r, lived.audit_file)
    assert r["approvals"] == []
    (update,) = [a for a in r["audit"] if a["action"] == "in_place"]
    assert update["exit_status"] == 0 and update["command"].startswith("timeout -k 5 ")
    assert "curl " in update["command"] and f"127.0.0.1:{_port(lived)}/update_weights_from_disk" in update["command"]
    assert f'"model_path": "{NEW_DIR}"' in update["command"]
    said = " ".join(a["command"] for a in r["audit"])
    assert "systemctl stop" not in said and "systemctl start" not in said and "systemctl restart" not in said
    overridden = [g for g in r["gate"] if g["overridden_by"]]
    assert all(g["overridden_by"] == WHO for g in overridden)
    assert {a["command"] for a in r["audit"] if a["note"] == "gate override"} == {
        f"override gate check {g['check']}" for g in overridden}


def _port(lived: LivedSwap) -> int:
    args = lived.installed.split()
    return int(args[args.index("--port") + 1])


def test_the_reports_downtime_is_the_pause_the_journal_says(lived: LivedSwap) -> None:
    """The pause from the update's begin line to its end line (the server's own stamps, whole
    seconds), in one part; time to ready is the same pause (no server booted)."""
    t, d = lived.report["timing"], lived.downtime
    began = _first_logged(lived, "Update engine weights online from disk begin")
    ended = _logged(lived, "Update weights end.")
    # journald's times of the update's first begin line and its last end line, not their whole-second stamps
    assert d.started_at_s == pytest.approx(began[0], abs=1e-6), (d, began)
    assert d.ended_at_s == pytest.approx(ended[0], abs=1e-6), (d, ended)
    assert not t["downtime_running"] and t["downtime_s"] == pytest.approx(d.ended_at_s - d.started_at_s, abs=0.01)
    assert [p["part"] for p in t["downtime_parts"]] == ["in-place pause (requests held while the weights load)"]
    assert sum(p["seconds"] for p in t["downtime_parts"]) == pytest.approx(t["downtime_s"], abs=0.05)
    assert t["time_to_ready_from"] == "the update's begin (the server's log)", t
    assert t["time_to_ready_s"] == pytest.approx(d.ended_at_s - d.started_at_s, abs=0.01), t


def test_the_reports_old_and_new_are_the_one_unit_and_its_two_checkpoints(lived: LivedSwap) -> None:
    on = lived.report["old_new"]
    assert (on["old_unit"], on["new_unit"], on["kind"]) == (UNIT, UNIT, "unit")
    assert (on["old_model"], on["new_model"]) == ("qwen3.5-122b", "qwen3.5-122b-ft")
    assert (on["old_model_dir"], on["model_dir"]) == (OLD_DIR, NEW_DIR)


def test_the_reports_diff_is_the_drafted_change_of_the_unit(lived: LivedSwap) -> None:
    changes = {c["flag"]: c for c in lived.report["diff"]["changes"]}
    assert (changes["--model-path"]["old"], changes["--model-path"]["new"]) == (OLD_DIR, NEW_DIR), changes
    assert changes["--served-model-name"]["new"] == "qwen3.5-122b-ft", changes


def test_the_reports_gpu_memory_is_the_one_process_throughout(lived: LivedSwap) -> None:
    # the unit's CUDA_VISIBLE_DEVICES; systemd's MainPID before and after
    check_in_place_gpu_memory(lived.report, [0, 1, 2, 3], lived.pid_before)


def test_the_reports_boot_timeline_is_the_update_in_the_journal(lived: LivedSwap) -> None:
    r = lived.report
    rows = {b["phase"]: b for b in r["boot"]}
    assert list(rows) == ["update begin", "update end"], r["boot"]
    began = _first_logged(lived, "Update engine weights online from disk begin")[0]
    ended = _logged(lived, "Update weights end.")[0]
    # each row at the host's time of its line (the server stamps whole seconds)
    assert rows["update begin"]["at_s"] == pytest.approx(began, abs=0.01), rows
    assert rows["update end"]["at_s"] == pytest.approx(ended, abs=0.01), rows
    assert {row["clock"] for row in rows.values()} == {"journald"}, rows
    assert rows["update end"]["seconds"] == pytest.approx(ended - began, abs=0.01)
    assert r["boot_note"].startswith("in place: no server booted"), r["boot_note"]
    launch = [x for x in lived.log if "server_args=" in x[2]]
    assert launch and launch[-1][0] < lived.began_s  # the only boot in the journal is from before the swap
    assert launch[-1][2][1:20] in r["boot_note"], r["boot_note"]


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_the_report_renders_every_section(lived: LivedSwap, fmt: str) -> None:
    check_renders_every_section(lived.report, fmt, "in-place", shows=("in-place pause", UNIT))
