"""A deployment swap's nodes as another console left them, read back from the audit file: a console
killed after its swap reached nodes 0 and 1 (node 2's connection gone: nothing sent there) is
followed by a fresh one, whose rollback undoes nodes 0 and 1 only, as the killed one's would have,
and says where that came from. Before, a fresh console knew nothing and rolled back every node,
stopping node 2's new unit that never ran and starting its old one that never stopped."""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import replace
from pathlib import Path

from console.domain.deploy.node_steps import NOTHING_RAN
from console.domain.deploy.read_back import read_back
from console.domain.deploy.swap import DeploymentSwap
from tests.kit.deploy import FakeWatch, three_nodes


def _killed_swap(audit: Path) -> None:
    """The first console: its swap fails at node 2 (no connection), then it is gone."""
    watch = three_nodes()
    watch.hosts["node2"] = None  # type: ignore[assignment]
    failed = asyncio.run(DeploymentSwap(watch, who="ana", audit_file=audit).run(confirmed=True))
    assert failed.outcome.startswith("failed: node 2"), failed.outcome


def _rolled_back_units(watch: FakeWatch) -> dict[str, list[str]]:
    return {k: [c for c in h.ran if "systemctl st" in c] for k, h in watch.hosts.items() if h is not None}


def test_a_fresh_console_rolls_back_only_the_nodes_the_killed_one_reached(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    _killed_swap(audit)
    watch = three_nodes()
    fresh = DeploymentSwap(watch, who="bo", audit_file=audit)
    preview = fresh.preview("rollback")
    assert "# read back from the audit log: the last swap of big, by ana from another console, reached node 0, " \
           "node 1" in preview, preview
    assert f"# node 2: not rolled back: {NOTHING_RAN}" in preview
    back = asyncio.run(fresh.run("rollback", confirmed=True))
    assert back.outcome == "ready", back.outcome
    ran = _rolled_back_units(watch)
    assert ran["node2"] == [] and all(any("stop -- new.service" in c for c in ran[k]) for k in ("node0", "node1"))
    assert watch.states["node2"].swap.steps["rollback"].state == "skipped"


def test_after_the_rollback_a_third_console_has_nothing_to_roll_back(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    _killed_swap(audit)
    asyncio.run(DeploymentSwap(three_nodes(), who="bo", audit_file=audit).run("rollback", confirmed=True))
    watch = three_nodes()
    third = DeploymentSwap(watch, who="cy", audit_file=audit)
    assert "reached no node" in (third.read_back_note or "")
    done = asyncio.run(third.run("rollback", confirmed=True))
    assert done.outcome.startswith("refused"), done.outcome
    assert not any(h.ran for h in watch.hosts.values() if h is not None)


def test_an_old_or_anothers_or_a_foreign_log_is_not_read_as_this_swap(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    _killed_swap(audit)
    d = three_nodes().deployment
    assert read_back(audit, d, time.time() + 31 * 60)[0] is None  # older than 30 minutes: unknown
    assert read_back(audit, replace(d, name="other"), time.time())[0] is None  # another deployment's lines
    rows = [json.loads(x) for x in audit.read_text().splitlines()]
    audit.write_text("".join(json.dumps({**r, "at_s": "soon"}) + "\n" for r in rows) + "not json\n")
    assert read_back(audit, d, time.time())[0] is None  # lines without a time are not a run
    os.chmod(audit, 0o666)
    back, why = read_back(audit, d, time.time())
    assert back is None and why is not None and "others may write it" in why
    fresh = DeploymentSwap(three_nodes(), who="bo", audit_file=audit)
    assert fresh.read_back_note == why and any(why in line for line in fresh.preview("rollback"))
