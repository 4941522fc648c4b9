"""The console's unit reads and swap steps against a real systemd 252 (PID 1 in a container, over
SSH): the service diff of the real seed units, honest status through warm-up with a stand-in
nvidia-smi that follows the real processes, a Type=simple start that returns 0 for a missing binary,
a crash-looping unit that is never `failed`, the rollback step naming it, and systemctl's own
answers (show's order, a missing unit, cat's drop-ins) with the simulator's fake printing the same."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from console.domain.swap import unit_steps
from console.domain.swap.controller import StepFailed
from console.host.sources.log import LogFollower
from console.host.sources.server import ServerWatcher
from console.host.sources.service import ServiceWatcher
from tests.real.systemd_host import NEW_UNIT, OLD_UNIT, SystemdHost, capture, connected, record

pytestmark = pytest.mark.real_systemd


@pytest.fixture
def host(real_host: SystemdHost) -> SystemdHost:
    real_host.reset_units()
    return real_host


def crash_looping(host: SystemdHost, unit: str, **env: str) -> None:
    """The unit's server dies at once (the simulated SGLang's OOM at start), Restart=on-failure
    two seconds later (the seed unit's own Restart= kept)."""
    extra = "".join(f'Environment="{k}={v}"\n' for k, v in env.items())
    host.put(f"/etc/systemd/system/{unit}.d/60-crash.conf", f"[Service]\nRestartSec=2s\n{extra}")
    host.sh("systemctl daemon-reload", check=True)


async def watch_until(watcher: ServerWatcher, pred: Any, timeout_s: float, what: str) -> list[Any]:
    seen: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        s = await watcher.poll()
        seen.append(s)
        if pred(s):
            return seen
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}: {[(s.status, s.reason) for s in seen[-5:]]}")


async def test_the_service_diff_reads_both_real_units_with_their_drop_ins(host: SystemdHost) -> None:
    host.sh(f"systemctl start {OLD_UNIT}", check=True)
    async with connected(host) as transport:
        report = await ServiceWatcher(transport, NEW_UNIT, OLD_UNIT).poll()
    assert report.errors == (), report.errors
    assert report.old is not None and report.old.unit is not None and report.new.unit is not None
    assert report.new.unit.dropins == (f"/etc/systemd/system/{NEW_UNIT}.d/50-gpusim.conf",)
    assert report.old.active_state == "active" and report.new.active_state == "inactive"
    assert report.old.running is not None  # the argv of the process systemd runs
    changed = {c.flag for c in report.changes}
    assert {"--model-path", "--served-model-name"} <= changed, changed
    assert set(report.units_on_host) >= {NEW_UNIT, OLD_UNIT}


async def test_status_is_honest_through_warm_up_and_the_stand_in_gpus_follow_the_real_process(
        host: SystemdHost) -> None:
    assert host.sh("nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits",
                   check=True).stdout.split("\n")[0] == "0, 0"
    host.sh(f"systemctl start {NEW_UNIT}", check=True)
    async with connected(host) as transport:
        follower = LogFollower(transport, units=(NEW_UNIT,))
        watcher = ServerWatcher(transport, NEW_UNIT, host.server_port, follower.tracker)
        task = asyncio.ensure_future(_drain(follower))
        try:
            seen = await watch_until(watcher, lambda s: s.status == "ready", 90, "ready")
        finally:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
    statuses = [s.status for s in seen]
    assert statuses[-1] == "ready" and set(statuses) <= {"starting", "unknown", "ready"}, statuses
    # Ready only once a generation answered, never from the unit being "active"; the boot phases
    # came from the real journal on the way.
    assert seen[-1].http.health_ok is True and seen[-1].reason.startswith("serving"), seen[-1].reason
    assert any(s.status == "starting" and s.phase for s in seen), [(s.status, s.phase) for s in seen]
    used = host.sh("nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits").stdout.splitlines()
    assert [int(line.split(", ")[1]) > 0 for line in used] == [True] * 4 + [False] * 4  # CUDA_VISIBLE_DEVICES=0,1,2,3
    host.sh(f"systemctl stop {NEW_UNIT}", check=True)
    host.wait(lambda: host.sh("nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits")
              .stdout.split("\n")[0] == "0, 0", 30, "GPU 0 freed after the stop")


async def _drain(follower: LogFollower) -> None:
    async for _ in follower.batches():
        pass


