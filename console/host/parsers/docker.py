"""SGLang in a container: what `docker inspect`, `docker ps --format '{{json .}}'`, a compose
file and `/proc/PID/cgroup` say, as frozen data. Pure: text in, data out, `ParseError` on bad input.

The shapes follow Docker's own output (the Engine API's ContainerJSON that `docker inspect`
prints; `docker ps`'s JSON lines; the Compose specification's service keys); see
tests/data/PROVENANCE.md. A container's launch is what SGLang reads: the entrypoint and command
(its argv), the environment, and the host facts that decide whether the server can run at all:
mounts (is the model path inside the container?), GPUs, shared memory and IPC (TP needs shared
memory), ports and the restart policy.
"""

from __future__ import annotations

import calendar
import datetime as dt
import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

import yaml

from console.host.parsers import ParseError
from console.sanitize import clean_json, clean_line

MAX_INSPECT_BYTES = 8 * 1024 * 1024  # a container's inspect is a few KiB; more is not docker's output


@dataclass(frozen=True, slots=True)
class Mount:
    source: str  # a host path (bind) or a volume name
    destination: str  # the path inside the container
    kind: str = "bind"  # bind, volume, tmpfs
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """`--gpus` / compose `deploy.resources.reservations.devices`: all GPUs, a count, or the
    named devices (indexes or UUIDs)."""

    count: int | None = None  # -1: all
    device_ids: tuple[str, ...] = ()

    @property
    def describe(self) -> str:
        if self.device_ids:
            return "device=" + ",".join(self.device_ids)
        if self.count == -1:
            return "all"
        return str(self.count) if self.count is not None else "none"

    def visible(self, host_gpus: int | None) -> int | None:
        """How many GPUs the container sees (None: unknown)."""
        if self.device_ids:
            return len(self.device_ids)
        if self.count == -1:
            return host_gpus
        return self.count


_DOCKER_TIME = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def docker_time(text: Any) -> float | None:
    """One of Docker's times (`docker inspect`'s `State.StartedAt`/`State.FinishedAt`, Go's
    RFC3339Nano: "2026-12-03T17:09:15.123456789Z", trailing zeros of the fraction dropped) as epoch
    seconds, every digit of the fraction read (not cut at microseconds). None: unknown — Docker's
    zero time ("0001-01-01T00:00:00Z": never started, never finished), anything before 1970, or a
    text that is not such a time (a hostile or broken host)."""
    if not isinstance(text, str) or len(text) > 40:
        return None
    m = _DOCKER_TIME.match(text)
    if m is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    if year < 1970:
        return None
    try:
        whole = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
        dt.date(year, month, day)  # timegm accepts 31 February
    except (ValueError, OverflowError):
        return None
    if hour > 23 or minute > 59 or second > 60:
        return None
    zone = m.group(8)
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        whole -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    frac = m.group(7) or ""
    return whole + (int(frac.ljust(9, "0")) / 1e9 if frac else 0.0)


@dataclass(frozen=True, slots=True)
class ContainerState:
    status: str | None = None  # created, running, restarting, exited, paused, dead
    running: bool = False
    restarting: bool = False
    exit_code: int | None = None
    oom_killed: bool = False
    pid: int | None = None
    started_at: str | None = None  # `State.StartedAt` as Docker wrote it (docker_time reads it)
    finished_at: str | None = None  # `State.FinishedAt`: the last exit, kept while a later start runs
    restart_count: int = 0

    @property
    def started_at_s(self) -> float | None:
        """`docker inspect -f '{{.State.StartedAt}}'` as epoch seconds (None: never started, unknown)."""
        return docker_time(self.started_at)

    @property
    def finished_at_s(self) -> float | None:
        """`docker inspect -f '{{.State.FinishedAt}}'` as epoch seconds (None: never exited, unknown)."""
        return docker_time(self.finished_at)


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    """One container (or compose service) as SGLang's launch sees it."""

    name: str
    image: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    mounts: tuple[Mount, ...] = ()
    gpus: GpuRequest | None = None
    shm_size_bytes: int | None = None  # None: Docker's default (64 MiB) or not said
    ipc_mode: str | None = None
    network_mode: str | None = None
    ports: tuple[str, ...] = ()  # "HOST_IP:HOST_PORT->PORT/PROTO"
    restart_policy: str | None = None  # no, always, unless-stopped, on-failure[:N]
    # Seconds `docker stop` waits between SIGTERM and SIGKILL when given no -t: the container's own
    # (`docker run --stop-timeout`, Compose's stop_grace_period); None: not set (Docker's default, 10 s)
    stop_timeout_s: int | None = None
    env_files: tuple[str, ...] = ()  # compose env_file (paths on the host)
    id: str | None = None
    state: ContainerState | None = None
    labels: tuple[tuple[str, str], ...] = ()
    source: str = "inspect"  # inspect or compose

    @property
    def environment(self) -> dict[str, str]:
        return dict(self.env)

    @property
    def image_tag(self) -> str | None:
        image = self.image.split("@", 1)[0]
        last = image.rsplit("/", 1)[-1]
        return last.split(":", 1)[1] if ":" in last else None


