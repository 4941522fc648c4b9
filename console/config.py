"""Host profiles from TOML, found through one search-path function, with flags on top.

    GPUCONSOLE_CONFIG=/path/to/config.toml      explicit file (wins)
    $XDG_CONFIG_HOME/gpuconsole/config.toml     otherwise (~/.config/gpuconsole/config.toml)

A profile is picked by `--profile NAME`, or by `--host` naming a profile or its address.
"""

from __future__ import annotations

import ipaddress
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from console.locations import config_home

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


class ConfigError(Exception):
    """The config file is missing, unreadable or not valid TOML; the message names it."""


@dataclass(frozen=True, slots=True)
class HostProfile:
    """Everything the console needs to know about one GPU host."""

    name: str = "local"
    host: str | None = None
    port: int | None = None
    user: str | None = None
    identity: str | None = None
    known_hosts: str | None = None
    model_dir: str | None = None
    repo_id: str | None = None
    unit: str | None = None
    compare_unit: str | None = None
    log_file: str | None = None
    # SGLang in a container (issue 26): the watched container, the one it replaces, or a compose
    # file's service as the new side. A unit and a container are two kinds of the same service.
    container: str | None = None
    compare_container: str | None = None
    compose: str | None = None
    compose_service: str | None = None
    server_port: int = 30000
    forbidden_prefixes: tuple[str, ...] = ()
    disk_paths: tuple[str, ...] = ()
    stall_after_s: float = 60.0
    gpu_interval_s: float = 1.0
    connect_timeout_s: float = 10.0
    # ProxyJump (issue 37): `[user@]host[:port]`, one hop, reached with this profile's identity and
    # known_hosts (as `ssh -J`); unset: ~/.ssh/config's ProxyJump for the host, if any.
    jump: str | None = None
    # The swap from the console (issue 13)
    read_only: bool = False  # no action that changes the host (also --read-only)
    # Under read_only the console also generates no load on the server: a benchmark runs only with
    # allow_load (also --allow-load), asked explicitly (issue 21, item 13).
    allow_load: bool = False
    require_approval: bool = False  # stop/start/rollback wait for another attached person's approval
    verify_sha: bool = False  # the preflight gate wants the sha256 of every file verified
    unit_draft: str | None = None  # the new unit as drafted on this machine, for "install the new unit"
    ready_timeout_s: float = 600.0  # the new server must be ready within this long
    drain_timeout_s: float = 120.0  # the old server's GPU memory must be released within this long
    router_url: str | None = None  # issue 24: an SGLang router / model gateway in front of the server (beside path)
    # Where the router keeps its log (its add/remove-worker lines, at its own time): a file on the host,
    # journal:UNIT.service (journald) or docker:CONTAINER (docker logs); the beside path's traffic moves
    # are read from it and from the router's worker list (issue 33).
    router_log: str | None = None
    swap_path: str | None = None  # issue 24: "in-place", "beside" or "restart" (default: the least downtime)
    # The Hub (or a mirror) asked for the repo's file list; None: $HF_ENDPOINT, else huggingface.co.
    # The demo's is its simulated host's own, on loopback (console/demo/hostsim/fake_hub.py).
    hub_endpoint: str | None = None
    # The demo's simulated host keeps its files under a sandbox directory of this machine (its
    # /etc/systemd/system is ROOT/etc/systemd/system): the commands use the sandbox's paths, the
    # steps' words name a file as the host names it, this root left out. None on a real host.
    host_root: str | None = None

    def with_overrides(self, overrides: Mapping[str, Any]) -> HostProfile:
        """Flags on top of the profile: only values that were given (not None) win."""
        known = {f.name for f in fields(self)}
        given = {k: v for k, v in overrides.items() if k in known and v is not None}
        for key in ("forbidden_prefixes", "disk_paths"):
            if key in given:
                given[key] = tuple(given[key])
        return replace(self, **given)

    def watched_paths(self) -> tuple[str, ...]:
        """Paths whose free disk the header shows: the model dir and any configured disks."""
        paths = list(self.disk_paths)
        if self.model_dir and self.model_dir not in paths:
            paths.insert(0, self.model_dir)
        return tuple(paths) or ("/",)


