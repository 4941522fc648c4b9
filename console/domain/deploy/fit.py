"""The fit per node (issue 37): the single host's fit planner (console/domain/analysis/fit.py, SGLang's
own sizing per GPU rank) applied to each node of a deployment, with that node's own GPUs, its own
unit's flags, its own copy of the model's config.json and its own download's size.

A multi-node server splits TP × PP over its nodes: SGLang gives each node `tp_size * pp_size //
nnodes` ranks, one per GPU (tests/data/sglang_multinode_real.json, tp_ranks_per_node). What each
rank holds does not depend on the node count (the weights are cut 1/(TP×PP), the KV heads 1/TP;
with --ep-size the experts are spread over the EP ranks inside the TP group instead of being cut,
the same bytes per GPU), so the planner's per-GPU figures hold on every node; what a node adds is
whether it has that many GPUs and whether its GPUs' memory holds a rank. Prefill and decode are
separate servers: each side is planned with its own flags, node by node.

Nothing is guessed: a node whose unit, GPUs or config.json is not read yet is `unknown`, and a
model whose weights' size is not known is the planner's `cannot tell`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from console.domain.analysis.fit import FitResult, inputs_from_command, plan_fit
from console.domain.deploy.profile import DeploymentNode


@dataclass(frozen=True, slots=True)
class NodeFit:
    node: str  # the node's key
    label: str  # "node 1", "prefill 0"
    severity: str  # "ok", "error" or "unknown"
    message: str  # "node 1: 8 × 140 GiB, TP8–TP15 here, weights 14.1 GiB/GPU of … : fits"
    gpu_count: int | None = None  # the node's healthy GPUs (nvidia-smi's rows without an error)
    gpu_mem_gib: float | None = None  # the smallest of them (every rank must fit on each)
    ranks_here: int | None = None  # TP × PP // --nnodes: the GPUs this node's server needs
    result: FitResult | None = None  # the planner's figures per GPU rank (None: not planned)


def _int(cmd: Any, flag: str, default: int | None = None) -> int | None:
    v = cmd.value(flag)
    if isinstance(v, str) and v.strip().isdigit():
        return int(v)
    return default


def _ranks(cmd: Any, first: int, count: int) -> str:
    if count <= 1:
        return f"TP{first}" if _int(cmd, "--tp-size", 1) != 1 else "one rank"
    return f"TP{first}–TP{first + count - 1}"


def node_fit(node: DeploymentNode, state: Any) -> NodeFit:
    """The fit of one node's new unit on that node's GPUs."""
    label, key = node.label, node.key
    report = state.data("service") if state is not None else None
    side = getattr(report, "new", None)
    cmd = getattr(side, "command", None)
    if cmd is None:
        return NodeFit(key, label, "unknown", f"{label}: fit unknown: its unit's command line is not read yet")
    gpus = state.data("gpu")
    healthy = [g for g in (gpus.gpus if gpus is not None else ()) if g.memory_total_mib and g.lost_at_s is None]
    if not healthy:
        return NodeFit(key, label, "unknown", f"{label}: fit unknown: its GPUs are not read yet")
    count, mem = len(healthy), min(g.memory_total_mib for g in healthy) / 1024
    shape = f"{count} × {mem:.0f} GiB"
    config = getattr(report, "model_config", None)
    if config is None:
        return NodeFit(key, label, "unknown", f"{label}: {shape}; fit unknown: no config.json read from its "
                       "model directory yet", count, mem)
    tp, pp = _int(cmd, "--tp-size", 1) or 1, _int(cmd, "--pp-size", 1) or 1
    nnodes = _int(cmd, "--nnodes", 1) or 1
    rank = _int(cmd, "--node-rank", 0) or 0
    if (tp * pp) % nnodes:
        return NodeFit(key, label, "error", f"{label}: TP×PP {tp * pp} does not split over --nnodes {nnodes}: "
                       "SGLang gives each node TP×PP / nnodes ranks", count, mem)
    here = tp * pp // nnodes
    download = state.data("download")
    weights = download.bytes_total if download is not None else None
    model = str(cmd.value("--model-path") or "model").rstrip("/").rsplit("/", 1)[-1]
    # gpu_count = the whole server's ranks: the planner checks TP×PP against it; this node's own
    # share is checked below against its own GPUs
    inputs = inputs_from_command(cmd, config, weights, tp * pp, mem, model)
    try:
        result = plan_fit(inputs)
    except (ValueError, KeyError, ZeroDivisionError, TypeError) as exc:
        return NodeFit(key, label, "unknown", f"{label}: {shape}; the fit planner could not run: {exc}"[:300],
                       count, mem, here)
    ranks = _ranks(cmd, here * rank, here)
    ep = _int(cmd, "--ep-size")
    where = f"{shape}, {ranks} here" + (f" (EP{ep} inside TP{tp})" if ep and ep > 1 else "")
    if here > count:
        return NodeFit(key, label, "error", f"{label}: {shape}, needs {here} GPUs for {ranks}: does not fit "
                       f"(TP×PP {tp * pp} over {nnodes} node{'s' if nnodes > 1 else ''})", count, mem, here, result)
    allowed = result.figures.get("allowed_gib", 0.0)
    if result.fits is None:
        return NodeFit(key, label, "unknown", f"{label}: {where}; cannot tell: {result.binding_constraint}",
                       count, mem, here, result)
    if result.fits is False:
        return NodeFit(key, label, "error", f"{label}: {where}, weights {result.weights_gib:.1f} GiB/GPU: does "
                       f"not fit: {result.binding_constraint}", count, mem, here, result)
    return NodeFit(key, label, "ok", f"{label}: {where}, weights {result.weights_gib:.1f} GiB/GPU of the "
                   f"{allowed:.1f} GiB SGLang may use, {result.max_total_tokens:,} KV tokens: fits",
                   count, mem, here, result)


def deployment_fits(groups: Any, states: Any) -> list[NodeFit]:
    """Each server node's fit (`groups`: Deployment.groups; the router runs no model)."""
    return [node_fit(m, states.get(m.key)) for _role, members in groups for m in members]
