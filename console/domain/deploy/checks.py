"""The checks across a deployment's nodes (issue 37), pure functions over what the nodes' states
and probes already hold:

    flags      the units of one server compared node by node: a flag that differs between node 0
               and node R is an error unless it must (--node-rank) or may (--host: each node's own
               address) differ; --nnodes must be the group's node count, --node-rank the node's
               own, --dist-init-addr given when there is more than one node
    download   the model present and complete on every node's disk
    rendezvous --dist-init-addr reachable from every node (the probe's bounded TCP connect on the
               node: `refused` is fine before the start, the host answered)
    fit        the model on each node's own GPUs with its own unit's flags (fit.py: the single
               host's planner, the node's share of TP × PP)

Each check says ok, error or unknown (a fact not read yet is unknown, never ok).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from console.domain.deploy.fit import node_fit
from console.domain.deploy.probe import NodeProbe, split_addr
from console.domain.deploy.profile import Deployment
from console.domain.deploy.state import _command

MUST_DIFFER = ("--node-rank",)
MAY_DIFFER = ("--host",)  # each node binds its own address (SGLang's multi-node examples)


@dataclass(frozen=True, slots=True)
class Check:
    name: str  # "flags", "download", "rendezvous"
    node: str  # the node's label ("node 1"), or "" for the whole group
    severity: str  # "ok", "error" or "unknown"
    message: str


def _shown(value: Any) -> str:
    if value is None:
        return "absent"
    if value is True:
        return "set"
    if isinstance(value, tuple):
        return " ".join(value)
    return str(value)


def flag_checks(group: Sequence[tuple[str, int, Any]], may_differ: Sequence[str] = ()) -> list[Check]:
    """`group`: (label, configured node rank, the node's SglangCommand or None), node 0 first.
    `may_differ`: flags the deployment declares may differ (besides --host)."""
    out: list[Check] = []
    head = next((g for g in group if g[1] == 0), None)
    for label, rank, cmd in group:
        if cmd is None:
            out.append(Check("flags", label, "unknown", f"{label}: its unit's command line is not read yet"))
    if head is None or head[2] is None:
        return out
    h_label, _, h_cmd = head
    n = len(group)
    for label, rank, cmd in group:
        if cmd is None:
            continue
        problems: list[str] = []
        nnodes = cmd.value("--nnodes")
        if n > 1 and str(nnodes) != str(n):
            problems.append(f"--nnodes is {_shown(nnodes)}, the deployment has {n} nodes")
        node_rank = cmd.value("--node-rank")
        if str(node_rank if node_rank is not None else 0) != str(rank):
            problems.append(f"--node-rank is {_shown(node_rank)}, the deployment says {rank}")
        if n > 1 and not isinstance(cmd.value("--dist-init-addr"), str):
            problems.append("--dist-init-addr is absent: each node would wait at its own address")
        if cmd is not h_cmd:
            for flag in sorted(set(cmd.flags) | set(h_cmd.flags)):
                if flag in MUST_DIFFER or flag in MAY_DIFFER or flag in may_differ:
                    continue
                mine, theirs = cmd.value(flag), h_cmd.value(flag)
                if mine != theirs:
                    problems.append(f"{flag} is {_shown(theirs)} on {h_label} and {_shown(mine)} on {label}")
            if node_rank is not None and node_rank == h_cmd.value("--node-rank"):
                problems.append(f"--node-rank is {_shown(node_rank)} on both {h_label} and {label}: it must differ")
        if problems:
            out.extend(Check("flags", label, "error", f"{label}: {p}") for p in problems)
        elif cmd is not h_cmd:
            differ = [f for f in (*MAY_DIFFER, *may_differ) if cmd.value(f) != h_cmd.value(f)]
            out.append(Check("flags", label, "ok", f"{label}: the same flags as {h_label} but --node-rank"
                             + "".join(f" and {f}" for f in differ)))
    return out


def download_checks(nodes: Sequence[tuple[str, Any, str | None]]) -> list[Check]:
    """`nodes`: (label, the node's DownloadProgress or None, the reading's error)."""
    out: list[Check] = []
    for label, d, error in nodes:
        if d is None:
            out.append(Check("download", label, "unknown",
                             f"{label}: the model dir is not read yet" + (f" ({error})" if error else "")))
        elif d.complete:
            out.append(Check("download", label, "ok", f"{label}: {d.model_dir} complete"))
        else:
            frac = d.fraction
            pct = f"{frac * 100:.0f} %" if frac is not None else "an unknown share"
            shards = f", {d.shards_done}/{d.shards_total} shards" if d.shards_total else ""
            stalled = ", stalled" if d.stalled_since is not None else ""
            sev = "error" if d.complete is False else "unknown"
            out.append(Check("download", label, sev,
                             f"{label}: {d.model_dir} is at {pct}{shards}{stalled}: every node loads its own copy"))
    return out


def rendezvous_checks(addr: str | None, nodes: Sequence[tuple[str, NodeProbe | None]]) -> list[Check]:
    """`nodes`: (label, that node's probe or None) for one multi-node server."""
    if split_addr(addr) is None:
        return [Check("rendezvous", "", "error", f"--dist-init-addr {addr or '(absent)'} is not HOST:PORT")]
    out: list[Check] = []
    for label, p in nodes:
        if p is None:
            out.append(Check("rendezvous", label, "unknown", f"{label}: not probed yet"))
        elif p.error:
            out.append(Check("rendezvous", label, "unknown", f"{label}: the probe failed: {p.error}"))
        elif p.resolve_error:
            out.append(Check("rendezvous", label, "error", f"{label}: {addr} does not resolve: {p.resolve_error}"))
        elif p.tcp == "open":
            out.append(Check("rendezvous", label, "ok", f"{label}: {addr} ({p.resolves_to}) answers"))
        elif p.tcp == "refused":
            out.append(Check("rendezvous", label, "ok", f"{label}: {addr} ({p.resolves_to}) reachable; nothing "
                             "listens there now (rank 0 listens only while the nodes meet)"))
        elif p.tcp is None:
            out.append(Check("rendezvous", label, "unknown", f"{label}: no answer from the connect"))
        else:
            out.append(Check("rendezvous", label, "error", f"{label}: {addr} not reachable: {p.tcp[7:]}"))
    return out


def run_checks(d: Deployment, states: Mapping[str, Any], probes: Mapping[str, NodeProbe]) -> tuple[Check, ...]:
    """Every check over the deployment, as the nodes' states and probes hold them now."""

    out: list[Check] = []
    for _role, members in d.groups:
        cmds = [(m.label, m.node_rank, _command(states.get(m.key))) for m in members]
        out += flag_checks(cmds, d.may_differ)
        out += download_checks([(m.label, s.data("download") if (s := states.get(m.key)) is not None else None,
                                 getattr(s.reading("download"), "error", None) if s is not None else None)
                                for m in members])
        if len(members) > 1:
            addr = next((c.value("--dist-init-addr") for _, _, c in cmds if c is not None
                         and isinstance(c.value("--dist-init-addr"), str)), None)
            out += rendezvous_checks(addr, [(m.label, probes.get(m.key)) for m in members])
        out += [Check("fit", f.label, f.severity, f.message) for f in (node_fit(m, states.get(m.key)) for m in members)]
    return tuple(out)
