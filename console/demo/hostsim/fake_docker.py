"""The simulated host's `docker` CLI (issue 26): `ps` (the table, `{{json .}}`, templates, filters),
`inspect`, `logs`, `start`, `stop`, `restart`, `image inspect`, `pull` and `compose` (create/up/ps/
start/stop with Compose's names and labels), as the real CLI prints them, over containers kept in
the sandbox. The layouts come from Docker's documentation and source (tests/data/PROVENANCE.md); no
real Docker was captured.

A container is `$GPUSIM_ROOT/.sim/containers/NAME.json` (its `docker inspect` object, the layout of
tests/data/docker/inspect_qwen397b.json) and `NAME.log` (its output, one `RFC3339NANO-TIMESTAMP line`
per line, as `docker logs --timestamps` prints it). `$GPUSIM_ROOT/.sim/docker-down` makes the daemon
unreachable. Messages are the real CLI's (docker 24-27): "Error: No such object: NAME" after an
empty `[]` for `inspect`, "Error response from daemon: No such container: NAME" for the others,
and the daemon-down line.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from console.demo.hostsim import drive
from console.demo.hostsim.simstate import scenario_time

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


ZERO_TIME = "0001-01-01T00:00:00Z"  # Go's zero time.Time, as `docker inspect` prints a time never set


def docker_state_time(ns: int | None) -> str:
    """A time as `docker inspect` prints State.StartedAt/FinishedAt: Go's time.RFC3339Nano in UTC,
    the fraction's trailing zeros dropped ("2026-12-03T17:09:15.1234Z", "2026-12-03T17:09:15Z");
    Docker's zero time when never set."""
    if ns is None:
        return ZERO_TIME
    whole, frac = divmod(ns, 1_000_000_000)
    head = datetime.fromtimestamp(whole, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    digits = f"{frac:09d}".rstrip("0")
    return f"{head}.{digits}Z" if digits else f"{head}Z"


def _state_time() -> str:
    return docker_state_time(time.time_ns())


def _ellipsis(text: str, width: int) -> str:
    """docker/cli's stringutils.Ellipsis: cut to `width` runes, the last one "…"."""
    return text if len(text) <= width else text[:width - 1] + "…"


def _go_quote(text: str) -> str:
    """Go's strconv.Quote, for the printable text a command is: quotes and backslashes escaped."""
    return json.dumps(text, ensure_ascii=False)


def go_json(obj: Any) -> str:
    """Go's json.Marshal, as `{{json .}}` prints: compact, non-ASCII kept, and <, >, & escaped as
    \\u003c, \\u003e, \\u0026 (its HTML-safe default: "0.0.0.0:30000-\\u003e30000/tcp")."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    labels = obj.get("Config", {}).get("Labels") or {}
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


def _row(obj: dict[str, Any], trunc: bool) -> dict[str, str]:
    """One container as `docker ps` formats it (docker/cli cli/command/formatter/container.go)."""
    state = obj.get("State", {})
    argv = [obj.get("Path", "")] + list(obj.get("Args") or [])
    command = " ".join(a for a in argv if a)
    status = ("Restarting ({}) 5 seconds ago".format(state.get("ExitCode", 0)) if state.get("Restarting") else
              "Up 3 days" if state.get("Running") else
              "Created" if state.get("Status") == "created" else
              f"Exited ({state.get('ExitCode', 0)}) 2 minutes ago")
    ports = ", ".join(f"{(b.get('HostIp') or '0.0.0.0')}:{b.get('HostPort')}->{p}"
                      for p, bs in sorted((obj.get("HostConfig", {}).get("PortBindings") or {}).items())
                      for b in bs or [])
    labels = ",".join(f"{k}={v}" for k, v in sorted(_labels(obj).items()))
    return {"Command": _go_quote(_ellipsis(command, 20) if trunc else command),
            "CreatedAt": "2026-11-28 07:41:12 +0000 UTC",
            "ID": obj.get("Id", "")[:12] if trunc else obj.get("Id", ""),
            "Image": obj.get("Config", {}).get("Image", ""), "Labels": labels, "LocalVolumes": "0",
            "Mounts": ",".join(_ellipsis(m.get("Source") or m.get("Name") or "", 15) if trunc
                               else (m.get("Source") or m.get("Name") or "") for m in obj.get("Mounts") or []),
            "Names": str(obj.get("Name", "")).lstrip("/"),
            "Networks": str(obj.get("HostConfig", {}).get("NetworkMode") or "bridge"), "Ports": ports,
            "RunningFor": "3 days ago", "Size": "0B", "State": str(state.get("Status", "")), "Status": status}


def table(header: list[str], rows: list[list[str]]) -> str:
    """Go's text/tabwriter as the Docker CLI sets it up (minwidth 10, tabwidth 1, padding 3, spaces;
    cli/command/formatter/formatter.go): each column but the last as wide as its widest cell plus 3,
    at least 10; the last column unpadded."""
    lines = [header, *rows]
    widths = [max(10, max(len(r[i]) for r in lines) + 3) for i in range(len(header) - 1)]
    return "\n".join("".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + r[-1] for r in lines)


def _filters(args: list[str]) -> list[tuple[str, str]]:
    out = []
    for i, a in enumerate(args):
        value = args[i + 1] if a in ("--filter", "-f") and i + 1 < len(args) else \
            a.split("=", 1)[1] if a.startswith("--filter=") else None
        if value is not None:
            key, _, rest = value.partition("=")
            out.append((key, rest))
    return out


def _matches(obj: dict[str, Any], filters: list[tuple[str, str]]) -> bool:
    labels = _labels(obj)
    for key, value in filters:
        if key == "label":
            k, sep, v = value.partition("=")
            if k not in labels or (sep and labels[k] != v):
                return False
        elif (key == "name" and value not in str(obj.get("Name", ""))) or \
                (key == "status" and obj.get("State", {}).get("Status") != value):
            return False
    return True


def _containers() -> list[dict[str, Any]]:
    d = _dir()
    return [json.loads(p.read_text()) for p in sorted(d.glob("*.json"))] if d.is_dir() else []


def _ps(args: list[str]) -> int:
    show_all = "-a" in args or "--all" in args
    trunc = "--no-trunc" not in args
    filters = _filters(args)
    objs = [o for o in _containers() if (show_all or o.get("State", {}).get("Running")) and _matches(o, filters)]
    # Docker lists the newest first; here, by name (the fake's containers share one creation time)
    rows = [_row(o, trunc) for o in objs]
    fmt = _value(args, "--format")
    if "-q" in args or "--quiet" in args:
        for row in rows:
            print(row["ID"])
    elif fmt == "{{json .}}" or fmt == "json":
        for row in rows:
            print(go_json(row))
    elif fmt is not None and not fmt.startswith("table"):
        for row in rows:
            print(_template(fmt.replace("\\t", "\t"), row))
    else:
        print(table(["CONTAINER ID", "IMAGE", "COMMAND", "CREATED", "STATUS", "PORTS", "NAMES"],
                    [[r["ID"], r["Image"], r["Command"], r["RunningFor"], r["Status"], r["Ports"], r["Names"]]
                     for r in rows]))
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
        if a in ("--type", "--format", "--since", "--tail", "-n", "--until", "--time", "--timeout", "-t") or \
                (a == "-f" and inspect):
            skip = True
            continue
        if a.startswith("-"):
            continue
        out.append(a)
    return out


def _template(fmt: str, obj: dict[str, Any]) -> str:
    """The one Go-template form the console uses: `{{.Path.To.Field}}` (Go prints bools as true/false)."""
    def field(m: re.Match[str]) -> str:
        value: Any = obj
        for part in m.group(1).split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, bool):
            return "true" if value else "false"
        return "<no value>" if value is None else value if isinstance(value, str) else json.dumps(value)

    def as_json(m: re.Match[str]) -> str:
        value: Any = obj
        for part in m.group(1).split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return go_json(value)

    fmt = re.sub(r"\{\{\s*json\s+\.([A-Za-z0-9_.]+)\s*\}\}", as_json, fmt)
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
        if missing:
            print()  # the real CLI prints an empty line before the error
    else:
        print(json.dumps(found, indent=4))
    typed = _value(args, "--type") == "container"
    for name in missing:
        # CLI 28 (the PATH's); CLI 20.10 says "Error: No such container: NAME" (tests/data/real/)
        print(f"Error response from daemon: No such container: {name}" if typed else f"Error: No such object: {name}",
              file=sys.stderr)
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


def _start_stop(cmd: str, args: list[str], *, quiet: bool = False) -> int:
    status = 0
    if "--time" in args or any(a.startswith("--time=") for a in args):
        print("Flag --time has been deprecated, use --timeout instead")  # CLI 28, on stdout
    failed = []
    for name in _names(args):
        obj = _load(name)
        if obj is None:
            print(f"Error response from daemon: No such container: {name}", file=sys.stderr)
            status = 1
            failed.append(name)
            continue
        unit = drive_mapped(str(obj.get("Name", name)))
        if unit is not None:  # --demo-scenario docker-drive: the container is a simulated service
            grace = _value(args, "--time", "--timeout", "-t")
            status = drive_start_stop(cmd, str(obj["Name"]).lstrip("/"), unit,
                                      float(grace) if grace and grace.isdigit() else 10.0,
                                      scenario_time()) or status
            continue
        state = obj.setdefault("State", {})
        # Docker's own times: StartedAt at each start, FinishedAt at each exit (kept while a later start runs)
        if cmd == "start":
            if not state.get("Running"):
                state["StartedAt"] = _state_time()
            state.update(Status="running", Running=True, Restarting=False, ExitCode=0, Pid=state.get("Pid") or 4242)
        else:
            if state.get("Running"):
                state["FinishedAt"] = _state_time()
            state.update(Status="exited", Running=False, Restarting=False, ExitCode=0, Pid=0)
        _save(obj)
        if not quiet:
            print(name)
    if failed and cmd == "start":
        print(f"Error: failed to start containers: {', '.join(failed)}", file=sys.stderr)
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
    if cmd == "restart":  # Docker: stop (SIGTERM, SIGKILL after --time), then start; prints the name
        names = _names(rest)
        status = _start_stop("stop", [*rest], quiet=True)
        return status or _start_stop("start", ["--", *names])
    if cmd == "image" and rest[:1] == ["inspect"]:
        return _image_inspect(rest[1:])
    if cmd == "pull":
        return _pull(rest)
    if cmd == "compose":
        return compose(rest)
    print(f"docker: '{cmd}' is not a docker command.", file=sys.stderr)
    return 1


# -- docker compose (v2, the CLI plugin) ------------------------------------------------------------
COMPOSE_USAGE = "Usage:  docker compose [OPTIONS] COMMAND"


def _compose_opts(args: list[str]) -> tuple[list[str], str | None, list[str]]:
    files, project, i = [], None, 0
    while i < len(args) and args[i].startswith("-"):
        a = args[i]
        if a in ("-f", "--file", "-p", "--project-name") and i + 1 < len(args):
            (files.append(args[i + 1]) if a in ("-f", "--file") else None)
            project = args[i + 1] if a in ("-p", "--project-name") else project
            i += 2
            continue
        if a.startswith("--file="):
            files.append(a.split("=", 1)[1])
        elif a.startswith("--project-name="):
            project = a.split("=", 1)[1]
        i += 1
    return files, project, args[i:]


def _compose_load(path: str) -> dict[str, Any] | str:
    """The file's services, or the message Compose prints (it names the file, then YAML's error)."""
    try:
        text = Path(path).read_text()
    except OSError:
        return f"open {path}: no such file or directory"
    try:
        import yaml

        data = yaml.safe_load(text)
    except ImportError:  # pragma: no cover - the simulator's python has PyYAML (a console dependency)
        return "PyYAML is needed by the simulated compose"
    except Exception as exc:  # noqa: BLE001 - yaml.YAMLError: Compose's own words for it
        mark = getattr(exc, "problem_mark", None)
        return (f"yaml: line {mark.line + 1}: {getattr(exc, 'problem', exc)}" if mark is not None
                else f"yaml: {exc}")
    if not isinstance(data, dict) or not isinstance(data.get("services"), dict):
        return f"{path}: services must be a mapping" if isinstance(data, dict) else \
            f"{path}: top-level object must be a mapping"
    return data


def _compose_inspect(path: str, project: str, service: str, svc: dict[str, Any]) -> dict[str, Any]:
    """The container Compose creates for a service: its labels (com.docker.compose.*), its name
    (container_name, else PROJECT-SERVICE-1), its launch from the service's keys."""
    from console.host.parsers.docker import _compose_gpus, _compose_volume, compose_container_name

    def words(v: Any) -> list[str]:
        return shlex.split(v) if isinstance(v, str) else [str(x) for x in v] if isinstance(v, list) else []

    name = str(svc.get("container_name") or compose_container_name(project, service))
    entry, cmd = words(svc.get("entrypoint")), words(svc.get("command"))
    argv = entry + cmd
    gpus = _compose_gpus(svc)
    requests = [] if gpus is None else [{"Driver": "nvidia", "Count": gpus.count if gpus.count is not None else 0,
                                         "DeviceIDs": list(gpus.device_ids) or None,
                                         "Capabilities": [["gpu"]], "Options": {}}]
    mounts = [m for m in (_compose_volume(v) for v in svc.get("volumes") or []) if m is not None]
    env = svc.get("environment") or {}
    env_list = [f"{k}={'' if v is None else v}" for k, v in env.items()] if isinstance(env, dict) else list(env)
    ports: dict[str, list[dict[str, str]]] = {}
    for p in svc.get("ports") or []:
        host, _, inner = str(p).rpartition(":")
        ports.setdefault(f"{inner}/tcp", []).append({"HostIp": "", "HostPort": host or inner})
    labels = {"com.docker.compose.config-hash": (name.encode().hex() * 8)[:64],
              "com.docker.compose.container-number": "1", "com.docker.compose.oneoff": "False",
              "com.docker.compose.project": project, "com.docker.compose.project.config_files": path,
              "com.docker.compose.project.working_dir": str(Path(path).parent),
              "com.docker.compose.service": service, "com.docker.compose.version": "2.29.7"}
    return {
        "Id": hashlib.sha256(name.encode()).hexdigest(), "Created": "2026-11-28T07:41:12.118503992Z",
        "Path": argv[0] if argv else "", "Args": argv[1:],
        "State": {"Status": "created", "Running": False, "Paused": False, "Restarting": False, "OOMKilled": False,
                  "Dead": False, "Pid": 0, "ExitCode": 0, "Error": "", "StartedAt": "0001-01-01T00:00:00Z",
                  "FinishedAt": "0001-01-01T00:00:00Z"},
        "Image": "sha256:" + "9b1f0c3d" * 8, "Name": "/" + name, "RestartCount": 0,
        "HostConfig": {"Binds": [f"{m.source}:{m.destination}{':ro' if m.read_only else ''}" for m in mounts],
                       "NetworkMode": str(svc.get("network_mode") or f"{project}_default"), "PortBindings": ports,
                       "RestartPolicy": {"Name": str(svc.get("restart") or "no"), "MaximumRetryCount": 0},
                       "IpcMode": str(svc.get("ipc") or "private"), "ShmSize": 67108864,
                       "DeviceRequests": requests},
        "Mounts": [{"Type": m.kind, "Source": m.source, "Destination": m.destination, "Mode": "ro" if m.read_only
                    else "", "RW": not m.read_only, "Propagation": "rprivate"} for m in mounts],
        "Config": {"Hostname": name[:12], "Env": env_list, "Cmd": cmd or None, "Image": str(svc.get("image") or ""),
                   "Entrypoint": entry or None, "Labels": labels},
    }


