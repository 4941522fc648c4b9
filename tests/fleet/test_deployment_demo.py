"""The deployment demo's scenarios (issue 37), watched through the real per-node path (SSH to each
simulated host, one HostState each): two nodes over --nnodes 2, where node 1's download is
incomplete, so rank 0 waits at distributed init naming node 1 until node 1 starts and the whole
deployment is ready; and a prefill/decode pair behind the router."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests.kit.deploy import simulated_deployment, until




@pytest.mark.timeout(240)
def test_the_multinode_demo_waits_for_node_one_then_is_ready(tmp_path: Path) -> None:
    async def run() -> None:
        async with simulated_deployment(tmp_path, "multinode", "big") as (sim, watch):
            show = lambda: (watch.view().status, watch.checks())  # noqa: E731
            await until(lambda: any(c.name == "download" and c.node == "node 1" and c.severity == "error"
                                    for c in watch.checks()), 60, "node 1's incomplete download", show)
            await until(lambda: watch.view().status.status == "waiting", 90, "rank 0 waiting", show)
            reason = watch.view().status.reason
            assert reason.startswith("waiting for node 1 (") and reason.endswith(") at distributed init"), reason
            await until(lambda: watch.view().status.status == "ready", 120, "the deployment ready", show)
            view = watch.view()
            labels = {line.label for line in view.timeline}
            assert "node 0 TP0" in labels and "node 1 TP8" in labels
            await watch.probe_all()
            view = watch.view()
            assert all(n.version == "0.5.23" for n in view.nodes), [n.version for n in view.nodes]
            assert not [c for c in watch.checks() if c.severity == "error"], watch.checks()

    asyncio.run(run())


@pytest.mark.timeout(240)
def test_the_pd_demo_is_ready_with_prefill_decode_and_the_router(tmp_path: Path) -> None:
    async def run() -> None:
        async with simulated_deployment(tmp_path, "pd", "pd") as (sim, watch):
            show = lambda: ([(n.label, n.server, n.server_ready) for n in watch.view().nodes], watch.view().status)  # noqa: E731
            await until(lambda: watch.view().status.status == "ready", 120, "the pd deployment ready", show)
            assert watch.view().status.reason == "prefill and decode are ready behind the router"
            labels = {line.label for line in watch.view().timeline}
            assert {"prefill 0 TP0", "decode 0 TP0", "router"} <= labels, labels

    asyncio.run(run())
