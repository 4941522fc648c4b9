"""The deployment as text (issue 37): pure `format_*` functions over a DeploymentView and its
checks, shared by the screen (console/ui/deploy_screen.py) and `gpuconsole --deployment NAME --once`.
Plain strings: the screen wraps them in rich Text (never markup), so host strings need no escaping.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from console.domain.deploy.checks import Check
from console.domain.deploy.state import DeploymentView, NodeView, TimelineLine

MARK = {"ok": "✓", "error": "✗", "unknown": "?"}


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def format_status_line(view: DeploymentView, width: int = 120) -> str:
    kind = "over --nnodes" if view.kind == "multinode" else "prefill/decode"
    head = f"{view.name} ({kind}, {len(view.nodes)} nodes) · {view.status.status.upper()}: {view.status.reason}"
    return _fit(head, width)


def gpu_summary(n: NodeView) -> str:
    g = n.gpus
    if g is None or not getattr(g, "gpus", None):
        return "GPUs: not read yet"
    used = [d.memory_used_mib for d in g.gpus if d.memory_used_mib is not None]
    total = [d.memory_total_mib for d in g.gpus if d.memory_total_mib is not None]
    if not used or not total:
        return f"{len(g.gpus)} GPUs, memory unknown"
    return f"{len(g.gpus)} GPUs, {sum(used) / 1024:.0f}/{sum(total) / 1024:.0f} GiB used"


def ranks_summary(n: NodeView) -> str:
    want = n.expected_ranks
    if n.role == "router":
        return ""
    if want is None:
        return "ranks: unit not read"
    shown = f"{want[0]}–{want[-1]}" if len(want) > 1 else (want[0] or "TP0")
    ended = sum(1 for r in want if any(r in e.split() or (r == "" and e == "") for e in n.init.ranks_ended))
    begun = sum(1 for r in want if any(r in e.split() or (r == "" and e == "") for e in n.init.ranks_begun))
    if n.init.failed:
        state = "failed"
    elif not n.init.launched:
        state = "not launched"
    elif ended == len(want):
        state = "up" if (n.node_rank == 0 or n.init.dummy_health or n.role != "rank") else "initialized"
    elif begun:
        state = f"at distributed init ({begun}/{len(want)} begun, {ended} ended)"
    else:
        state = "launched"
    return f"{shown} {state}"


def clock_summary(n: NodeView) -> str:
    if n.skew_s is None:
        return "clock not measured"
    return f"clock {n.skew_s:+.1f} s" if abs(n.skew_s) >= 1.0 else "clock in step"


def format_nodes(view: DeploymentView, width: int = 120) -> list[str]:
    """One line per node: who, reach, GPUs, ranks, server, download, version, clock."""
    out = []
    for n in view.nodes:
        reach = "connected" if n.reachable else ("UNREACHABLE: " + n.connection if n.reachable is False
                                                 else n.connection)
        parts = [f"{n.label:<10}", n.host, reach, gpu_summary(n)]
        if (r := ranks_summary(n)):
            parts.append(r)
        if n.role == "rank" and n.node_rank > 0 and (n.argv_nnodes or 1) > 1:
            # a node of rank >= 1 serves no API, only SGLang's dummy health server
            parts.append("API: none (rank >= 1), dummy health server " + ("up" if n.init.dummy_health else "not up"))
        else:
            parts.append(f"server: {n.server or 'unknown'}")
        if n.role != "router":
            parts.append(f"download: {n.download}")
        parts.append(f"SGLang {n.version}" if n.version else "version unknown")
        parts.append(clock_summary(n))
        out.append(_fit(" · ".join(parts), width))
    return out


def _clock(at_s: float | None) -> str:
    if at_s is None:
        return "  ?     "
    return time.strftime("%H:%M:%S", time.gmtime(at_s))


def format_timeline(lines: Sequence[TimelineLine], height: int = 20, width: int = 120) -> list[str]:
    """The newest `height` lines of the one timeline: console-clock time (UTC), node and rank, text,
    and the node's clock note where its clock is off or not measured."""
    out = []
    for line in list(lines)[-height:]:
        note = f"  [{line.clock}]" if line.clock else ""
        out.append(_fit(f"{_clock(line.at_s)}  {line.label:<14} {line.text}{note}", width))
    return out


def format_faults(view: DeploymentView, width: int = 120) -> list[str]:
    return [_fit(f"✗ {f}", width) for f in view.faults] or ["no fault seen"]


def format_checks(checks: Sequence[Check], width: int = 120) -> list[str]:
    order = {"error": 0, "unknown": 1, "ok": 2}
    return [_fit(f"{MARK[c.severity]} {c.name:<10} {c.message}", width)
            for c in sorted(checks, key=lambda c: (order[c.severity], c.name))]


def format_fleet_row(view: DeploymentView, width: int = 120) -> str:
    """The deployment as one row of the fleet, with its nodes: `big  READY  node 0 ✓ · node 1 ✓`."""
    cells = []
    for n in view.nodes:
        bad = n.reachable is False or n.init.failed
        ok = n.server_ready if n.node_rank == 0 or n.role != "rank" else "up" in ranks_summary(n).split()
        cells.append(f"{n.label} {'✗' if bad else '✓' if ok else '…'}")
    return _fit(f"{view.name:<16} {view.status.status.upper():<9} " + " · ".join(cells) +
                f"  {view.status.reason}", width)


def format_deployment(view: DeploymentView, checks: Sequence[Check], *, width: int = 120,
                      timeline_lines: int = 20) -> str:
    """Everything, as the CLI prints it once."""
    parts = [format_status_line(view, width), "", "nodes:", *("  " + s for s in format_nodes(view, width - 2)),
             "", "faults:", *("  " + s for s in format_faults(view, width - 2)),
             "", "checks:", *("  " + s for s in format_checks(checks, width - 2)),
             "", "timeline (console clock, UTC):",
             *("  " + s for s in format_timeline(view.timeline, timeline_lines, width - 2))]
    return "\n".join(parts)
