"""The simulated host's `docker` CLI (issue 26): `ps`, `inspect`, `logs`, `start`, `stop`, as the
real CLI prints them, over containers kept in the sandbox.

A container is `$GPUSIM_ROOT/.sim/containers/NAME.json` (its `docker inspect` object, the layout of
tests/data/docker/inspect_qwen397b.json) and `NAME.log` (its output, one `RFC3339NANO-TIMESTAMP line`
per line, as `docker logs --timestamps` prints it). `$GPUSIM_ROOT/.sim/docker-down` makes the daemon
unreachable. Messages are the real CLI's (docker 24-27): "Error: No such object: NAME" after an
empty `[]` for `inspect`, "Error response from daemon: No such container: NAME" for the others,
and the daemon-down line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

DAEMON_DOWN = ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
               "Is the docker daemon running?")


def _dir() -> Path:
    return Path(os.environ["GPUSIM_ROOT"]) / ".sim" / "containers"


def _load(name: str) -> dict[str, Any] | None:
    name = name.lstrip("/")
    if not name or "/" in name or name.startswith("."):
        return None
    path = _dir() / f"{name}.json"
    if path.is_file():
        loaded: dict[str, Any] = json.loads(path.read_text())
        return loaded
    for other in _dir().glob("*.json") if _dir().is_dir() else ():
        obj = json.loads(other.read_text())
        if str(obj.get("Id", "")).startswith(name) and len(name) >= 4:
            return obj  # type: ignore[no-any-return]
    return None


def _save(obj: dict[str, Any]) -> None:
    name = str(obj["Name"]).lstrip("/")
    tmp = _dir() / f".{name}.json.tmp"
    tmp.write_text(json.dumps(obj, indent=4))
    tmp.replace(_dir() / f"{name}.json")


def add_container(root: Path, inspect: dict[str, Any], log_lines: list[str] = ()) -> None:  # type: ignore[assignment]
    """For scenarios and tests: put a container on the simulated host."""
    d = root / ".sim" / "containers"
    d.mkdir(parents=True, exist_ok=True)
    name = str(inspect["Name"]).lstrip("/")
    (d / f"{name}.json").write_text(json.dumps(inspect, indent=4))
    with (d / f"{name}.log").open("a") as f:
        for line in log_lines:
            f.write(f"{_now()} {line}\n")


def append_log(root: Path, name: str, line: str) -> None:
    with (root / ".sim" / "containers" / f"{name}.log").open("a") as f:
        f.write(f"{_now()} {line}\n")


def _now() -> str:
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond * 1000:09d}Z"


def _ps(args: list[str]) -> int:
    show_all = "-a" in args or "--all" in args
    rows = []
    d = _dir()
    for path in sorted(d.glob("*.json")) if d.is_dir() else ():
        obj = json.loads(path.read_text())
        state = obj.get("State", {})
        if not show_all and not state.get("Running"):
            continue
        argv = [obj.get("Path", "")] + list(obj.get("Args") or [])
        command = " ".join(a for a in argv if a)
        if "--no-trunc" not in args and len(command) > 20:
            command = command[:19] + "…"
        status = ("Up 3 days" if state.get("Running") else
                  f"Restarting ({state.get('ExitCode', 0)}) 5 seconds ago" if state.get("Restarting") else
                  f"Exited ({state.get('ExitCode', 0)}) 2 minutes ago")
        ports = ", ".join(f"{(b.get('HostIp') or '0.0.0.0')}:{b.get('HostPort')}->{p}"
                          for p, bs in (obj.get("HostConfig", {}).get("PortBindings") or {}).items() for b in bs or [])
        rows.append({"Command": json.dumps(command), "CreatedAt": "2026-11-28 07:41:12 +0000 UTC",
                     "ID": obj.get("Id", "") if "--no-trunc" in args else obj.get("Id", "")[:12],
                     "Image": obj.get("Config", {}).get("Image", ""), "Labels": "", "LocalVolumes": "0",
                     "Mounts": ",".join(m.get("Source", "") for m in obj.get("Mounts") or []),
                     "Names": str(obj.get("Name", "")).lstrip("/"), "Networks": "bridge", "Ports": ports,
                     "RunningFor": "3 days ago", "Size": "0B", "State": state.get("Status", ""), "Status": status})
    fmt = args[args.index("--format") + 1] if "--format" in args and args.index("--format") + 1 < len(args) else None
    if fmt == "{{json .}}":
        for row in rows:
            print(json.dumps(row, separators=(",", ":")))
    else:
        print("CONTAINER ID   IMAGE   COMMAND   CREATED   STATUS   PORTS   NAMES")
        for row in rows:
            print(f"{row['ID'][:12]}   {row['Image']}   {row['Command']}   3 days ago   {row['Status']}   "
                  f"{row['Ports']}   {row['Names']}")
    return 0


def _names(args: list[str], inspect: bool = False) -> list[str]:
    out, skip = [], False
    rest = args[args.index("--") + 1:] if "--" in args else None
    if rest is not None:
        return rest
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("--type", "--format", "--since", "--tail", "-n", "--until", "--time") or (a == "-f" and inspect):
            skip = True
            continue
        if a.startswith("-"):
            continue
        out.append(a)
    return out


def _template(fmt: str, obj: dict[str, Any]) -> str:
    """The one Go-template form the console uses: `{{.Path.To.Field}}` (Go prints bools as true/false)."""
    import re

    def field(m: re.Match[str]) -> str:
        value: Any = obj
        for part in m.group(1).split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, bool):
            return "true" if value else "false"
        return "<no value>" if value is None else value if isinstance(value, str) else json.dumps(value)

    return re.sub(r"\{\{\s*\.([A-Za-z0-9_.]+)\s*\}\}", field, fmt)


def _inspect(args: list[str]) -> int:
    found, missing = [], []
    for name in _names(args, inspect=True):
        obj = _load(name)
        (found if obj is not None else missing).append(obj if obj is not None else name)
    fmt = _value(args, "--format", "-f")
    if fmt is not None:
        for obj in found:
            print(_template(fmt, obj))
    else:
        print(json.dumps(found, indent=4))
    for name in missing:
        print(f"Error: No such object: {name}", file=sys.stderr)
    return 1 if missing else 0


def _value(args: list[str], *flags: str) -> str | None:
    for flag in flags:
        if flag in args and args.index(flag) + 1 < len(args):
            return args[args.index(flag) + 1]
        for a in args:
            if a.startswith(flag + "="):
                return a.split("=", 1)[1]
    return None


def _logs(args: list[str]) -> int:
    names = _names([a for a in args if a not in ("-f", "--follow", "-t", "--timestamps")])
    if len(names) != 1:
        print('"docker logs" requires exactly 1 argument.', file=sys.stderr)
        return 1
    obj = _load(names[0])
    if obj is None:
        print(f"Error response from daemon: No such container: {names[0]}", file=sys.stderr)
        return 1
    path = _dir() / f"{str(obj['Name']).lstrip('/')}.log"
    follow = "-f" in args or "--follow" in args
    stamps = "-t" in args or "--timestamps" in args
    since = _value(args, "--since")
    tail = _value(args, "--tail", "-n")

    def emit(line: str) -> None:
        ts, _, text = line.partition(" ")
        if since and ts <= since:
            return
        # SGLang writes its log to stderr; `docker logs` replays each stream on its own.
        sys.stderr.write(f"{ts} {text}\n" if stamps else f"{text}\n")
        sys.stderr.flush()

    lines = path.read_text().splitlines() if path.exists() else []
    if tail is not None and tail != "all" and tail.isdigit():
        lines = lines[-int(tail):] if int(tail) else []
    for line in lines:
        emit(line)
    if not follow:
        return 0
    offset = path.stat().st_size if path.exists() else 0
    while True:
        time.sleep(0.2)
        current = _load(names[0])
        stopped = current is None or not current.get("State", {}).get("Running")
        if not path.exists():
            if stopped:
                return 0
            continue
        size = path.stat().st_size
        if size > offset:
            with path.open() as f:
                f.seek(offset)
                chunk = f.read()
            offset = size
            for line in chunk.splitlines():
                emit(line)
        if stopped:
            return 0  # as Docker's: following a container's log ends when it stops, after its last lines


def _start_stop(cmd: str, args: list[str]) -> int:
    from console.hostsim import docker_drive

    status = 0
    for name in _names(args):
        obj = _load(name)
        if obj is None:
            print(f"Error response from daemon: No such container: {name}", file=sys.stderr)
            status = 1
            continue
        unit = docker_drive.mapped(str(obj.get("Name", name)))
        if unit is not None:  # --demo-scenario docker-drive: the container is a simulated service
            from console.hostsim.tools import scenario_time

            grace = _value(args, "--time", "-t")
            status = docker_drive.start_stop(cmd, str(obj["Name"]).lstrip("/"), unit,
                                             float(grace) if grace and grace.isdigit() else 10.0,
                                             scenario_time()) or status
            continue
        state = obj.setdefault("State", {})
        if cmd == "start":
            state.update(Status="running", Running=True, Restarting=False, ExitCode=0, Pid=state.get("Pid") or 4242)
        else:
            state.update(Status="exited", Running=False, Restarting=False, ExitCode=0, Pid=0)
        _save(obj)
        print(name)
    return status


def _images() -> set[str]:
    """The images on the simulated host: every container's, and those pulled (.sim/images.json)."""
    d = _dir()
    have = {str(json.loads(p.read_text()).get("Config", {}).get("Image", "")) for p in d.glob("*.json")} \
        if d.is_dir() else set()
    try:
        have |= set(json.loads((_dir().parent / "images.json").read_text()))
    except (OSError, ValueError):
        pass
    return {i for i in have if i}