def compose(args: list[str]) -> int:
    """`docker compose [-f FILE] [-p NAME] create|up -d|start|stop|ps [SERVICE...]`: the containers
    of a compose file, created from its services with Compose's names and labels; progress lines on
    stderr as Compose prints them without a terminal (" Container NAME  Created")."""
    from console.host.parsers.docker import compose_project_name

    files, project, rest = _compose_opts(args)
    if not rest:
        print(COMPOSE_USAGE, file=sys.stderr)
        return 1
    if files and drive_compose_mapped(files[0]):  # the driven scenario's staged service
        return drive_compose(args)
    sub, operands = rest[0], rest[1:]
    names = operands[operands.index("--") + 1:] if "--" in operands else [a for a in operands if not a.startswith("-")]
    if sub not in ("create", "up", "start", "stop", "ps"):
        print(f"unknown docker command: \"compose {sub}\"", file=sys.stderr)
        return 1
    path = files[0] if files else str(Path.cwd() / "compose.yaml")
    loaded = _compose_load(path)
    if isinstance(loaded, str):
        print(loaded, file=sys.stderr)
        return 1
    project = project or compose_project_name(loaded.get("name"), path) or "default"
    services = {str(k): v for k, v in loaded["services"].items() if isinstance(v, dict)}
    for n in names:
        if n not in services:
            print(f"no such service: {n}", file=sys.stderr)
            return 1
    chosen = names or list(services)
    if sub == "ps":
        objs = [o for o in _containers() if _labels(o).get("com.docker.compose.project") == project
                and _labels(o).get("com.docker.compose.service") in chosen
                and ("-a" in operands or "--all" in operands or o.get("State", {}).get("Running"))]
        if _value(operands, "--format") == "json":
            for o in objs:
                row = _row(o, False)
                print(go_json({**row, "Name": row["Names"], "Project": project,
                               "Service": _labels(o)["com.docker.compose.service"]}))
            return 0
        print(table(["NAME", "IMAGE", "COMMAND", "SERVICE", "CREATED", "STATUS", "PORTS"],
                    [[r["Names"], r["Image"], _go_quote(_ellipsis(json.loads(r["Command"]), 20)),
                      _labels(o)["com.docker.compose.service"], r["RunningFor"], r["Status"], r["Ports"]]
                     for o in objs for r in [_row(o, False)]]))
        return 0
    for service in chosen:
        obj = _compose_inspect(path, project, service, services[service])
        name = str(obj["Name"]).lstrip("/")
        existing = _load(name)
        if sub in ("create", "up"):
            if existing is None:
                _dir().mkdir(parents=True, exist_ok=True)
                _save(obj)
                (_dir() / f"{name}.log").touch()
                print(f" Container {name}  Creating", file=sys.stderr)
                print(f" Container {name}  Created", file=sys.stderr)
            elif sub == "up":  # kept: `up` says what it found
                running = existing.get("State", {}).get("Running")
                print(f" Container {name}  {'Running' if running else 'Created'}", file=sys.stderr)
            # `create` of a service whose container is there (--no-recreate, or nothing changed): Compose
            # v2.40.3 prints nothing at all (tests/real/test_docker_outputs.py)
            existing = _load(name)
        if existing is None:  # start/stop of a service with no container yet
            if sub == "start":
                print(f'service "{service}" has no container to start', file=sys.stderr)
                return 1
            continue
        if sub in ("up", "start"):
            print(f" Container {name}  Starting", file=sys.stderr)
            if _start_stop("start", ["--", name], quiet=True):
                return 1
            print(f" Container {name}  Started", file=sys.stderr)
        elif sub == "stop":
            print(f" Container {name}  Stopping", file=sys.stderr)
            _start_stop("stop", ["--", name], quiet=True)
            print(f" Container {name}  Stopped", file=sys.stderr)
    return 0