async def test_a_missing_execstart_binary_starts_with_rc_0_and_the_status_names_203_exec(host: SystemdHost) -> None:
    text = host.sh(f"cat /etc/systemd/system/{NEW_UNIT}", check=True).stdout
    host.put(f"/etc/systemd/system/{NEW_UNIT}", text.replace("/opt/sglang/.venv/bin/python", "/opt/missing/bin/python"))
    host.sh("systemctl daemon-reload", check=True)
    start = capture(host, f"systemctl start {NEW_UNIT}")
    assert start["rc"] == 0 and start["stderr"] == ""  # Type=simple: "Job for … failed" never comes
    host.wait(lambda: host.show(NEW_UNIT, "ExecMainStatus").get("ExecMainStatus") == "203", 30, "203/EXEC")
    show = capture(host, f"systemctl show -p ActiveState,SubState,MainPID,NRestarts,Result,ExecMainStatus {NEW_UNIT}")
    record(host, "systemd_missing_binary.json", [start, show])
    async with connected(host) as transport:
        status = await ServerWatcher(transport, NEW_UNIT, host.server_port, None).poll()
    assert status.status == "dead", (status.status, status.reason)
    assert "203/EXEC" in status.reason and "missing" in status.reason


async def test_a_crash_looping_unit_is_never_failed_and_is_called_dead_with_its_restart_count(
        host: SystemdHost) -> None:
    crash_looping(host, NEW_UNIT, GPUSIM_OOM="1")
    host.sh(f"systemctl start {NEW_UNIT}", check=True)
    host.wait(lambda: int(host.show(NEW_UNIT, "NRestarts").get("NRestarts") or 0) >= 2
              and host.show(NEW_UNIT, "SubState").get("SubState") == "auto-restart", 90, "two restarts")
    show = capture(host, f"systemctl show -p ActiveState,SubState,MainPID,NRestarts,Result {NEW_UNIT}")
    active = capture(host, f"systemctl is-active {NEW_UNIT}")
    assert "SubState=auto-restart" in str(show["stdout"]), show
    record(host, "systemd_crash_loop.json", [show, active])
    assert (active["rc"], str(active["stdout"]).strip()) == (3, "activating")
    async with connected(host) as transport:
        watcher = ServerWatcher(transport, NEW_UNIT, host.server_port, None)
        seen = await watch_until(watcher, lambda s: "auto-restart" in s.reason, 60, "the auto-restart state")
    assert seen[-1].status == "dead" and re.search(r"restart \d+", seen[-1].reason), seen[-1].reason
    assert all(s.unit_state != "failed" for s in seen)  # systemd never says failed: the console says why


async def test_the_rollback_names_a_crash_looping_old_unit_instead_of_waiting_for_ready(host: SystemdHost) -> None:
    crash_looping(host, OLD_UNIT, GPUSIM_OOM="1")
    host.sh(f"systemctl start {OLD_UNIT}", check=True)
    details: list[str] = []
    async with connected(host) as transport:
        ctl = SimpleNamespace(
            session=SimpleNamespace(transport=transport),
            profile=SimpleNamespace(server_port=host.server_port, ready_timeout_s=90.0),
            poll_s=0.2, _clock=time.time, _set=lambda key, **kw: details.append(kw.get("detail", "")))
        with pytest.raises(StepFailed) as failed:
            await unit_steps.old_ready(ctl, OLD_UNIT)  # type: ignore[arg-type]
    said = str(failed.value)
    assert "not ready within" not in said  # named at once, not after waiting out ready_timeout_s
    # Seen between two restarts (auto-restart) or just after one (NRestarts grew): named either way.
    assert re.search(r"(activating \(auto-restart\)|active \(running\))(, restart \d+.*)? — it will take the GPUs "
                     r"back", said), said


async def test_systemctl_answers_as_systemd_252_and_the_simulators_fake_prints_the_same(
        host: SystemdHost, tmp_path: Path) -> None:
    host.sh("mkdir -p /etc/systemd/system/sglang-test-only.service.d && "
            "printf '[Service]\\nUser=x\\n' > /etc/systemd/system/sglang-test-only.service.d/a.conf && "
            "systemctl daemon-reload")
    commands = [
        "systemctl show --no-pager -p SubState,ActiveState,Id,LoadState -- sglang-never-was.service",
        f"systemctl show --no-pager -p MainPID,SubState,ActiveState -- {NEW_UNIT}",
        f"systemctl cat --no-pager -- {NEW_UNIT}",
        "systemctl cat --no-pager -- sglang-never-was.service",
        "systemctl cat --no-pager -- sglang-test-only.service",
        "systemctl stop -- sglang-never-was.service",
        f"systemctl is-active -- {NEW_UNIT}",
    ]
    real = [capture(host, c) for c in commands]
    record(host, "systemd_systemctl.json", real)
    # The real facts the console relies on.
    assert real[0]["stdout"] == "Id=sglang-never-was.service\nLoadState=not-found\nActiveState=inactive\n" \
                                "SubState=dead\n" and real[0]["rc"] == 0
    assert (real[3]["rc"], real[3]["stderr"]) == (1, "No files found for sglang-never-was.service.\n")
    assert (real[4]["rc"], real[4]["stderr"]) == (1, "No files found for sglang-test-only.service.\n")
    assert "Unit sglang-never-was.service not loaded." in str(real[5]["stderr"])
    fake = _fake_outputs(host, tmp_path, commands)
    for r, f in zip(real, fake, strict=True):
        assert _norm(f) == _norm(r), r["command"]