def _image_inspect(args: list[str]) -> int:
    names = _names(args, inspect=True)
    fmt = _value(args, "--format", "-f")
    found = [n for n in names if n in _images()]
    for n in found:
        ident = "sha256:" + (n.encode().hex() * 4)[:64]
        print(ident if fmt is not None else json.dumps([{"Id": ident, "RepoTags": [n]}], indent=4))
    if fmt is None and not found:
        print("[]")
    missing = [n for n in names if n not in found]
    for n in missing:
        print(f"Error response from daemon: No such image: {n}", file=sys.stderr)
    return 1 if missing or not names else 0


def _pull(args: list[str]) -> int:
    """`docker pull REF`: the simulated registry has lmsysorg/sglang's tags, nothing else."""
    names = _names(args)
    if len(names) != 1:
        print('"docker pull" requires exactly 1 argument.', file=sys.stderr)
        return 1
    ref = names[0]
    repo, _, tag = ref.partition(":")
    if repo not in ("lmsysorg/sglang", "docker.io/lmsysorg/sglang"):
        print(f"Error response from daemon: pull access denied for {repo}, repository does not exist or may "
              "require 'docker login': denied: requested access to the resource is denied", file=sys.stderr)
        return 1
    tag = tag or "latest"
    print(f"{tag}: Pulling from lmsysorg/sglang")
    print("Digest: sha256:" + (ref.encode().hex() * 4)[:64])
    print(f"Status: Downloaded newer image for lmsysorg/sglang:{tag}")
    print(f"docker.io/lmsysorg/sglang:{tag}")
    path = _dir().parent / "images.json"
    try:
        pulled = list(json.loads(path.read_text()))
    except (OSError, ValueError):
        pulled = []
    path.write_text(json.dumps(sorted({*pulled, ref})))
    return 0


def main(args: list[str]) -> int:
    if (Path(os.environ["GPUSIM_ROOT"]) / ".sim" / "docker-down").exists():
        print(DAEMON_DOWN, file=sys.stderr)
        return 1
    if not args:
        print("Usage:  docker [OPTIONS] COMMAND", file=sys.stderr)
        return 1
    cmd, rest = args[0], args[1:]
    if cmd == "container" and rest:
        cmd, rest = rest[0], rest[1:]
        if cmd == "ls":
            cmd = "ps"
    if cmd == "ps":
        return _ps(rest)
    if cmd == "inspect":
        return _inspect(rest)
    if cmd == "logs":
        return _logs(rest)
    if cmd in ("start", "stop"):
        return _start_stop(cmd, rest)
    if cmd == "image" and rest[:1] == ["inspect"]:
        return _image_inspect(rest[1:])
    if cmd == "pull":
        return _pull(rest)
    if cmd == "compose":
        from console.hostsim import docker_drive

        return docker_drive.compose(rest)
    print(f"docker: '{cmd}' is not a docker command.", file=sys.stderr)
    return 1