# -- the driven scenario's containers (`--demo-scenario docker-drive`, issue 26) ----------------------
# The containers of console/demo/hostsim/docker_drive.py's scenario are the simulated services of
# console/demo/hostsim/drive.py: `docker start|stop NAME` opens and closes the mapped service's window
# and returns as Docker's do, `start` once the container's process runs (a server that dies while
# booting is seen later, in `docker inspect`), `stop` once it has exited (SIGTERM, SIGKILL after
# --time seconds). State: $GPUSIM_ROOT/.sim/docker-drive.json = {"containers": {NAME: UNIT},
# "compose": {SERVICE: [FILE, CONTAINER, UNIT]}}, written by the scenario, read here.
MAP_FILE = "docker-drive.json"


def _root() -> Path:
    return Path(os.environ["GPUSIM_ROOT"])


def drive_mapped(name: str, root: Path | None = None) -> str | None:
    """The simulated service behind a container of the driven scenario (None: a plain container)."""
    try:
        data: dict[str, Any] = json.loads(((root or _root()) / ".sim" / MAP_FILE).read_text())
    except (OSError, ValueError):
        return None
    unit = data.get("containers", {}).get(name.lstrip("/"))
    return unit if isinstance(unit, str) else None


def _unit_active(unit: str) -> str:
    try:
        units = json.loads((_root() / ".sim" / "units.json").read_text())
    except (OSError, ValueError):
        units = {}
    return str(units.get(unit, {}).get("active", "inactive"))