# router_log's forms (the profile's record of the router): checked here, read by console/host/sources/router.py
_JOURNAL_UNIT = re.compile(r"[A-Za-z0-9][A-Za-z0-9@._:\\-]*\.service")
_CONTAINER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}")


def router_log_place(value: str) -> tuple[str, str]:
    """Where the router keeps its record, as the profile's `router_log` names it: ("file", PATH) for
    an absolute path it writes to, ("journal", UNIT) for `journal:UNIT.service` (journald: the
    router runs as a systemd unit, `journalctl -u UNIT -o cat`), ("docker", NAME) for
    `docker:CONTAINER` (`docker logs CONTAINER`). ValueError (one line) for anything else: a unit or
    a container name never begins with '-', so neither reads as an option."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value) or len(value) > 4096:
        raise ValueError("must be one line")
    kind, sep, name = value.partition(":")
    if sep and kind == "journal":
        if not _JOURNAL_UNIT.fullmatch(name):
            raise ValueError("journal: must name a systemd unit (journal:ROUTER.service)")
        return "journal", name
    if sep and kind == "docker":
        if not _CONTAINER.fullmatch(name):
            raise ValueError("docker: must name a container (docker:NAME)")
        return "docker", name
    if not value.startswith("/"):
        raise ValueError("must be an absolute path on the host, journal:UNIT.service or docker:CONTAINER")
    return "file", value


def config_search_paths() -> list[Path]:
    """The one seam for config discovery (tests patch GPUCONSOLE_CONFIG)."""
    explicit = os.environ.get("GPUCONSOLE_CONFIG")
    if explicit:
        return [Path(explicit).expanduser()]
    return [config_home() / "config.toml"]


_PORTS = ("port", "server_port")
_POSITIVE = ("stall_after_s", "gpu_interval_s", "connect_timeout_s")
_TEXT = ("host", "user", "identity", "known_hosts", "model_dir", "repo_id", "unit", "compare_unit", "log_file",
         "container", "compare_container", "compose", "compose_service", "router_url", "router_log",
         "swap_path", "hub_endpoint", "jump")


def endpoint_problem(url: str) -> str | None:
    """Why a Hub mirror or router URL is refused, or None: only https, or http to loopback (a token
    never goes over plain http to another host); no leading `-`, no link-local address (the cloud
    metadata service, 169.254.169.254), no credentials in the URL (issue 34, item 7)."""

    if url.startswith("-") or any(c.isspace() or ord(c) < 32 for c in url):
        return "must be a URL, not an option or text with spaces"
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        return "is not a URL"
    if parts.scheme not in ("http", "https") or not host or host.startswith("-") or "@" in parts.netloc:
        return "must be http(s)://HOST[:PORT] (no user or password in it)"
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    loopback = host == "localhost" or (ip is not None and ip.is_loopback)
    if ip is not None and (ip.is_link_local or ip.is_unspecified or ip.is_multicast):
        return f"must not be a link-local, unspecified or multicast address ({host})"
    if parts.scheme == "http" and not loopback:
        return "must be https, or http to loopback (127.0.0.1, ::1): a token would go over plain http"
    return None


def _check_value(source: Path, name: str, key: str, value: Any) -> None:
    where = f"{source}: profile {name!r}: {key}"
    if key in _PORTS and (isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535):
        raise ConfigError(f"{where} must be a port number 1–65535, got {value!r}")
    if key in _POSITIVE and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0
                             or value == float("inf")):
        raise ConfigError(f"{where} must be a number above 0, got {value!r}")
    if key in _TEXT and not isinstance(value, str):
        raise ConfigError(f"{where} must be a string, got {value!r}")
    if key == "jump" and not re.match(
            r"^(?:[A-Za-z0-9._][A-Za-z0-9._-]*@)?[A-Za-z0-9_][A-Za-z0-9._-]*(?::[0-9]{1,5})?$", value):
        raise ConfigError(f"{where} must be one jump host as [user@]host[:port], got {value!r}"[:300])
    if key == "swap_path" and value not in ("in-place", "beside", "restart"):  # issue 24
        raise ConfigError(f"{where} must be in-place, beside or restart, got {value!r}"[:300])
    if key in ("hub_endpoint", "router_url") and (why := endpoint_problem(value)) is not None:
        raise ConfigError(f"{where} {why}, got {value!r}"[:300])
    if key == "hub_endpoint" and not re.match(r"^https?://[A-Za-z0-9.\[\]:-]+(:\d+)?(/[A-Za-z0-9._~/-]*)?$", value):
        raise ConfigError(f"{where} must be an http(s) URL (a Hub mirror), got {value!r}"[:300])
    if key == "router_log":
        try:
            router_log_place(value)
        except ValueError as exc:
            raise ConfigError(f"{where} {exc}, got {value!r}"[:300]) from None
    if key == "router_url" and not re.match(r"^https?://[A-Za-z0-9.\[\]:-]+(:\d+)?/?$", value):
        raise ConfigError(f"{where} must be a URL like http://127.0.0.1:30080, got {value!r}"[:300])


def _profile_from_table(name: str, table: Mapping[str, Any], source: Path) -> HostProfile:
    if not isinstance(table, Mapping):
        raise ConfigError(f"{source}: profile {name!r} must be a table ([profiles.{name}]), got {table!r}"[:300])
    known = {f.name for f in fields(HostProfile)}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(f"{source}: profile {name!r} has unknown keys: {', '.join(unknown)}")
    values = dict(table)
    for key, value in values.items():
        _check_value(source, name, key, value)
    if values.get("unit") and (values.get("container") or values.get("compose")):
        raise ConfigError(f"{source}: profile {name!r}: a service is a unit or a container: "
                          "give `unit` or `container`/`compose`, not both")
    for key in ("forbidden_prefixes", "disk_paths"):
        if key in values:
            if not isinstance(values[key], list) or not all(isinstance(v, str) for v in values[key]):
                raise ConfigError(f"{source}: profile {name!r}: {key} must be a list of strings")
            values[key] = tuple(values[key])
    try:
        return HostProfile(name=name, **values)
    except TypeError as exc:
        raise ConfigError(f"{source}: profile {name!r}: {exc}") from None


def _groups_from_table(table: Any, source: Path) -> dict[str, tuple[str, ...]]:
    """[groups] h200 = ["gpu-a", "gpu-b"]: names of profiles (checked when a group is used)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [groups] must be a table of lists of profile names")
    groups: dict[str, tuple[str, ...]] = {}
    for name, members in table.items():
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members) or not members:
            raise ConfigError(f"{source}: group {name!r} must be a non-empty list of profile names")
        groups[name] = tuple(members)
    return groups



