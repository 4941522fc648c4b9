"""The swap across a deployment's nodes (issue 37): the exact commands of every node before
anything runs (the single-host swap's own stop/start actions), refused unconfirmed, under
read-only or by the gate (node 1's download incomplete); then, once the gate passes, every node
stopped and drained, rank 0 started first, ready only when the whole deployment is, a report with
each node's timeline, and a rollback of every node."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from console.config import HostProfile
from console.domain.deploy.profile import Deployment, DeploymentNode
from console.domain.deploy.swap import DeploymentSwap, format_report
from tests.kit.deploy import simulated_deployment, until


class PlanOnly:
    def __init__(self, d: Deployment) -> None:
        self.deployment = d


def two_nodes(read_only: bool = False, unit: str = "new.service") -> Deployment:
    return Deployment("big", "multinode", tuple(
        DeploymentNode(HostProfile(f"gpu-{i}", f"10.0.0.{i + 1}", unit=unit, compare_unit="old.service",
                                   read_only=read_only), "rank", i) for i in range(2)))


def test_the_preview_lists_every_nodes_exact_command_rank_zero_started_first() -> None:
    lines = DeploymentSwap(PlanOnly(two_nodes())).preview()
    assert lines == [
        "# swap of big: 2 nodes",
        "node 1: timeout -k 5 120 systemctl stop -- old.service",
        "node 1: then wait: the unit inactive and its GPU memory drained",
        "node 0: timeout -k 5 120 systemctl stop -- old.service",
        "node 0: then wait: the unit inactive and its GPU memory drained",
        "node 0: timeout -k 5 90 systemctl start -- new.service",
        "node 1: timeout -k 5 90 systemctl start -- new.service",
        "then wait: the whole deployment ready (rank 0 answers, every node's ranks up)"]


def test_a_swap_unconfirmed_read_only_or_with_a_bad_unit_runs_nothing() -> None:
    async def outcomes() -> list[str]:
        return [(await DeploymentSwap(PlanOnly(two_nodes())).run()).outcome,
                (await DeploymentSwap(PlanOnly(two_nodes(read_only=True))).run(confirmed=True)).outcome]

    unconfirmed, read_only = asyncio.run(outcomes())
    assert unconfirmed.startswith("refused: not confirmed")
    assert read_only.startswith("refused: read-only")
    with pytest.raises(ValueError, match="not a unit name"):
        DeploymentSwap(PlanOnly(two_nodes(unit="--now; reboot"))).plan()



@pytest.mark.timeout(300)
def test_the_multinode_swap_from_the_console_end_to_end_with_a_report_and_a_rollback(tmp_path: Path) -> None:
    async def run() -> None:
        async with simulated_deployment(tmp_path, "multinode", "big", operator=False) as (sim, watch):
            audit = tmp_path / "audit.jsonl"
            swap = DeploymentSwap(watch, who="ana", audit_file=audit, ready_timeout_s=120, drain_timeout_s=60)
            await until(lambda: any(c.name == "download" and c.node == "node 1" and c.severity == "error"
                                    for c in watch.checks()), 60, "node 1's incomplete download seen")
            refused = await swap.run(confirmed=True)
            assert refused.outcome.startswith("refused: the gate: download: node 1:"), refused.outcome
            assert not audit.exists()  # nothing ran
            await until(lambda: not swap.gate(), 90, "the gate passing once node 1's copy is whole")
            done = await swap.run(confirmed=True)
            assert done.outcome == "ready", (done.outcome, format_report(done, watch.deployment))
            report = format_report(done, watch.deployment)
            for node in ("node 0", "node 1"):
                section = report.split(f"## {node}")[1].split("##")[0]
                assert "GPU memory drained" in section and "distributed init ended" in section, report
            assert "ready line (node 0)" in report
            # each node's steps dated by its own observer (the swap writes no time of a step)
            assert "Stop the old service, drain GPU memory: done" in report and "(no time observed)" not in report, \
                report
            order = [line for line in audit.read_text().splitlines()]
            assert len(order) == 4 and '"action": "start sglang-qwen397b.service"' in order[2] \
                and '"node": "node 0"' in order[2], order
            back = await swap.run("rollback", confirmed=True)
            assert back.outcome == "ready", format_report(back, watch.deployment)

    asyncio.run(run())


@pytest.mark.timeout(300)
def test_the_pd_swap_from_the_console_end_to_end_with_a_report(tmp_path: Path) -> None:
    async def run() -> None:
        async with simulated_deployment(tmp_path, "pd", "pd", operator=False) as (sim, watch):
            swap = DeploymentSwap(watch, who="ana", ready_timeout_s=120, drain_timeout_s=60)
            await until(lambda: watch.view().status.status == "ready", 90, "the old pd serving")
            assert swap.preview()[1:3] == [
                "decode 0: timeout -k 5 120 systemctl stop -- sglang-decode-r1.service",
                "decode 0: then wait: the unit inactive and its GPU memory drained"]
            done = await swap.run(confirmed=True)
            report = format_report(done, watch.deployment)
            assert done.outcome == "ready", report
            assert "## prefill 0" in report and "## decode 0" in report and "router" not in report.split("\n## ")[0]
            assert "start sglang-prefill.service issued by ana" in report

    asyncio.run(run())