@dataclass(frozen=True, slots=True)
class ContainerRow:
    """One line of `docker ps --no-trunc --format '{{json .}}'`."""

    id: str
    name: str
    image: str
    command: str
    status: str
    state: str | None = None
    labels: tuple[tuple[str, str], ...] = ()  # `Labels`: "k=v,k=v" in the JSON line

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)


def parse_labels(text: str) -> tuple[tuple[str, str], ...]:
    """`docker ps`'s Labels column: "k=v,k=v" (the CLI joins the map with commas)."""
    out = []
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if sep and key:
            out.append((key.strip(), value))
    return tuple(sorted(out))


_VERSION_TAG = re.compile(r"^v?(\d+\.\d+\.\d+(?:\.post\d+)?)")


def sglang_version_of_image(image: str) -> str | None:
    """`lmsysorg/sglang:v0.5.5-cu129` → "0.5.5"; `:latest`, a digest or another image → None (unknown)."""
    spec = ContainerSpec("", image, ())
    tag = spec.image_tag
    if tag is None:
        return None
    m = _VERSION_TAG.match(tag)
    return m.group(1) if m else None


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ParseError(f"{what}: expected a string, got {type(value).__name__}")
    return value


def _strs(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ParseError(f"{what}: expected a list of strings")
    return tuple(value)


def _list(value: Any) -> list[Any]:
    """A list where the output should have one; anything else (a number, a string, a mapping where
    a list belongs: a hostile or broken host) is no items (issue 34, item 14)."""
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _env_pairs(items: Any, what: str) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    if isinstance(items, dict):
        for key, value in items.items():
            pairs.append((str(key), "" if value is None else str(value)))
        return tuple(pairs)
    for item in _strs(items, what):
        key, _, value = item.partition("=")
        pairs.append((key, value))
    return tuple(pairs)


def _gpus_from_device_requests(requests: Any) -> GpuRequest | None:
    if not isinstance(requests, list):
        return None
    for request in requests:
        if not isinstance(request, dict):
            continue
        caps = _list(request.get("Capabilities"))
        flat = {c for group in caps if isinstance(group, list) for c in group if isinstance(c, str)}
        if "gpu" not in flat and request.get("Driver") not in ("nvidia",):
            continue
        ids = tuple(str(d) for d in _list(request.get("DeviceIDs")) if isinstance(d, (str, int)))
        count = request.get("Count")
        return GpuRequest(count if isinstance(count, int) and not isinstance(count, bool) and not ids else None, ids)
    return None


def _ports(bindings: Any) -> tuple[str, ...]:
    out: list[str] = []
    if not isinstance(bindings, dict):
        return ()
    for port, hosts in sorted(bindings.items(), key=lambda kv: str(kv[0])):
        for h in _list(hosts):
            if isinstance(h, dict):
                ip = h.get("HostIp") or "0.0.0.0"
                out.append(f"{ip}:{h.get('HostPort', '')}->{port}")
    return tuple(out)


def _container(obj: Any) -> ContainerSpec:
    if not isinstance(obj, dict):
        raise ParseError("docker inspect: an entry is not an object")
    config = obj.get("Config")
    host = obj.get("HostConfig")
    if not isinstance(config, dict) or not isinstance(host, dict):
        raise ParseError("docker inspect: Config/HostConfig are not objects (not a container's inspect?)")
    name = _str(obj.get("Name", ""), "Name").lstrip("/")
    path = obj.get("Path")
    argv = ((_str(path, "Path"),) if path else ()) + _strs(obj.get("Args"), "Args")
    if not argv:
        argv = _strs(config.get("Entrypoint"), "Config.Entrypoint") + _strs(config.get("Cmd"), "Config.Cmd")
    mounts: list[Mount] = []
    for m in _list(obj.get("Mounts")):
        if isinstance(m, dict) and isinstance(m.get("Destination"), str):
            mounts.append(Mount(str(m.get("Source") or m.get("Name") or ""), m["Destination"],
                                str(m.get("Type") or "bind"), m.get("RW") is False))
    state_obj = obj.get("State") if isinstance(obj.get("State"), dict) else None
    state = None
    if state_obj is not None:
        def _int(v: Any) -> int | None:
            return v if isinstance(v, int) and not isinstance(v, bool) else None
        state = ContainerState(
            status=state_obj.get("Status") if isinstance(state_obj.get("Status"), str) else None,
            running=state_obj.get("Running") is True, restarting=state_obj.get("Restarting") is True,
            exit_code=_int(state_obj.get("ExitCode")), oom_killed=state_obj.get("OOMKilled") is True,
            pid=_int(state_obj.get("Pid")) or None, started_at=_opt_str(state_obj.get("StartedAt")),
            finished_at=_opt_str(state_obj.get("FinishedAt")),
            restart_count=_int(obj.get("RestartCount")) or 0)
    policy = host.get("RestartPolicy") if isinstance(host.get("RestartPolicy"), dict) else {}
    restart = _opt_str(policy.get("Name"))
    if restart == "on-failure" and isinstance(policy.get("MaximumRetryCount"), int) and policy["MaximumRetryCount"]:
        restart = f"on-failure:{policy['MaximumRetryCount']}"
    shm = host.get("ShmSize")
    stop = config.get("StopTimeout")
    labels = config.get("Labels") if isinstance(config.get("Labels"), dict) else {}
    return ContainerSpec(
        name=name, image=_str(config.get("Image") or obj.get("Image") or "", "Config.Image"), argv=argv,
        env=_env_pairs(config.get("Env"), "Config.Env"), mounts=tuple(mounts),
        gpus=_gpus_from_device_requests(host.get("DeviceRequests")),
        shm_size_bytes=shm if isinstance(shm, int) and shm > 0 else None,
        ipc_mode=_opt_str(host.get("IpcMode")), network_mode=_opt_str(host.get("NetworkMode")),
        # `--network host`: Docker keeps the PortBindings it was given but publishes nothing.
        ports=() if host.get("NetworkMode") == "host" else _ports(host.get("PortBindings")), restart_policy=restart,
        stop_timeout_s=_stop_seconds(stop),
        id=obj.get("Id") if isinstance(obj.get("Id"), str) else None, state=state,
        labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())), source="inspect")


