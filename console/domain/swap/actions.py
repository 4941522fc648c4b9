"""The swap's actions as data: each lists the exact shell commands it will run on the host, so the
confirmation dialog shows what runs, the audit log records it, and a test can read it.

Every value reaching a shell is `shlex.quote`d and cannot be read as an option (it follows `--`,
or is an absolute path checked here). Every command is wrapped in `timeout -k 5 N`, which kills
it on the host too; the transport waits a little longer than that. The one process that outlives
its command on purpose is the detached download (its launcher is bounded; `hf` itself runs until
done, as a transient systemd unit or a `setsid nohup` session with its own log and pid file).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from console.host.transport.base import quote
from console.host.transport.bounded import BoundError
from console.host.transport.bounded import bounded as bound_on_host

UNIT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9@._:\\-]*\.service$")
REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
SAFE_PATH_RE = re.compile(r"^/[^\x00\n\r]*$")
UNITS_DIR = "/etc/systemd/system"


class ActionError(ValueError):
    """A value an action cannot put in a command (one line, for the operator)."""


def check_unit(name: str | None) -> str:
    if not name or not UNIT_RE.match(name):
        raise ActionError(f"not a unit name: {name!r}")
    return name


def check_path(path: str | None, what: str = "path") -> str:
    if not path or not SAFE_PATH_RE.match(path) or "/../" in path + "/":
        raise ActionError(f"{what} must be an absolute path: {path!r}")
    return path


def check_repo(repo: str | None) -> str:
    if not repo or not REPO_RE.match(repo):
        raise ActionError(f"not a Hugging Face repo id: {repo!r}")
    return repo


def bounded(argv: list[str], seconds: float) -> str:
    """`timeout -k 5 N argv...`: the host kills it after N s (and SIGKILLs it 5 s later); built by
    console/host/transport/bounded.py, its refusal an ActionError the operator reads."""
    try:
        return bound_on_host(argv, seconds)
    except BoundError as exc:
        raise ActionError(str(exc)) from exc


@dataclass(frozen=True, slots=True)
class RemoteCommand:
    script: str  # exactly what the host's shell runs
    timeout_s: float  # how long the transport waits (the script's own timeouts end sooner)
    purpose: str


@dataclass(frozen=True, slots=True)
class FileWrite:
    """A file written through SFTP to `temp_path`, then renamed over `path` by a command."""

    path: str
    temp_path: str
    text: str


@dataclass(frozen=True, slots=True)
class Action:
    key: str
    title: str
    commands: tuple[RemoteCommand, ...]
    waits_for: str = ""  # what the step then follows in the state ("GPU memory drained", ...)
    write: FileWrite | None = None
    needs_approval: bool = False  # under the two-person rule

    def display(self) -> list[str]:
        """The lines the confirmation dialog shows, in the order they happen."""
        lines: list[str] = []
        if self.write is not None:
            lines.append(f"sftp put {self.write.temp_path}  ({len(self.write.text.encode())} bytes)")
        lines += [c.script for c in self.commands]
        if self.waits_for:
            lines.append(f"then wait: {self.waits_for}")
        return lines


def download_unit_name(model_dir: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", model_dir.lower()).strip("-")[-60:] or "model"
    return f"gpuconsole-download-{slug}.service"


def _download_files(model_dir: str) -> tuple[str, str, str]:
    work = f"{model_dir.rstrip('/')}/.cache/gpuconsole"
    return work, f"{work}/download.log", f"{work}/download.pid"


def download(repo: str, model_dir: str) -> Action:
    """Start (or resume: hf continues its .incomplete files) `hf download` detached from this
    connection: a transient systemd unit where systemd runs, else `setsid nohup` with a log file."""
    repo, model_dir = check_repo(repo), check_path(model_dir, "model directory")
    unit = download_unit_name(model_dir)
    work, log, pid = _download_files(model_dir)
    hf_args = ["download", "--local-dir", model_dir, "--", repo]
    q = quote
    script = "\n".join([
        f"if {bounded(['systemctl', 'is-active', '--quiet', '--', unit], 10)} 2>/dev/null; then "
        f"echo {q('already running as ' + unit)}; exit 0; fi",
        f"if [ -f {q(pid)} ] && kill -0 \"$(cat {q(pid)})\" 2>/dev/null; then "
        f"echo \"already running: pid $(cat {q(pid)})\"; exit 0; fi",
        'HF="$(command -v hf)" || { echo "hf is not on the host\'s PATH (pip install -U huggingface_hub)" >&2; '
        "exit 127; }",
        f"mkdir -p -- {q(work)}",
        # "$HF" is the host's own path of hf, expanded there: it follows the bounded, quoted words.
        "if command -v systemd-run >/dev/null 2>&1 && "
        + bounded(["systemd-run", f"--unit={unit}", "--collect", "--quiet",
                   f"--property=StandardOutput=append:{log}", f"--property=StandardError=append:{log}", "--"], 30)
        + f" \"$HF\" {shlex.join(hf_args)}; then echo {q('started as ' + unit)}; exit 0; fi",
        f"setsid nohup \"$HF\" {shlex.join(hf_args)} >>{q(log)} 2>&1 </dev/null &",
        # The log path holds the model dir: quoted like every other value (it was echoed raw inside
        # double quotes, and `$(…)` in a model dir ran; issue 21, item 2).
        f"echo $! > {q(pid)}; echo \"started: pid $!, log \"{q(log)}",
    ])
    return Action("download", "Start or resume the model download",
                  (RemoteCommand(script, 45, f"hf download {repo} into {model_dir}, detached"),),
                  waits_for="the download pane says complete")


def stop_download(model_dir: str) -> Action:
    model_dir = check_path(model_dir, "model directory")
    unit = download_unit_name(model_dir)
    _, _, pid = _download_files(model_dir)
    q = quote
    script = "\n".join([
        f"if {bounded(['systemctl', 'is-active', '--quiet', '--', unit], 10)} 2>/dev/null; then "
        f"{bounded(['systemctl', 'stop', '--', unit], 30)}; exit $?; fi",
        f"if [ -f {q(pid)} ] && kill -0 \"$(cat {q(pid)})\" 2>/dev/null; then "
        f"kill -TERM -- \"-$(cat {q(pid)})\" && rm -f -- {q(pid)} && echo stopped; exit $?; fi",
        "echo 'no download running'",
    ])
    return Action("stop_download", "Stop the model download", (RemoteCommand(script, 45, "stop hf download"),))


def download_running_check(model_dir: str) -> str:
    """Prints `running` or `stopped` (for the download step, and to re-read it after a drop)."""
    unit = download_unit_name(check_path(model_dir, "model directory"))
    _, _, pid = _download_files(model_dir)
    return (f"if {bounded(['systemctl', 'is-active', '--quiet', '--', unit], 10)} 2>/dev/null || "
            f"{{ [ -f {quote(pid)} ] && kill -0 \"$(cat {quote(pid)})\" 2>/dev/null; }}; "
            "then echo running; else echo stopped; fi")


def install_unit(unit: str, text: str, stamp: str, units_dir: str = UNITS_DIR) -> Action:
    """SFTP the new unit to a temp name, keep the previous file as `.bak-<stamp>`, rename the new one
    over it (atomic: a failed write leaves the old file), `systemctl daemon-reload`."""
    unit = check_unit(unit)
    units_dir = check_path(units_dir, "units directory").rstrip("/")
    if not re.match(r"^[0-9TZ-]+$", stamp):
        raise ActionError(f"not a time stamp: {stamp!r}")
    final = f"{units_dir}/{unit}"
    temp = f"{units_dir}/.{unit}.gpuconsole-new"
    backup = f"{final}.bak-{stamp}"
    q = quote
    script = "\n".join([
        f"[ -s {q(temp)} ] || {{ echo {q('the new unit was not written: ' + temp)} >&2; exit 1; }}",
        f"if [ -e {q(final)} ]; then cp -p -- {q(final)} {q(backup)} || exit 1; echo {q('kept ' + backup)}; fi",
        f"mv -f -- {q(temp)} {q(final)} || exit 1",
        bounded(["systemctl", "daemon-reload"], 60),
    ])
    return Action("install", f"Install {unit}", (RemoteCommand(script, 75, f"install {final}, daemon-reload"),),
                  write=FileWrite(final, temp, text))


def stop_service(unit: str, *, key: str = "stop_old", approval: bool = False) -> Action:
    unit = check_unit(unit)
    return Action(key, f"Stop {unit}", (RemoteCommand(bounded(["systemctl", "stop", "--", unit], 120), 130,
                                                      f"stop {unit}"),),
                  waits_for="its GPU memory drained", needs_approval=approval)


def start_service(unit: str, *, key: str = "start_new", approval: bool = False) -> Action:
    unit = check_unit(unit)
    return Action(key, f"Start {unit}", (RemoteCommand(bounded(["systemctl", "start", "--", unit], 90), 100,
                                                       f"start {unit}"),),
                  waits_for="the server is ready (boot followed in the log)", needs_approval=approval)


def rollback(new_unit: str, old_unit: str, *, approval: bool = False) -> Action:
    new_unit, old_unit = check_unit(new_unit), check_unit(old_unit)
    return Action("rollback", f"Roll back to {old_unit}", (
        RemoteCommand(bounded(["systemctl", "stop", "--", new_unit], 120), 130, f"stop {new_unit}"),
        RemoteCommand(bounded(["systemctl", "start", "--", old_unit], 90), 100, f"start {old_unit}"),
    ), waits_for=f"GPU memory drained, then {old_unit} ready", needs_approval=approval)


def unit_state_check(unit: str) -> str:
    """ActiveState, SubState and MainPID of a unit (KEY=value lines), to re-read a step's outcome."""
    return bounded(["systemctl", "show", "--no-pager", "-p", "ActiveState,SubState,MainPID", "--",
                    check_unit(unit)], 15)


def parse_unit_state(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def benchmark(label: str) -> Action:
    return Action("benchmark", "Benchmark the new model", (), waits_for=f"the benchmark: {label}")