# -- [deployments.NAME]: one model served over several hosts (issue 37) -----------------------------
# Parsed here with the rest of the file (the config is a leaf: it imports nothing above it);
# console/domain/deploy/profile.py names these for the deployment code and says the format.
DEPLOYMENT_KINDS = ("multinode", "pd")
DEPLOYMENT_ROLES = ("rank", "prefill", "decode", "router")
DEPLOYMENT_NODE_KEYS = {"profile", "role", "node_rank", "unit", "container"}


@dataclass(frozen=True, slots=True)
class DeploymentNode:
    """One node of a deployment: a host profile in a role, at a node rank within that role."""

    profile: HostProfile
    role: str = "rank"  # "rank" (of a multi-node server), "prefill", "decode" or "router"
    node_rank: int = 0  # --node-rank of this node's server within its role's group

    @property
    def key(self) -> str:
        """The node's key: unique in its deployment, stable across polls ("node1", "prefill0")."""
        if self.role == "router":
            return "router"
        return f"{'node' if self.role == 'rank' else self.role}{self.node_rank}"

    @property
    def label(self) -> str:
        """In the operator's words: "node 1", "prefill 0", "router"."""
        if self.role == "router":
            return "router"
        return f"{'node' if self.role == 'rank' else self.role} {self.node_rank}"


@dataclass(frozen=True, slots=True)
class Deployment:
    name: str
    kind: str  # "multinode" or "pd"
    nodes: tuple[DeploymentNode, ...]
    # Flags the operator declares may differ between the nodes of one server beyond --host (e.g.
    # --model-path on hosts that mount the models elsewhere); every other difference is an error.
    may_differ: tuple[str, ...] = ()

    def node(self, key: str) -> DeploymentNode:
        return next(n for n in self.nodes if n.key == key)

    def group(self, role: str) -> tuple[DeploymentNode, ...]:
        """The nodes of one server (a role's group), by node rank."""
        return tuple(sorted((n for n in self.nodes if n.role == role), key=lambda n: n.node_rank))

    @property
    def groups(self) -> tuple[tuple[str, tuple[DeploymentNode, ...]], ...]:
        """Each SGLang server of the deployment with its nodes: one for multinode, prefill and
        decode (each possibly multi-node) for pd. The router is not a server group."""
        roles = ("rank",) if self.kind == "multinode" else ("prefill", "decode")
        return tuple((r, self.group(r)) for r in roles if self.group(r))