def _container_running(name: str) -> bool | None:
    try:
        obj = json.loads((_root() / ".sim" / "containers" / f"{name}.json").read_text())
    except (OSError, ValueError):
        return None
    return bool(obj.get("State", {}).get("Running"))


def _wait(predicate: Any, timeout_s: float) -> bool:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def drive_start_stop(cmd: str, name: str, unit: str, grace_s: float, t: float) -> int:
    """`docker start|stop NAME` for a mapped container; prints what Docker prints."""
    if cmd == "start":
        if _unit_active(unit) == "active":
            print(name)  # Docker: starting a running container is a no-op that names it
            return 0
        drive._set_window(unit, True, t)
        if not _wait(lambda: _unit_active(unit) == "active", 10):
            print(f"Error response from daemon: failed to create task for container: {name}: the process did "
                  "not start", file=sys.stderr)
            print(f"Error: failed to start containers: {name}", file=sys.stderr)
            return 1
        _wait(lambda: _container_running(name) is True, 5)  # what `docker inspect` says next agrees
        print(name)
        return 0
    drive._set_window(unit, False, t)
    if not _wait(lambda: _unit_active(unit) != "active", grace_s + 10):
        print(f"Error response from daemon: cannot stop container: {name}: tried to kill container, but did "
              "not receive an exit event", file=sys.stderr)
        return 1
    _wait(lambda: _container_running(name) is False, 5)
    print(name)
    return 0