def _norm(run: dict[str, object]) -> tuple[object, str, str]:
    """Only ids and times differ between two hosts: the sandbox root, PIDs."""
    def n(text: object) -> str:
        out = re.sub(r"^(MainPID)=\d+$", r"\1=N", str(text), flags=re.M)
        return out.replace("/SIM", "")
    return run["rc"], n(run["stdout"]), n(run["stderr"])


def _fake_outputs(host: SystemdHost, tmp_path: Path, commands: list[str]) -> list[dict[str, object]]:
    """The same commands on the simulator's sandbox (the fake systemctl), its units written as the
    real host's are."""
    import io
    import json
    import os
    import shlex
    from contextlib import redirect_stderr, redirect_stdout

    from console.demo.hostsim import tools

    root = tmp_path / "SIM"
    unit_dir = root / "etc/systemd/system"
    for name in (NEW_UNIT, OLD_UNIT):
        (unit_dir / f"{name}.d").mkdir(parents=True, exist_ok=True)
        (unit_dir / name).write_text(host.sh(f"cat /etc/systemd/system/{name}", check=True).stdout)
        (unit_dir / f"{name}.d/50-gpusim.conf").write_text(
            host.sh(f"cat /etc/systemd/system/{name}.d/50-gpusim.conf", check=True).stdout)
    (unit_dir / "sglang-test-only.service.d").mkdir(parents=True, exist_ok=True)
    (unit_dir / "sglang-test-only.service.d/a.conf").write_text("[Service]\nUser=x\n")
    (root / ".sim").mkdir(parents=True, exist_ok=True)
    (root / ".sim/units.json").write_text(json.dumps({}))
    (root / ".sim/state.json").write_text(json.dumps({"start_s": time.time(), "speed": 1.0}))
    old = os.environ.get("GPUSIM_ROOT")
    os.environ["GPUSIM_ROOT"] = str(root)
    outs = []
    try:
        for command in commands:
            argv = shlex.split(command)
            out, err = io.StringIO(), io.StringIO()
            with redirect_stdout(out), redirect_stderr(err):
                rc = tools._systemctl(argv[1:])
            outs.append({"command": command, "rc": rc, "stdout": out.getvalue().replace(str(root), "/SIM"),
                         "stderr": err.getvalue().replace(str(root), "/SIM")})
    finally:
        if old is None:
            os.environ.pop("GPUSIM_ROOT", None)
        else:
            os.environ["GPUSIM_ROOT"] = old
    return outs


async def test_a_unit_file_with_a_syntax_error_loads_and_the_service_pane_says_so_in_one_line(
        host: SystemdHost) -> None:
    """systemd ignores a line without '=' ("Missing '='") and an unknown key, logs a warning at
    daemon-reload, and loads the unit; the console's diff says it in one line and works on."""
    text = host.sh(f"cat /etc/systemd/system/{NEW_UNIT}", check=True).stdout
    broken = text.replace("LimitNOFILE=65536", "LimitNOFILE=65536\nthis line has no equals sign\nRestartSecs=5")
    host.put(f"/etc/systemd/system/{NEW_UNIT}", broken)
    reload = capture(host, "systemctl daemon-reload")
    show = capture(host, f"systemctl show -p LoadState,ActiveState -- {NEW_UNIT}")
    said = capture(host, f"journalctl -u {NEW_UNIT} -o cat --no-pager")
    assert reload["rc"] == 0 and "LoadState=loaded" in str(show["stdout"])  # it still loads
    # systemd 252's words, in the unit's own journal (PID 1's lines carry UNIT=)
    assert f"{NEW_UNIT}:27: Missing '=', ignoring line." in str(said["stdout"]), said
    assert "Unknown key 'RestartSecs' in section [Service], ignoring." in str(said["stdout"]), said
    record(host, "systemd_syntax_error.json", [reload, show, said])
    async with connected(host) as transport:
        report = await ServiceWatcher(transport, NEW_UNIT, OLD_UNIT).poll()
    assert report.errors == () and report.new.error is None  # the rest keeps working
    assert {"--model-path", "--served-model-name"} <= {c.flag for c in report.changes}
    bad = [lint for lint in report.lints if "no equals sign" in lint.message]
    assert len(bad) == 1 and "\n" not in bad[0].message, report.lints
    assert bad[0].severity == "warning" and "not a key=value line" in bad[0].message
    assert bad[0].message.startswith(f"/etc/systemd/system/{NEW_UNIT}:27: "), bad[0].message  # the line systemd names
    # the key systemd does not know, read from PID 1's own lines about the unit (`_PID=1 UNIT=…`)
    ignored = [lint for lint in report.lints if "RestartSecs" in lint.message]
    assert [x.message for x in ignored] == [f"/etc/systemd/system/{NEW_UNIT}:28: systemd ignores RestartSecs=: its "
                                           "journal says it does not know that key in [Service]"], report.lints
