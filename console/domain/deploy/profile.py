"""`[deployments.NAME]` in the config: the nodes of one model served over several hosts.

    [deployments.qwen-397b]
    kind = "multinode"                    # or "pd" (prefill/decode behind a router)
    nodes = [
      { profile = "gpu-a", node_rank = 0 },
      { profile = "gpu-b", node_rank = 1 },
    ]
    may_differ = ["--model-path"]         # optional: flags allowed to differ besides --host

    [deployments.qwen-pd]
    kind = "pd"
    nodes = [
      { profile = "gpu-a", role = "prefill" },
      { profile = "gpu-b", role = "decode" },
      { profile = "edge", role = "router" },
    ]

Each node names a host profile: how to reach it (host, port, user, identity, known_hosts, the
jump host of ~/.ssh/config) and its service (unit or container, model_dir) are the profile's, so a
node is reached exactly as that host is. `unit` or `container` on the node override the profile's
(two nodes of one host, each with its own unit). Bad tables are a ConfigError naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from console.config import ConfigError, HostProfile

KINDS = ("multinode", "pd")
ROLES = ("rank", "prefill", "decode", "router")
NODE_KEYS = {"profile", "role", "node_rank", "unit", "container"}


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
    unknown = sorted(set(table) - NODE_KEYS)
    if unknown:
        raise ConfigError(f"{where} has unknown keys: {', '.join(unknown)}"[:300])
    prof = table.get("profile")
    if not isinstance(prof, str) or not prof:
        raise ConfigError(f"{where}: profile must name a host profile")
    if prof not in profiles:
        raise ConfigError(f"{where}: no profile named {prof!r}"[:300])
    role = table.get("role", "rank")
    if role not in ROLES:
        raise ConfigError(f"{where}: role must be one of {', '.join(ROLES)}, got {role!r}"[:300])
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
    if kind not in KINDS:
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
