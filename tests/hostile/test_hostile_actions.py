"""Every swap action's script, executed by a real shell with stub tools, fed hostile values in each
parameter: nothing but the intended commands runs (issue 21, item 2).

The stubs (systemctl, systemd-run, hf, setsid, nohup, timeout) log their argv and do
nothing else; a payload that ran leaves a marker file behind. A value an action refuses
(`ActionError`) runs nothing, which is also a pass.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from console.domain.swap import actions as a
from tests.kit.figures import record

HOSTILE = [
    "$(touch {M})", "`touch {M}`", '"; touch {M}; echo "', "'; touch {M}; echo '", "$(touch${{IFS}}{M})",
    ";touch {M}", "|touch {M}", "&& touch {M}", "x\ntouch {M}", "x\rtouch {M}", "-rf", "--help", "--version",
    "ünï©ødé-$(touch {M})", "*", "$HOME", "${{PATH}}", "\\$(touch {M})", "a b\tc", "\u202etouch {M}",
    "%s%n", "!!", "~root", "{{a,b}}", "#", "x;$(touch {M})#",
]

STUB = """#!/bin/sh
# argv, unit-separated, one record per call: the test reads back exactly what each tool got
printf '%s\\037' "$(basename "$0")" "$@" >> "$STUB_LOG"; printf '\\036' >> "$STUB_LOG"
{tail}
"""


WRAPPERS = ("timeout", "setsid", "nohup")


def _stubs(tmp: Path, *, systemd_run: str, active: bool) -> Path:
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    tails = {
        "systemctl": f"exit {0 if active else 3}",
        "hf": "exit 0",
        "setsid": '"$@"',  # runs its command (the stub hf), as setsid does
        "nohup": '"$@"',
        "timeout": 'shift 3; "$@"',  # timeout -k 5 N argv...
    }
    if systemd_run != "absent":
        tails["systemd-run"] = "exit 0" if systemd_run == "ok" else "exit 1"
    for name, tail in tails.items():
        path = bin_dir / name
        path.write_text(STUB.format(tail=tail))
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return bin_dir


def _wait_gone(pid_file: Path) -> None:
    """The detached download (the stub hf under setsid nohup) has logged and ended."""
    import time

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            pid = int(pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return
        try:
            os.kill(pid, 0)
        except OSError:
            return
        time.sleep(0.05)


def _run(script: str, tmp: Path, bin_dir: Path, pid_file: Path | None = None) -> list[list[str]]:
    log = tmp / "calls.jsonl"
    log.unlink(missing_ok=True)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "STUB_LOG": str(log), "HOME": str(tmp), "IFS": " \t\n"}
    subprocess.run(["/bin/sh", "-c", script], env=env, cwd=tmp, capture_output=True, timeout=30)
    if pid_file is not None:
        _wait_gone(pid_file)
    if not log.exists():
        return []
    calls = [record.split("\x1f")[:-1] for record in log.read_text().split("\x1e") if record]
    # the wrappers pass their command on (logged by its own stub): what ran is the inner command
    return [c for c in calls if c[0] not in WRAPPERS]


def _values(marker: Path) -> list[str]:
    return [v.format(M=marker) for v in HOSTILE]


def _only(calls: list[list[str]], allowed: list[list[str]]) -> None:
    for call in calls:
        assert call in allowed, (call, allowed)


@pytest.mark.parametrize("systemd_run", ["absent", "fails", "ok"])
def test_the_download_action_runs_nothing_but_hf_whatever_the_model_dir(tmp_path: Path, systemd_run: str) -> None:
    marker = tmp_path / "PWNED"
    bin_dir = _stubs(tmp_path, systemd_run=systemd_run, active=False)
    tried = 0
    for value in _values(marker):
        model_dir = f"{tmp_path}/models/{value}"
        try:
            action = a.download("Qwen/Qwen3-0.6B", model_dir)
        except a.ActionError:
            continue
        tried += 1
        calls = _run(action.commands[0].script, tmp_path, bin_dir,
                     Path(f"{model_dir}/.cache/gpuconsole/download.pid"))
        hf = ["hf", "download", "--local-dir", model_dir, "--", "Qwen/Qwen3-0.6B"]
        unit = a.download_unit_name(model_dir)
        log = f"{model_dir}/.cache/gpuconsole/download.log"
        allowed = [hf, ["systemctl", "is-active", "--quiet", "--", unit],
                   ["systemd-run", f"--unit={unit}", "--collect", "--quiet",
                    f"--property=StandardOutput=append:{log}", f"--property=StandardError=append:{log}",
                    "--", str(bin_dir / "hf"), *hf[1:]]]
        _only(calls, allowed)
        assert any(c[0] in ("hf", "systemd-run") for c in calls), (value, calls)
        assert not marker.exists(), f"payload ran: {value!r}"
    record(f"hostile model dirs, download action (systemd-run {systemd_run})", tried=tried, payloads=0)
    assert tried >= len(HOSTILE) // 2


@pytest.mark.parametrize("active", [True, False])
def test_stop_download_and_the_running_check_run_nothing_else(tmp_path: Path, active: bool) -> None:
    marker = tmp_path / "PWNED"
    bin_dir = _stubs(tmp_path, systemd_run="absent", active=active)
    for value in _values(marker):
        model_dir = f"{tmp_path}/models/{value}"
        try:
            scripts = [a.stop_download(model_dir).commands[0].script, a.download_running_check(model_dir)]
        except a.ActionError:
            continue
        unit = a.download_unit_name(model_dir)
        # a pid file naming a process group that is not there: kill finds nothing, runs nothing
        work = Path(f"{model_dir}/.cache/gpuconsole")
        work.mkdir(parents=True, exist_ok=True)
        (work / "download.pid").write_text("$(touch " + str(marker) + ")\n")
        for script in scripts:
            calls = _run(script, tmp_path, bin_dir)
            _only(calls, [["systemctl", "is-active", "--quiet", "--", unit], ["systemctl", "stop", "--", unit]])
            assert not marker.exists(), f"payload ran: {value!r}"


def test_unit_actions_refuse_or_quote_every_hostile_unit_and_stamp(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    bin_dir = _stubs(tmp_path, systemd_run="absent", active=True)
    good = "sglang-new.service"
    for value in _values(marker) + [v + ".service" for v in _values(marker)] + ["-x.service", "--a.service"]:
        builders = [lambda v=value: a.stop_service(v), lambda v=value: a.start_service(v),
                    lambda v=value: a.rollback(v, good), lambda v=value: a.rollback(good, v)]
        for build in builders:
            try:
                action = build()
            except a.ActionError:
                continue
            for command in action.commands:
                calls = _run(command.script, tmp_path, bin_dir)
                assert len(calls) == 1 and calls[0][0] == "systemctl" and calls[0][-2] == "--", calls
                assert calls[0][-1] in (value, good)
        try:
            check = a.unit_state_check(value)
        except a.ActionError:
            check = None
        if check is not None:
            calls = _run(check, tmp_path, bin_dir)
            assert calls == [["systemctl", "show", "--no-pager", "-p", "ActiveState,SubState,MainPID", "--", value]]
        for stamp in (value, "2026-01-01T00:00:00Z"):
            try:
                action = a.install_unit(good, "[Service]\n", stamp)
            except a.ActionError:
                continue
            assert stamp == "2026-01-01T00:00:00Z"
        assert not marker.exists(), f"payload ran: {value!r}"


def test_install_unit_with_a_hostile_units_dir_moves_the_file_and_runs_only_daemon_reload(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    bin_dir = _stubs(tmp_path, systemd_run="absent", active=True)
    for value in _values(marker):
        units_dir = f"{tmp_path}/units/{value}"
        try:
            action = a.install_unit("sglang-new.service", "[Service]\n", "20260101T000000Z", units_dir)
        except a.ActionError:
            continue
        assert action.write is not None
        Path(units_dir).mkdir(parents=True, exist_ok=True)
        Path(action.write.temp_path).write_text(action.write.text)
        calls = _run(action.commands[0].script, tmp_path, bin_dir)
        assert calls == [["systemctl", "daemon-reload"]], (value, calls)
        assert Path(action.write.path).read_text() == "[Service]\n"
        assert not marker.exists(), f"payload ran: {value!r}"


def test_the_stubs_do_catch_a_payload(tmp_path: Path) -> None:
    """The harness itself: an unquoted value does run (so a pass above means something)."""
    marker = tmp_path / "PWNED"
    bin_dir = _stubs(tmp_path, systemd_run="absent", active=False)
    _run(f'echo "x {tmp_path}/$(touch {marker})"', tmp_path, bin_dir)
    assert marker.exists()
    os.unlink(marker)


# -- every swap path x every unit/container name it hands to a command ----------------------------
HOSTILE_NAMES = {"unit": ("-H evil.service", "x.service; touch /tmp/pwned", "$(id).service"),
                 "container": ("-v/:/h", "x; touch /tmp/pwned", "$(id)")}
# (backend, path) -> {action: which names it puts in a command}
NAMES_USED = {
    ("unit", "restart"): {"install": "new", "stop_old": "old", "start_new": "new", "rollback": "old new"},
    ("unit", "in-place"): {"rollback": "old"},
    ("unit", "beside"): {"beside": "new", "switch_traffic": "old", "rollback": "new"},
    ("container", "restart"): {"stop_old": "old", "start_new": "new", "rollback": "old new"},
    ("container", "in-place"): {"rollback": "old"},
    ("container", "beside"): {"beside": "new", "switch_traffic": "old", "rollback": "new"},
}


def _controller(backend: str, path: str, old: str, new: str) -> object:
    from types import SimpleNamespace

    from console.core.state import HostState
    from console.domain.swap import paths as P
    from console.domain.swap.controller import SwapController
    from console.core.derive.swap_view import SwapStep, SwapStepChanged

    names = ({"compare_unit": old, "unit": new} if backend == "unit" else
             {"compare_unit": "old.service", "unit": "new.service", "compare_container": old, "container": new})
    profile = SimpleNamespace(require_approval=False, read_only=False, model_dir="/m/new", repo_id="o/new",
                              server_port=30000, swap_path=None, router_url="http://127.0.0.1:30080",
                              forbidden_prefixes=(), verify_sha=False, units_dir="/etc/systemd/system", **names)
    state = HostState("h")
    state.apply(SwapStepChanged("h", SwapStep("install", "Install", state="done",
                                              detail="kept /etc/systemd/system/new.service.bak-20261201T150405Z")))
    runner = SimpleNamespace(state=state, host="h", session=SimpleNamespace(profile=profile), repoll=lambda s: None)
    ctl = SwapController(runner, who="ana")
    ctl.audit_file = None
    options = (P.PathOption("in-place", path == "in-place", 10.0, "same"),
               P.PathOption("beside", path == "beside", 0.0, "fits", gpus=(4, 5, 6, 7), port=30001),
               P.PathOption("restart", True, 100.0, "stop, then start"))
    ctl.fast.plan = P.PathPlan(options, path)
    return ctl


@pytest.mark.parametrize(("backend", "path"), list(NAMES_USED))
def test_a_hostile_unit_or_container_name_is_refused_on_every_path_before_any_command(backend: str,
                                                                                      path: str) -> None:
    """Whichever path the swap takes, on units or containers, a profile's old or new name that is
    not a name is refused with that name in the message: the operator sees why, nothing runs."""
    from console.domain.swap.actions import ActionError

    what = "not a unit name" if backend == "unit" else "not a container name"
    for key, used in NAMES_USED[backend, path].items():
        for side in used.split():
            for bad in HOSTILE_NAMES[backend]:
                good = "new.service" if backend == "unit" else "sglang-new"
                old, new = (bad, good) if side == "old" else (good.replace("new", "old"), bad)
                ctl = _controller(backend, path, old, new)
                with pytest.raises(ActionError) as refused:
                    ctl.build(key)  # type: ignore[attr-defined]
                assert str(refused.value) == f"{what}: {bad!r}", (key, side, bad)
