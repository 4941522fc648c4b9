"""A deployment's state, derived from its nodes' HostStates (issue 37).

Nothing here is a copy of a host fact: each node's connection, GPUs, unit, download, server and
log lines are read from that node's own HostState (the one writer of each fact), and the
deployment's facts are derived from them on every call. What no host source reads (the node's
clock against the console's, its SGLang version, what --dist-init-addr resolves to there) comes
from the node's probe (probe.py). What is not known is said as unknown: nothing is guessed.

    view = derive(deployment, {"node0": state0, "node1": state1}, probes, now_s)
    view.status.reason   # "waiting for node 1 at distributed init (no line from it for 40 s)"
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from console.domain.deploy.probe import NodeProbe
from console.domain.deploy.profile import Deployment, DeploymentNode

INIT_BEGIN = "Init torch distributed begin."  # tests/data/sglang_multinode_real.json
INIT_ENDS = "Init torch distributed ends."
DUMMY_HEALTH = "Dummy health check server started"
FIRED_UP = "The server is fired up and ready to roll!"
LAUNCH = "server_args="
FATAL = ("Scheduler hit an exception", "DistStoreError", "DistNetworkError", "Received sigquit",
         "FileNotFoundError", "torch.OutOfMemoryError", "Traceback (most recent call last)")
SKEW_LABEL_S = 1.0  # a node clock further off than this is labelled on its lines


@dataclass(frozen=True, slots=True)
class NodeInit:
    """What a node's own log says of its ranks since its last launch (`server_args=` line)."""

    launched: bool
    ranks_begun: tuple[str, ...] = ()
    ranks_ended: tuple[str, ...] = ()
    failed: str | None = None  # the first fatal line after the launch
    dummy_health: bool = False  # a node of rank >= 1: SGLang's dummy health server is up
    fired_up: bool = False  # node 0: "The server is fired up and ready to roll!"


@dataclass(frozen=True, slots=True)
class NodeView:
    key: str
    label: str
    host: str
    role: str
    node_rank: int
    reachable: bool | None  # None: no connection state yet
    connection: str  # as ConnectionState.describe says it
    gpus: Any  # the node's GpuStatus (its HostState's "gpu" reading), or None
    expected_ranks: tuple[str, ...] | None  # "TP8".."TP15", from the unit's --tp-size/--nnodes/--node-rank
    argv_nnodes: int | None
    argv_node_rank: int | None
    dist_init_addr: str | None  # the unit's --dist-init-addr
    init: NodeInit
    server: str | None  # the node's ServerStatus ("ready: …") as its HostState has it
    server_ready: bool
    download: str  # "complete", "92 % …", "unknown"
    download_complete: bool | None
    version: str | None  # the probe's, else /server_info's
    skew_s: float | None  # node clock minus console clock (probe); None: not measured
    last_line_at_s: float | None  # console clock when its last log line arrived
    unit_active: str | None  # the unit's ActiveState


@dataclass(frozen=True, slots=True)
class TimelineLine:
    at_s: float | None  # console clock: the host's time of the line (else its stamp) minus the node's offset
    node: str
    label: str  # "node 1 TP8" or "node 1" for lines without a rank
    text: str
    severity: str
    clock: str  # "" (measured, in step), "clock +3.2 s", "clock not measured"


@dataclass(frozen=True, slots=True)
class DeploymentStatus:
    status: str  # "ready", "starting", "waiting", "failed" or "unknown"
    reason: str


@dataclass(frozen=True, slots=True)
class DeploymentView:
    name: str
    kind: str
    nodes: tuple[NodeView, ...]
    status: DeploymentStatus
    timeline: tuple[TimelineLine, ...]
    faults: tuple[str, ...]  # each said once, in words; empty: none seen


# -- reading one node ------------------------------------------------------------------------------
def _command(state: Any) -> Any:
    report = state.data("service") if state is not None else None
    side = getattr(report, "new", None)
    return getattr(side, "command", None) or getattr(side, "running", None)