def drive_compose_mapped(path: str) -> bool:
    """Whether the driven scenario stages this compose file's service (else the plain simulated compose)."""
    try:
        services = json.loads((_root() / ".sim" / MAP_FILE).read_text()).get("compose", {})
    except (OSError, ValueError):
        return False
    return any(isinstance(e, list) and e and e[0] == path for e in services.values())


def drive_compose(args: list[str]) -> int:
    """`docker compose -f FILE create [--no-recreate] [--] SERVICE` for the driven scenario: the
    service's container appears (created, not started); an existing one is kept (--no-recreate)."""
    path = args[args.index("-f") + 1] if "-f" in args and args.index("-f") + 1 < len(args) else None
    rest = args[args.index("-f") + 2:] if path is not None else args
    if not rest or rest[0] != "create":
        print(f"unknown docker command: \"compose {rest[0] if rest else ''}\"", file=sys.stderr)
        return 1
    names = rest[rest.index("--") + 1:] if "--" in rest else [a for a in rest[1:] if not a.startswith("-")]
    if path is None or not Path(path).is_file():
        print(f"open {path}: no such file or directory", file=sys.stderr)
        return 1
    try:
        services = json.loads((_root() / ".sim" / MAP_FILE).read_text()).get("compose", {})
    except (OSError, ValueError):
        services = {}
    status = 0
    for service in names:
        entry = services.get(service)
        if entry is None or entry[0] != path:
            print(f"no such service: {service}", file=sys.stderr)
            status = 1
            continue
        _file, container, unit = entry
        target = _root() / "etc" / "systemd" / "system" / unit
        if not target.exists():
            (_root() / ".sim" / "compose-staged" / unit).replace(target)
            _wait(lambda c=container: _container_running(c) is not None, 5)
            print(f" Container {container}  Creating", file=sys.stderr)  # as Compose says a creation
            print(f" Container {container}  Created", file=sys.stderr)
        # else: the container is there, kept: Compose prints nothing (tests/real/test_docker_outputs.py)
    return status