def _node(source: Path, name: str, i: int, table: Any, profiles: Mapping[str, HostProfile]) -> DeploymentNode:
    where = f"{source}: deployment {name!r}: node {i + 1}"
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table like {{ profile = \"gpu-a\", node_rank = 0 }}")
    unknown = sorted(set(table) - DEPLOYMENT_NODE_KEYS)
    if unknown:
        raise ConfigError(f"{where} has unknown keys: {', '.join(unknown)}"[:300])
    prof = table.get("profile")
    if not isinstance(prof, str) or not prof:
        raise ConfigError(f"{where}: profile must name a host profile")
    if prof not in profiles:
        raise ConfigError(f"{where}: no profile named {prof!r}"[:300])
    role = table.get("role", "rank")
    if role not in DEPLOYMENT_ROLES:
        raise ConfigError(f"{where}: role must be one of {', '.join(DEPLOYMENT_ROLES)}, got {role!r}"[:300])
    rank = table.get("node_rank", 0)
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < 1024:
        raise ConfigError(f"{where}: node_rank must be a whole number 0–1023, got {rank!r}"[:300])
    profile = profiles[prof]
    for key in ("unit", "container"):
        if key in table:
            if not isinstance(table[key], str) or not table[key] or table[key].startswith("-"):
                raise ConfigError(f"{where}: {key} must be a name, got {table[key]!r}"[:300])
            other = "container" if key == "unit" else "unit"
            profile = replace(profile, **{key: table[key], other: None})
    return DeploymentNode(profile, role, rank)


def deployment_from_table(name: str, table: Any, profiles: Mapping[str, HostProfile], source: Path) -> Deployment:
    where = f"{source}: deployment {name!r}"
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table ([deployments.{name}])")
    unknown = sorted(set(table) - {"kind", "nodes", "may_differ"})
    if unknown:
        raise ConfigError(f"{where} has unknown keys: {', '.join(unknown)}"[:300])
    kind = table.get("kind", "multinode")
    if kind not in DEPLOYMENT_KINDS:
        raise ConfigError(f"{where}: kind must be multinode or pd, got {kind!r}"[:300])
    raw = table.get("nodes")
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{where}: nodes must be a non-empty list of {{ profile = …, node_rank = … }}")
    nodes = tuple(_node(source, name, i, t, profiles) for i, t in enumerate(raw))
    keys = [n.key for n in nodes]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise ConfigError(f"{where}: two nodes have the same role and node_rank: {', '.join(dup)}")
    if kind == "multinode":
        if any(n.role != "rank" for n in nodes):
            raise ConfigError(f"{where}: a multinode deployment's nodes are ranks (role = \"rank\"); "
                              "prefill, decode and router belong to kind = \"pd\"")
        if len(nodes) < 2:
            raise ConfigError(f"{where}: a multinode deployment has at least two nodes")
    else:
        if any(n.role == "rank" for n in nodes):
            raise ConfigError(f"{where}: a pd deployment's nodes are prefill, decode or router")
        for role in ("prefill", "decode"):
            if not any(n.role == role for n in nodes):
                raise ConfigError(f"{where}: a pd deployment needs at least one {role} node")
    by_role: dict[str, list[int]] = {}
    for n in nodes:
        by_role.setdefault(n.role, []).append(n.node_rank)
    for role, ranks in by_role.items():
        if sorted(ranks) != list(range(len(ranks))):
            raise ConfigError(f"{where}: the {role} nodes' node_rank must be 0..{len(ranks) - 1}, "
                              f"got {sorted(ranks)}")
    may = table.get("may_differ", [])
    if not isinstance(may, list) or not all(isinstance(f, str) and f.startswith("--") and " " not in f for f in may):
        raise ConfigError(f"{where}: may_differ must be a list of flags like [\"--model-path\"]")
    if "--node-rank" in may or "--nnodes" in may or "--dist-init-addr" in may:
        raise ConfigError(f"{where}: may_differ cannot hold --node-rank, --nnodes or --dist-init-addr "
                          "(the nodes must agree on those, or differ as SGLang needs)")
    return Deployment(name, kind, nodes, tuple(may))


def deployments_from_table(table: Any, profiles: Mapping[str, HostProfile], source: Path) -> dict[str, Deployment]:
    if not isinstance(table, Mapping):
        raise ConfigError(f"{source}: [deployments] must be a table of tables")
    return {name: deployment_from_table(name, t, profiles, source) for name, t in table.items()}


@dataclass(frozen=True, slots=True)
class ConsoleConfig:
    profiles: dict[str, HostProfile]
    default_profile: str | None = None
    source: Path | None = None
    # -- fleet (issue 14): [groups] name = ["profile", ...] ------------------------------
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # [deployments.NAME]: one model over several hosts (issue 37; console/domain/deploy/profile.py)
    deployments: dict[str, Deployment] = field(default_factory=dict)
    searched: tuple[Path, ...] = ()  # where a config was looked for, when none was found

    def where(self) -> str:
        """Which file a name was looked up in, or where none was found ("" when neither is known)."""
        if self.source is not None:
            return f" in {self.source}"
        if self.searched:
            return f": no config file at {', '.join(str(p) for p in self.searched)}"
        return ""

    def deployment(self, name: str) -> Any:
        """The named deployment; unknown: a ConfigError."""
        if name not in self.deployments:
            where = self.where()
            known = ", ".join(sorted(self.deployments)) or "none"
            raise ConfigError(f"no deployment named {name!r}{where} (deployments: {known})"[:300])
        return self.deployments[name]

    def group(self, name: str) -> list[HostProfile]:
        """The profiles a group names; an unknown group or profile is a ConfigError (one line)."""
        where = self.where()
        if name not in self.groups:
            known = ", ".join(sorted(self.groups)) or "none"
            raise ConfigError(f"no group named {name!r}{where} (groups: {known})")
        unknown = [p for p in self.groups[name] if p not in self.profiles]
        if unknown:
            raise ConfigError(f"group {name!r}{where} names unknown profile(s): {', '.join(unknown)}")
        return [self.profiles[p] for p in self.groups[name]]
    # -- end fleet ---------------------------------------------------------------------

    def pick(self, profile: str | None, host: str | None) -> HostProfile:
        if profile:
            if profile not in self.profiles:
                # the file looked in, and the names it has: an operator whose config is elsewhere
                # (GPUCONSOLE_CONFIG unset, --config not given) learns where it was looked for
                known = f" (profiles: {', '.join(sorted(self.profiles))})" if self.profiles else ""
                raise ConfigError(f"no profile named {profile!r}{self.where()}{known}"[:400])
            return self.profiles[profile]
        if host:
            for p in self.profiles.values():
                if host in (p.name, p.host):
                    return p
            return HostProfile(name=host, host=host)
        if self.default_profile and self.default_profile in self.profiles:
            return self.profiles[self.default_profile]
        return HostProfile()


def load_config(path: Path | None = None) -> ConsoleConfig:
    """Read the config; a missing default file is an empty config, a missing explicit one an error."""
    explicit = path is not None or bool(os.environ.get("GPUCONSOLE_CONFIG"))
    candidates = [path] if path is not None else config_search_paths()
    for candidate in candidates:
        if candidate is None or not candidate.exists():
            if explicit:
                raise ConfigError(f"config file not found: {candidate}")
            continue
        try:
            data = tomllib.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {candidate}: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{candidate}: not valid TOML: {exc}") from None
        tables = data.get("profiles", {})
        if not isinstance(tables, dict):
            raise ConfigError(f"{candidate}: [profiles] must be a table of tables")
        profiles = {name: _profile_from_table(name, t, candidate) for name, t in tables.items()}
        default = data.get("default_profile")
        groups = _groups_from_table(data.get("groups", {}), candidate)
        deployments = deployments_from_table(data.get("deployments", {}), profiles, candidate)
        return ConsoleConfig(profiles, default if isinstance(default, str) else None, candidate, groups, deployments)
    return ConsoleConfig({}, searched=tuple(c for c in candidates if c is not None))