def _int(value: Any) -> int | None:
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def expected_ranks(tp: int | None, nnodes: int | None, node_rank: int | None) -> tuple[str, ...] | None:
    """The TP ranks a node runs (SGLang's engine: tp_size // nnodes per node, in order)."""
    if tp is None:
        return None
    n, r = nnodes or 1, node_rank or 0
    per = max(1, tp // n)
    if tp <= 1:
        return ("",)
    return tuple(f"TP{i}" for i in range(per * r, per * (r + 1)))


def message(e: Any) -> str:
    """A line without its `[stamp RANKS] ` prefix (the timeline labels node and rank itself)."""
    text = e.text
    if e.ts and text.startswith("[") and "] " in text:
        return text.split("] ", 1)[1]
    return text


def node_init(lines: Any) -> NodeInit:
    """Scan a node's log lines (oldest first) for its distributed init since the last launch."""
    events = list(lines)
    start = max((i for i, e in enumerate(events) if LAUNCH in e.text), default=None)
    if start is None:
        return NodeInit(launched=False)
    begun: list[str] = []
    ended: list[str] = []
    failed = None
    dummy = fired = False
    for e in events[start:]:
        text = e.text
        if INIT_BEGIN in text and e.ranks not in begun:
            begun.append(e.ranks)
        elif INIT_ENDS in text and e.ranks not in ended:
            ended.append(e.ranks)
        elif DUMMY_HEALTH in text:
            dummy = True
        elif FIRED_UP in text:
            fired = True
        if failed is None and any(f in text for f in FATAL):
            failed = message(e)[:200]
    return NodeInit(True, tuple(begun), tuple(ended), failed, dummy, fired)


def _covers(have: tuple[str, ...], want: tuple[str, ...] | None) -> bool:
    if want is None:
        return bool(have)
    got = {tok for r in have for tok in (r.split() or [""])}
    return all(w in got or (w == "" and "" in have) for w in want)


def _download(state: Any) -> tuple[str, bool | None]:
    d = state.data("download") if state is not None else None
    if d is None:
        reading = state.reading("download") if state is not None else None
        err = getattr(reading, "error", None)
        return (f"unknown: {err}" if err else "unknown"), None
    if d.complete:
        return "complete", True
    frac = d.fraction
    shards = f"{d.shards_done}/{d.shards_total} shards" if d.shards_total else f"{d.shards_done} shards"
    pct = f"{frac * 100:.0f} %" if frac is not None else "size unknown"
    return f"incomplete: {pct}, {shards}", False if d.complete is False else None


def node_view(node: DeploymentNode, state: Any, probe: NodeProbe | None) -> NodeView:
    conn = getattr(state, "connection", None) if state is not None else None
    now = state.now() if state is not None else None
    reachable = None if conn is None else conn.status == "connected"
    connection = "no connection yet" if conn is None else conn.describe(now)
    cmd = _command(state)
    flag = (lambda f: cmd.value(f)) if cmd is not None else (lambda f: None)
    tp = _int(flag("--tp-size"))
    nnodes, rank = _int(flag("--nnodes")), _int(flag("--node-rank"))
    if cmd is not None and tp is None:
        tp = 1  # SGLang's default
    server = state.data("server") if state is not None else None
    log = state.data("log") if state is not None else None
    download, complete = _download(state)
    report = state.data("service") if state is not None else None
    side = getattr(report, "new", None)
    info = getattr(getattr(server, "http", None), "server_info", None) or {}
    init = node_init(state.log_lines if state is not None else ())
    version = (probe.sglang_version if probe is not None else None) or info.get("version")
    return NodeView(
        key=node.key, label=node.label, host=node.profile.host or node.profile.name, role=node.role,
        node_rank=node.node_rank, reachable=reachable, connection=connection,
        gpus=state.data("gpu") if state is not None else None,
        expected_ranks=expected_ranks(tp, nnodes, rank) if cmd is not None else None,
        argv_nnodes=nnodes, argv_node_rank=rank,
        dist_init_addr=(v if isinstance(v := flag("--dist-init-addr"), str) else None),
        init=init,
        server=(f"{server.status}: {server.reason}" if server is not None else None),
        # Ready: its ServerStatus says so, or it answers (/health_generate in its HttpFacts, or
        # /health to the node's own probe) after this launch's ready line: the ServerStatus follows
        # the profile's unit, and after a rollback the old unit serves on the port. The router logs
        # no SGLang boot: it is up when it answers.
        server_ready=getattr(server, "status", None) == "ready" or (
            (getattr(getattr(server, "http", None), "health_ok", None) is True
             or (probe is not None and probe.health == 200))
            and (node.role == "router" or init.fired_up)),
        download=download, download_complete=complete, version=version,
        skew_s=probe.clock_skew_s if probe is not None else None,
        last_line_at_s=getattr(log, "last_line_at_s", None),
        unit_active=getattr(side, "active_state", None),
    )


# -- the one status --------------------------------------------------------------------------------
def _silence(n: NodeView, now_s: float) -> str:
    if n.reachable is False:
        return f"unreachable over SSH: {n.connection}"
    if n.last_line_at_s is None:
        return "no line from it yet"
    return f"no line from it for {max(0.0, now_s - n.last_line_at_s):.0f} s"


def group_status(nodes: tuple[NodeView, ...], now_s: float) -> DeploymentStatus:
    """One SGLang server over its nodes: ready only when rank 0 answers and every node's ranks are up."""
    head = next((n for n in nodes if n.node_rank == 0), None)
    if head is None:
        return DeploymentStatus("unknown", "no node of rank 0 in the deployment")
    for n in nodes:
        if n.init.failed:
            return DeploymentStatus("failed", f"{n.label} failed: {n.init.failed}")
    if len(nodes) == 1:
        if head.reachable is False:
            return DeploymentStatus("unknown", f"{head.label} unreachable over SSH: {head.connection}")
        if head.server_ready:
            return DeploymentStatus("ready", f"{head.label} answers")
        return DeploymentStatus("starting" if head.init.launched else "unknown",
                                f"{head.label}: {head.server or 'no server status yet'}")
    unreachable = [n for n in nodes if n.reachable is False]
    waiting_at_init = head.init.launched and _covers(head.init.ranks_begun, head.expected_ranks) \
        and not _covers(head.init.ranks_ended, head.expected_ranks)
    if waiting_at_init:
        missing = [n for n in nodes if n.node_rank != 0
                   and not (n.init.launched and _covers(n.init.ranks_begun, n.expected_ranks))]
        if missing:
            named = "; ".join(f"{n.label} ({_silence(n, now_s)})" for n in missing)
            return DeploymentStatus("waiting", f"waiting for {named} at distributed init")
        return DeploymentStatus("starting", "every node has joined distributed init; rank 0 has not ended it yet")
    if unreachable:
        n = unreachable[0]
        return DeploymentStatus("unknown", f"{n.label} unreachable over SSH ({n.connection}): "
                                "whether its ranks are up is not known")
    not_up = [n for n in nodes if n.node_rank != 0
              and not (_covers(n.init.ranks_ended, n.expected_ranks) and n.init.dummy_health)]
    if head.server_ready and head.init.launched and not head.init.fired_up:
        # its server reading is older than this launch (the previous server's), or warming up
        return DeploymentStatus("starting", f"{head.label}: launched, its ready line not logged yet")
    if head.server_ready and not not_up:
        return DeploymentStatus("ready", f"rank 0 answers and the ranks of all {len(nodes)} nodes are up")
    if head.server_ready and not_up:
        n = not_up[0]
        return DeploymentStatus("starting", f"rank 0 answers but {n.label}'s ranks are not up "
                                f"({_silence(n, now_s)})")
    if not head.init.launched:
        return DeploymentStatus("unknown", f"{head.label}: no launch in its log ({head.server or 'no server status'})")
    return DeploymentStatus("starting", f"{head.label}: {head.server or 'starting'}")


def deployment_status(d: Deployment, nodes: tuple[NodeView, ...], now_s: float) -> DeploymentStatus:
    by_key = {n.key: n for n in nodes}
    parts: list[tuple[str, DeploymentStatus]] = []
    for role, members in d.groups:
        parts.append((role, group_status(tuple(by_key[m.key] for m in members), now_s)))
    if d.kind == "multinode":
        return parts[0][1]
    router = by_key.get("router")
    order = ("failed", "waiting", "unknown", "starting")
    for want in order:
        for role, st in parts:
            if st.status == want:
                return DeploymentStatus(want, f"{role}: {st.reason}")
    if router is not None:
        if router.reachable is False:
            return DeploymentStatus("unknown", f"router unreachable over SSH: {router.connection}")
        if not router.server_ready:
            return DeploymentStatus("starting", f"prefill and decode are ready; router: "
                                    f"{router.server or 'no status yet'}")
    return DeploymentStatus("ready", "prefill and decode are ready" + (" behind the router" if router else ""))


# -- faults ----------------------------------------------------------------------------------------
def faults(d: Deployment, nodes: tuple[NodeView, ...], probes: Mapping[str, NodeProbe]) -> tuple[str, ...]:
    out: list[str] = []
    for n in nodes:
        if n.reachable is False:
            out.append(f"{n.label} ({n.host}) unreachable over SSH: {n.connection}")
        p = probes.get(n.key)
        if p is not None and p.error:
            out.append(f"{n.label} ({n.host}): the probe failed: {p.error}")
    versions = {n.label: n.version for n in nodes if n.version and n.role != "router"}
    if len(set(versions.values())) > 1:
        said = ", ".join(f"{label} {v}" for label, v in versions.items())
        out.append(f"the nodes run different SGLang versions ({said}): every node must run the same")
    for _role, members in d.groups:
        group = [n for n in nodes if n.key in {m.key for m in members}]
        if len(group) < 2:
            continue
        resolved = {n.label: probes[n.key].resolves_to for n in group
                    if n.key in probes and probes[n.key].resolves_to}
        addr = next((n.dist_init_addr for n in group if n.dist_init_addr), None)
        if len(set(resolved.values())) > 1:
            said = ", ".join(f"{v} on {label}" for label, v in resolved.items())
            out.append(f"--dist-init-addr {addr} resolves to a different host on each node ({said})")
        for n in group:
            p = probes.get(n.key)
            if p is None:
                continue
            if p.resolve_error:
                out.append(f"--dist-init-addr {addr} does not resolve on {n.label}: {p.resolve_error}")
            if n.node_rank == 0 and p.address_is_local is False:
                out.append(f"--dist-init-addr {addr} resolves to {p.resolves_to} on {n.label}, "
                           f"which is not {n.label}'s own address: rank 0 hosts the rendezvous there")
            if p.tcp and p.tcp.startswith("error"):
                out.append(f"--dist-init-addr {addr} is not reachable from {n.label}: {p.tcp[7:]}")
    return tuple(out)


# -- the timeline ----------------------------------------------------------------------------------
def _naive_epoch(ts: str | None) -> float | None:
    if not ts:
        return None
    for fmt in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S"):
        try:
            dt = datetime.strptime(ts, fmt)
        except ValueError:
            continue
        return calendar.timegm(dt.timetuple()) + dt.microsecond / 1e6
    return None


def clock_label(probe: NodeProbe | None) -> str:
    if probe is None or probe.clock_skew_s is None:
        return "clock not measured"
    if abs(probe.clock_skew_s) >= SKEW_LABEL_S:
        return f"clock {probe.clock_skew_s:+.1f} s"
    return ""


def timeline(d: Deployment, states: Mapping[str, Any], probes: Mapping[str, NodeProbe],
             limit: int = 2000) -> tuple[TimelineLine, ...]:
    """Every node's log lines as one timeline, each labelled by node and rank, ordered by the host's
    time of each line (journald's, Docker's: `LogEvent.at_s`) minus the node's measured skew, else, for
    a file's line, its own stamp minus the measured offset (zone and skew). A node whose clock was not
    measured keeps its own stamps and says so on every line; a line without a stamp (torch's
    gloo lines, a traceback) stays after its node's previous line."""
    keyed: list[tuple[float, int, int, TimelineLine]] = []
    for order, node in enumerate(d.nodes):
        state = states.get(node.key)
        if state is None:
            continue
        probe = probes.get(node.key)
        skew = probe.clock_skew_s if probe is not None else None
        offset = None
        if skew is not None and probe is not None and probe.utc_offset_s is not None:
            offset = probe.utc_offset_s + skew
        label = clock_label(probe)
        last: float | None = None
        last_known = False
        for i, e in enumerate(list(state.log_lines)[-limit:]):
            if e.at_s is not None:
                # the host's time of the line (journald's µs, Docker's ns): an epoch on the node's
                # clock, so only its skew is taken off; its zone and the stamp's whole second are not needed
                at = e.at_s - skew if skew is not None else e.at_s
                known = skew is not None
            else:
                own = _naive_epoch(e.ts)
                at = (own - offset) if (own is not None and offset is not None) else own
                known = offset is not None and own is not None
            if at is None:
                at, known = last, last_known
            last, last_known = at, known
            who = f"{node.label} {e.ranks}".strip()
            line = TimelineLine(at if known else None, node.key, who, message(e), e.severity, label)
            keyed.append((at if at is not None else float("-inf"), order, i, line))
    keyed.sort(key=lambda k: (k[0], k[1], k[2]))
    return tuple(k[3] for k in keyed[-limit:])


def derive(d: Deployment, states: Mapping[str, Any], probes: Mapping[str, NodeProbe] | None = None,
           now_s: float | None = None) -> DeploymentView:
    probes = probes or {}
    nodes = tuple(node_view(n, states.get(n.key), probes.get(n.key)) for n in d.nodes)
    if now_s is None:
        first = next((s for s in states.values() if s is not None), None)

        now_s = first.now() if first is not None else time.time()
    return DeploymentView(d.name, d.kind, nodes, deployment_status(d, nodes, now_s),
                          timeline(d, states, probes), faults(d, nodes, probes))