def parse_inspect(text: str) -> list[ContainerSpec]:
    """`docker inspect CONTAINER…` (a JSON array of containers)."""
    if len(text) > MAX_INSPECT_BYTES:
        raise ParseError(f"docker inspect: {len(text)} bytes is not a container's inspect")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"docker inspect: not JSON ({exc})") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise ParseError("docker inspect: expected a JSON array")
    # Every string of the container's own (argv, env, labels, names) is host text: no escape
    # sequence or control character of it reaches the operator's terminal (issue 34, item 1).
    try:
        return [_container(obj) for obj in clean_json(data)]
    except ParseError:
        raise
    except (TypeError, AttributeError, ValueError, KeyError, OverflowError) as exc:  # a shape not Docker's
        raise ParseError(f"docker inspect: a field of an unexpected type ({type(exc).__name__})") from None


def looks_like_inspect(text: str) -> bool:
    head = text.lstrip()[:4096]
    return head.startswith(("[", "{")) and '"HostConfig"' in text[:MAX_INSPECT_BYTES] and '"Config"' in text


def parse_ps(text: str) -> list[ContainerRow]:
    """`docker ps --no-trunc --format '{{json .}}'`: one JSON object a line (bad lines are skipped
    with the rest kept: one odd container must not hide the others)."""
    rows: list[ContainerRow] = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = clean_json(json.loads(line))
        except (ValueError, RecursionError):
            continue
        if not isinstance(obj, dict):
            continue
        rows.append(ContainerRow(str(obj.get("ID", "")), str(obj.get("Names", "")), str(obj.get("Image", "")),
                                 str(obj.get("Command", "")).strip('"'), str(obj.get("Status", "")),
                                 obj.get("State") if isinstance(obj.get("State"), str) else None,
                                 parse_labels(obj["Labels"]) if isinstance(obj.get("Labels"), str) else ()))
    return rows


