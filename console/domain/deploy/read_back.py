"""Which nodes a deployment swap reached, read back from the audit file by a console that did not run
it (the one that did was killed, or another operator's on this machine and user): so its rollback
undoes those nodes only, as the console that ran it would, instead of every node.

Each deployment command is a line of the 0600 audit file (node_steps.audit_line): the deployment, the
node's label, what the command does ("stop OLD", "start NEW"; a rollback's "stop NEW", "start OLD"),
its exit status or the output of a command that was never sent. The deployment's last run of lines
(none older than 30 minutes, a pause of 30 minutes ending a run: the host swap's read-back rules,
console/domain/swap/audit_log.py) says, per node, whether its old unit was stopped or its new one
started and not undone by a later rollback. A node with no line in that run was not reached. No run
that recent: unknown (None), every node rolled back, as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from console.domain.deploy.profile import Deployment
from console.domain.swap.audit_log import last_run, read_rows
from console.sanitize import clean_line


@dataclass(frozen=True, slots=True)
class ReadBack:
    """What the audit file says of the deployment's last run: the nodes it left swapped (their keys),
    who ran it and when its last command was; `note`: one line for the plan."""

    swapped: frozenset[str]
    who: str
    last_at_s: float
    note: str


def _swap_words(node: object) -> tuple[set[str], set[str]]:
    profile = getattr(node, "profile", None)
    old, new = getattr(profile, "compare_unit", None), getattr(profile, "unit", None)
    return {f"stop {old}", f"start {new}"}, {f"stop {new}", f"start {old}"}


def read_back(path: Path | None, deployment: Deployment, now_s: float) -> tuple[ReadBack | None, str | None]:
    """(what the last run of `deployment`'s lines left swapped, or None when there is none recent enough;
    why the file was not read, if it was not)."""
    rows, why = read_rows(path)
    if why is not None:
        return None, why
    labels = {n.label: n for n in deployment.nodes}
    mine = [r for r in rows if isinstance(r, dict) and r.get("deployment") == deployment.name
            and r.get("node") in labels and isinstance(r.get("action"), str)
            and isinstance(r.get("at_s"), (int, float)) and not isinstance(r.get("at_s"), bool)
            and math.isfinite(r["at_s"])]
    first = last_run([float(r["at_s"]) for r in mine], now_s)
    if first is None:
        return None, None
    run = mine[first:]
    swapped: set[str] = set()
    for r in run:
        node = labels[r["node"]]
        forward, back = _swap_words(node)
        sent = not (r.get("status") is None and str(r.get("output") or "").startswith("not sent"))
        if r["action"] in forward and sent:
            swapped.add(node.key)
        elif r["action"] in back and r.get("status") == 0:
            swapped.discard(node.key)  # a rollback's command took effect: that node is back
    who = clean_line(str(run[-1].get("who") or "unknown"))[:64] or "unknown"
    names = [n.label for n in deployment.nodes if n.key in swapped]
    said = ", ".join(names) if names else "no node"
    note = (f"read back from the audit log: the last swap of {deployment.name}, by {who} from another console, "
            f"reached {said}")
    return ReadBack(frozenset(swapped), who, float(run[-1]["at_s"]), note), None


__all__ = ["ReadBack", "read_back"]
