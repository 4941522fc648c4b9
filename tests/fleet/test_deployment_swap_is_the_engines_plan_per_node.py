"""The deployment swap as the swap engine's plan, one per node (issue 33): each node's HostState holds
the plan of the engine's steps (the path × runtime table's restart row on a systemd unit), the steps a
deployment swap does not take skipped with their reason, never left pending; a node's failing step
stops the plan (no node starts) and the rollback undoes every node that ran, rank 0 started first,
a node where nothing ran skipped with why. The swap writes the steps' intent and words, never their
times (those are the node's observer's)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from console.core.derive import swap_plan
from console.domain.deploy.node_steps import NOTHING_RAN, SKIPS
from console.domain.deploy.swap import DeploymentSwap, format_report
from tests.kit.deploy import three_nodes

STOP_OLD = "systemctl stop -- old.service"


def test_each_nodes_plan_is_the_tables_restart_row_with_what_it_skips_said_never_pending(tmp_path: Path) -> None:
    watch = three_nodes()
    done = asyncio.run(DeploymentSwap(watch, who="ana", audit_file=tmp_path / "audit.jsonl").run(confirmed=True))
    assert done.outcome == "ready", format_report(done, watch.deployment)
    for key, state in watch.states.items():
        steps = state.swap.steps
        row = swap_plan.steps_of("restart", "systemd", verify_sha=True)
        assert {k: steps[k].state for k in row} == {
            "download": "skipped", "verify": "skipped", "install": "skipped", "preflight": "skipped",
            "stop_old": "done", "start_new": "done", "benchmark": "skipped"}, key
        for k, why in SKIPS.items():
            assert steps[k].detail == why and steps[k].who is None
        assert not [k for k in row if steps[k].state == "pending"]
        # the engine's stop: the command, then the GPU drain read after it
        assert steps["stop_old"].detail.startswith("old.service stopped; GPU memory drained (0 MiB in use on 8 GPUs)")
        assert steps["stop_old"].who == "ana" and steps["stop_old"].commands[0].endswith(STOP_OLD)
        # the swap writes intent and words, not times: with no observer in the state, none is written
        assert steps["stop_old"].started_at_s is None and steps["stop_old"].ended_at_s is None
    assert "(no time observed)  Stop the old service, drain GPU memory: done: old.service stopped; GPU memory drained" \
        in format_report(done, watch.deployment)


def test_a_nodes_failing_stop_stops_the_plan_and_no_node_starts(tmp_path: Path) -> None:
    watch = three_nodes()
    watch.hosts["node1"].fail["systemctl stop"] = 1
    audit = tmp_path / "audit.jsonl"
    failed = asyncio.run(DeploymentSwap(watch, who="ana", audit_file=audit).run(confirmed=True))
    assert failed.outcome.startswith("failed: node 1: Stop the old service, drain GPU memory: systemctl stop old.service exited 1"), \
        failed.outcome
    assert not any("systemctl start" in c for h in watch.hosts.values() for c in h.ran)
    node1, node0 = watch.states["node1"].swap.steps, watch.states["node0"].swap.steps
    assert node1["stop_old"].state == "failed" and "rollback is offered" in node1["stop_old"].detail
    assert node0["stop_old"].state == "done"  # its stop ran and drained
    assert node0["start_new"].state == "refused" and "the plan stopped (node 1: Stop the old service" in \
        node0["start_new"].detail
    audited = [(x["node"], x["action"]) for x in map(json.loads, audit.read_text().splitlines())]
    assert ("node 1", "stop old.service") in audited and {a for _, a in audited} == {"stop old.service"}
    node2 = watch.states["node2"].swap.steps  # stopped, or not begun when the plan stopped: never started
    assert node2["stop_old"].state in ("done", "refused") and node2["start_new"].state == "refused"


def test_the_rollback_undoes_every_node_that_ran_rank_zero_started_first(tmp_path: Path) -> None:
    watch = three_nodes()
    watch.hosts["node2"] = None  # type: ignore[assignment]  # node 2's connection is gone: nothing reaches it
    audit = tmp_path / "audit.jsonl"
    swap = DeploymentSwap(watch, who="ana", audit_file=audit)

    async def run() -> tuple[str, str, list[str]]:
        failed = await swap.run(confirmed=True)
        preview = swap.preview("rollback")
        back = await swap.run("rollback", confirmed=True)
        return failed.outcome, back.outcome, preview

    failed, back, preview = asyncio.run(run())
    assert failed.startswith("failed: node 2: Stop the old service, drain GPU memory: stop old.service not sent: node 2 has no "
                             "connection"), failed
    assert back == "ready", back
    assert f"# node 2: not rolled back: {NOTHING_RAN}" in preview
    assert [line for line in preview if "systemctl" in line] == [
        "node 1: timeout -k 5 120 systemctl stop -- new.service",
        "node 0: timeout -k 5 120 systemctl stop -- new.service",
        "node 0: timeout -k 5 90 systemctl start -- old.service",
        "node 1: timeout -k 5 90 systemctl start -- old.service"]
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    rolled = [(x["node"], x["action"]) for x in lines if x["status"] is not None][2:]
    assert sorted(rolled[:2]) == [("node 0", "stop new.service"), ("node 1", "stop new.service")]
    assert rolled[2:] == [("node 0", "start old.service"), ("node 1", "start old.service")]
    for key in ("node0", "node1"):
        assert watch.states[key].swap.steps["rollback"].state == "done"
    skipped = watch.states["node2"].swap.steps["rollback"]
    assert (skipped.state, skipped.detail) == ("skipped", NOTHING_RAN)


def test_a_confirmation_runs_once_and_an_unknown_one_runs_nothing() -> None:
    watch = three_nodes()
    swap = DeploymentSwap(watch, who="ana")

    async def run() -> tuple[str, str, str, list[str]]:
        pid, lines = swap.ask()
        first = await swap.confirm(pid)
        again = await swap.confirm(pid)
        unknown = await swap.confirm("0123456789ab")
        return first.outcome, again.outcome, unknown.outcome, lines

    first, again, unknown, lines = asyncio.run(run())
    assert lines == swap.preview()  # what the confirmation showed is the plan's commands
    assert first == "ready" and again == "refused: already confirmed: it runs once"
    assert unknown == "refused: no such confirmation (open the preview again)"
    assert sum("systemctl start" in c for h in watch.hosts.values() for c in h.ran) == 3  # each node started once