def runs_sglang(command: str) -> bool:
    return "sglang.launch_server" in command or re.search(r"(^|[\s/])sglang serve\b", command) is not None


# -- compose -----------------------------------------------------------------------------------
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.I)


MAX_STOP_S = 86_400  # a day: a longer grace is not one a swap waits for (and not a number to trust)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")


def _stop_seconds(value: Any) -> int | None:
    """Docker's Config.StopTimeout: whole seconds (null or absent when the container sets none;
    -1 is "wait forever" to Docker: not a grace a swap can wait out, so unknown)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_STOP_S:
        return None
    return value


def parse_grace_period(value: Any) -> int | None:
    """Compose's stop_grace_period ("1m30s", "10s", "500ms", or a bare number of seconds) as the whole
    seconds Compose gives the container's StopTimeout: truncated, as Compose does ("1500ms" is 1 s in
    `docker inspect`, checked against Compose v2.40.3); None when absent or not a duration."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        text = str(value).strip()
        if not text or len(text) > 40 or not re.fullmatch(r"(?:\d+(?:\.\d+)?(?:h|ms|m|s|us|µs|ns))+", text):
            return None
        unit = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
        seconds = sum(float(n) * unit[u] for n, u in _DURATION.findall(text))
    if not 0 <= seconds <= MAX_STOP_S:
        return None
    return int(seconds)


