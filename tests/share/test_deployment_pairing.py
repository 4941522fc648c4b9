"""Pairing on a deployment (issue 37), with the host pairing's pieces: a share server per node and a
manifest with the probes; an attached console derives the same view (status, nodes, faults, checks,
timeline) from the mirrored node states; the deployment swap's approval request reaches it, the same
user under another name cannot approve it (the share server's two-person rule by identity), an
invited person can, and the swap then runs."""

from __future__ import annotations

import asyncio
import stat
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from console.domain.deploy.probe import NodeProbe
from console.domain.deploy.swap import DeploymentSwap
from console.domain.deploy.text import format_deployment
from console.share import protocol as p
from console.share.client import AttachError, attach
from console.share.deployment import AttachedWatch, DeploymentShare, attach_deployment, node_socket
from tests.kit.deploy import NOW, FakeWatch, deployment, launch, multinode_args, node_state


def served() -> tuple[FakeWatch, DeploymentSwap]:
    d = deployment()
    d = replace(d, nodes=tuple(replace(n, profile=replace(n.profile, unit="new.service", compare_unit="old.service",
                                                          require_approval=True)) for n in d.nodes))
    states = {"node0": node_state("gpu-0", args=multinode_args(0), server="starting", gpus=(8, 143_771),
                                  lines=tuple(launch("2026-12-03 08:00:00", range(8)))),
              "node1": node_state("gpu-1", args=multinode_args(1), last_line_at_s=NOW - 40, gpus=(8, 143_771))}
    watch = FakeWatch(d, ready=False, states=states)
    watch.probes = {"node0": NodeProbe(NOW, clock_skew_s=0.1, utc_offset_s=0, sglang_version="0.5.23"),
                    "node1": NodeProbe(NOW, clock_skew_s=3.2, utc_offset_s=0, sglang_version="0.5.23")}
    return watch, DeploymentSwap(watch, who="ana", ready_timeout_s=1, drain_timeout_s=5)


async def until(predicate: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} never happened"
        await asyncio.sleep(0.02)


@pytest.mark.timeout(120)
def test_an_attached_console_shows_the_same_deployment_and_an_invited_person_approves(tmp_path: Path) -> None:
    async def run() -> None:
        watch, swap = served()
        share = await DeploymentShare(watch, swap, directory=tmp_path).start()
        attached = await attach_deployment("big", who="ana2", directory=tmp_path)
        try:
            await attached.start()
            await attached.probe_all()
            theirs = lambda: format_deployment(attached.view(NOW), attached.checks(), width=400)  # noqa: E731
            ours = format_deployment(watch.view(NOW), watch.checks(), width=400)
            await until(lambda: theirs() == ours, "the attached view equal to the serving one")
            assert "waiting for node 1" in ours and "clock +3.2 s" in ours  # the probes travelled too
            task = asyncio.ensure_future(swap.run(confirmed=True))
            await until(lambda: swap.pending(), "the approval request")
            rid = swap.pending()[0].request_id
            await until(lambda: rid in attached.states["node1"].swap.approvals, "the request mirrored")
            # the same user attached as "ana2" is still the requester (its uid): refused by the core
            reply = await attached.clients["node0"].request(p.SwapDecide, request=rid, decision="approve")
            assert reply.error == "another person must approve (the two-person rule): ana asked, and that is you"
            assert not any(h.ran for h in watch.hosts.values())
            token = share.servers["node0"].invite("ben")
            ben = await attach(node_socket("big", "node0", tmp_path), token=token)
            pump = asyncio.ensure_future(ben.pump())
            try:
                reply = await ben.request(p.SwapDecide, request=rid, decision="approve")
                assert reply.error is None, reply
                done = await asyncio.wait_for(task, 60)
            finally:
                await ben.close()
                pump.cancel()
            assert done.outcome.startswith("failed: not ready within 1 s"), done.outcome  # the fake never boots
            assert all(h.ran for h in watch.hosts.values())
            await until(lambda: any(e.note == "two-person rule" for e in attached.states["node1"].swap.audit),
                        "the decision in the attached node's audit")
            decision = next(e for e in attached.states["node1"].swap.audit if e.note == "two-person rule")
            assert decision.who == "ben (invited by ana)" and decision.command == f"approval {rid}: granted"
        finally:
            await attached.close()
            await share.close()
        with pytest.raises(AttachError, match="no deployment 'big' is served here"):
            await attach_deployment("big", directory=tmp_path)

    asyncio.run(run())


def test_a_node_of_a_served_deployment_cannot_be_swapped_alone_from_its_socket(tmp_path: Path) -> None:
    async def run() -> None:
        watch, swap = served()
        share = await DeploymentShare(watch, swap, directory=tmp_path).start()
        try:
            token = share.servers["node1"].invite("ben")
            ben = await attach(node_socket("big", "node1", tmp_path), token=token)
            pump = asyncio.ensure_future(ben.pump())
            try:
                assert share.seats["node1"].hand_over(ben.client_id) is None  # even the driver cannot
                reply = await ben.request(p.SwapPreview, key="stop_old")
                assert reply.error == ("node 1 is part of deployment big: it is swapped from the deployment's "
                                       "console"), reply
            finally:
                await ben.close()
                pump.cancel()
        finally:
            await share.close()

    asyncio.run(run())


@pytest.mark.timeout(120)
def test_an_invited_person_attaches_to_every_node_with_one_token_and_approves(tmp_path: Path) -> None:
    async def run() -> None:
        watch, swap = served()
        share = await DeploymentShare(watch, swap, directory=tmp_path, invite=("ben",)).start()
        token_file = share.token_files["ben"]
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        ben = AttachedWatch.from_manifest("big", directory=tmp_path, token=token_file.read_text().strip())
        await ben.start()
        try:
            task = asyncio.ensure_future(swap.run(confirmed=True))
            await until(lambda: swap.pending(), "the approval request")
            rid = swap.pending()[0].request_id
            await until(lambda: rid in ben.states["node1"].swap.approvals, "the request on ben's screen")
            assert await ben.approve(rid) is None
            done = await asyncio.wait_for(task, 60)
            assert done.outcome.startswith("failed: not ready within 1 s"), done.outcome
            decision = next(e for e in watch.states["node0"].swap.audit if e.note == "two-person rule")
            assert decision.who == "ben (invited by ana)"
        finally:
            await ben.close()
            await share.close()
        assert not token_file.exists()

    asyncio.run(run())