def parse_size(value: Any) -> int | None:
    """Compose/Docker sizes: 34359738368, "32g", "32gb", "512m" (binary multiples, as Docker's)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        return None
    m = _SIZE.match(value)
    if not m:
        return None
    scale = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}[m.group(2).lower()]
    return int(float(m.group(1)) * scale)


def _words(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:
            raise ParseError(f"{what}: {exc}") from None
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    raise ParseError(f"{what}: expected a string or a list")


def _compose_volume(item: Any) -> Mount | None:
    if isinstance(item, str):
        parts = item.split(":")
        if len(parts) == 1:
            return Mount(parts[0], parts[0], "volume")
        mode = parts[2] if len(parts) > 2 else ""
        kind = "bind" if parts[0].startswith(("/", ".", "~", "$")) else "volume"
        return Mount(parts[0], parts[1], kind, "ro" in mode.split(","))
    if isinstance(item, dict) and isinstance(item.get("target"), str):
        return Mount(str(item.get("source", "")), item["target"], str(item.get("type", "volume")),
                     item.get("read_only") is True)
    return None


def _compose_gpus(service: dict[str, Any]) -> GpuRequest | None:
    devices = _dict(_dict(_dict(service.get("deploy")).get("resources")).get("reservations")).get("devices")
    if isinstance(devices, list):
        for d in devices:
            if not isinstance(d, dict):
                continue
            caps = _list(d.get("capabilities"))
            if "gpu" not in caps and d.get("driver") != "nvidia":
                continue
            ids = tuple(str(x) for x in _list(d.get("device_ids")) if isinstance(x, (str, int)))
            count = d.get("count")
            if ids:
                return GpuRequest(None, ids)
            if count in ("all", None):
                return GpuRequest(-1, ())
            if isinstance(count, int) and not isinstance(count, bool):
                return GpuRequest(count, ())
            if isinstance(count, str) and count.isascii() and count.isdigit() and len(count) < 6:
                return GpuRequest(int(count), ())
            raise ParseError(f"deploy.resources.reservations.devices: count {str(count)[:20]!r} is not a number")
    gpus = service.get("gpus")
    if gpus == "all":
        return GpuRequest(-1)
    return None


COMPOSE_PROJECT = "com.docker.compose.project"
COMPOSE_SERVICE = "com.docker.compose.service"


def compose_project_name(top_name: Any, compose_path: str | None) -> str | None:
    """The project Compose names (compose-go's NormalizeProjectName): the file's top-level `name:`,
    else the directory holding the file; lowercased, only [a-z0-9_-] kept, starting with a letter or
    digit. None: not known (no path given, or nothing left after normalising)."""
    raw = top_name if isinstance(top_name, str) and top_name else None
    if raw is None and compose_path:
        parent = compose_path.rstrip("/").rsplit("/", 1)[0] if "/" in compose_path.rstrip("/") else ""
        raw = parent.rsplit("/", 1)[-1] if parent else None
    if not raw:
        return None
    name = re.sub(r"[^a-z0-9_-]", "", raw.lower()).lstrip("_-")
    return name or None


def compose_container_name(project: str, service: str, number: int = 1) -> str:
    """The name Compose v2 gives a service's container without `container_name`: PROJECT-SERVICE-N."""
    return f"{project}-{service}-{number}"


def _number(row: ContainerRow) -> int:
    n = row.label("com.docker.compose.container-number") or ""
    return int(n) if n.isdigit() and len(n) < 10 else 1 << 31


def compose_container_on_host(rows: list[ContainerRow], project: str | None, service: str,
                              compose_file: str | None = None) -> str | None:
    """The container of a compose service among `docker ps -a` rows, by Compose's labels
    (com.docker.compose.service and .project); the lowest-numbered (as a number: 9 before 10)
    when it has replicas. Labels are anyone's to set (issue 34, item 8): the project's own
    containers come first: the one Compose itself named PROJECT-SERVICE-N (a name is unique on a
    daemon), then those whose labels name this compose file, then the rest that carry the labels."""
    def rank(r: ContainerRow) -> tuple[int, int, str]:
        own_name = project is not None and r.name == compose_container_name(project, service, _number(r))
        files = (r.label("com.docker.compose.project.config_files") or "").split(",")
        own_file = compose_file is not None and compose_file in files
        return (0 if own_name and own_file else 1 if own_name else 2 if own_file else 3, _number(r), r.name)

    found = sorted((r for r in rows if r.label(COMPOSE_SERVICE) == service
                    and (project is None or r.label(COMPOSE_PROJECT) == project)), key=rank)
    return found[0].name if found else None


def parse_compose(text: str, service: str | None = None, path: str | None = None) -> ContainerSpec:
    """One service of a compose file. With no name, the one service whose command runs SGLang.
    `path`: where the file is on the host; then a service without `container_name` is named as
    Compose names its container (PROJECT-SERVICE-1) and the project is among its labels."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ParseError(f"compose file does not parse{where}: {getattr(exc, 'problem', exc)}") from None
    except RecursionError:
        raise ParseError("compose file nests too deeply") from None
    try:
        return _compose_spec(clean_json(data), service, path)
    except ParseError:
        raise
    except (TypeError, AttributeError, ValueError, KeyError, OverflowError) as exc:  # a shape not Compose's
        raise ParseError(f"compose file: a key of an unexpected type ({type(exc).__name__})") from None


def _compose_spec(data: Any, service: str | None, path: str | None) -> ContainerSpec:
    if not isinstance(data, dict) or not isinstance(data.get("services"), dict):
        raise ParseError("compose file: no services: mapping")
    services = {str(k): v for k, v in data["services"].items() if isinstance(v, dict)}
    if service is None:
        found = [n for n, s in services.items()
                 if runs_sglang(" ".join(_words(s.get("entrypoint"), n) + _words(s.get("command"), n)))]
        if len(found) != 1:
            raise ParseError("compose file: name the service (FILE:SERVICE); "
                             f"{len(found)} of its services run SGLang" + (f": {', '.join(found)}" if found else ""))
        service = found[0]
    if service not in services:
        raise ParseError(f"compose file: no service {service!r} (has: {', '.join(services) or 'none'})")
    s = services[service]
    argv = _words(s.get("entrypoint"), f"{service}.entrypoint") + _words(s.get("command"), f"{service}.command")
    mounts = tuple(m for m in (_compose_volume(v) for v in _list(s.get("volumes"))) if m is not None)
    ports = tuple(str(p) for p in _list(s.get("ports")) if isinstance(p, (str, int)))
    env_files = _strs(s.get("env_file"), f"{service}.env_file") if not isinstance(s.get("env_file"), list) or all(
        isinstance(x, str) for x in s.get("env_file")) else ()
    project = compose_project_name(data.get("name"), path) if path is not None else None
    name = str(s.get("container_name") or (compose_container_name(project, service) if project else service))
    return ContainerSpec(
        name=name, image=str(s.get("image") or ""), argv=argv,
        env=_env_pairs(s.get("environment") or {}, f"{service}.environment"), mounts=mounts,
        gpus=_compose_gpus(s), shm_size_bytes=parse_size(s.get("shm_size")),
        ipc_mode=str(s["ipc"]) if s.get("ipc") else None,
        network_mode=str(s["network_mode"]) if s.get("network_mode") else None, ports=ports,
        restart_policy=str(s["restart"]) if s.get("restart") else None, env_files=env_files,
        stop_timeout_s=parse_grace_period(s.get("stop_grace_period")),
        labels=((COMPOSE_SERVICE, service),) + (((COMPOSE_PROJECT, project),) if project else ()), source="compose")


# -- which container holds a GPU process -------------------------------------------------------
_CGROUP_ID = re.compile(r"(?:docker[-/]|/docker/|cri-containerd-|/containerd/)([0-9a-f]{64})(?:\.scope)?")


def container_id_from_cgroup(text: str) -> str | None:
    """`/proc/PID/cgroup` → the full container id of the process, or None (not in a container).
    cgroup v1 (`…:/docker/<id>`) and v2 with the systemd driver (`0::/system.slice/docker-<id>.scope`)."""
    for line in text.splitlines():
        m = _CGROUP_ID.search(line)
        if m:
            return m.group(1)
    return None


_CLI_NOISE = re.compile(r"^(?:Error: failed to start containers: .*|Flag --\S+ has been deprecated.*)$")


def docker_error_text(text: str) -> str:
    """A failed docker command's output as one line: the daemon's reason, without what the CLI
    adds around it (`Error: failed to start containers: NAME` after the reason of a failed
    `docker start`, CLI 28's `Flag --time has been deprecated` note), host text cleaned."""
    lines = [clean_line(ln).strip() for ln in text.splitlines()]
    kept = [ln for ln in lines if ln and not _CLI_NOISE.match(ln)]
    return " ".join(kept or [ln for ln in lines if ln])


def restart_loop_of(state: dict[str, str]) -> str | None:
    """A container that Docker restarts in a loop: `restarting` (Docker also calls it running:
    `State.Running` is true while it restarts), or up again between two crashes (`running` with a
    RestartCount: a read during the second or so a crashing server lives). It serves nothing. The
    words for it, or None. `state`: container_actions.parse_container_state."""
    restarts = state.get("restarts", "0")
    if state.get("status") == "restarting":
        return (f"restarting in a loop ({restarts} restarts, last exit code {state.get('exit_code', '?')}"
                f"{', OOM-killed' if state.get('oom_killed') == 'true' else ''})")
    if state.get("status") == "running" and restarts.isdigit() and int(restarts) > 0:
        return f"restarting in a loop (up again after {restarts} restarts by its restart policy)"
    return None
