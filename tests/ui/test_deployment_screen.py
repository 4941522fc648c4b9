"""The deployment screen (issue 37) draws the watch's derived view: the one status, the nodes, a
GPU pane per GPU node (the host screen's format_gpu_status), faults, checks and the timeline."""

from __future__ import annotations

import asyncio
from typing import Any

from textual.app import App
from textual.widgets import Static

from console.domain.deploy.checks import run_checks
from console.ui.deploy_screen import DeploymentScreen
from console.domain.deploy.state import derive
from console.domain.deploy.text import format_status_line
from tests.kit.deploy import NOW, deployment, launch, multinode_args, node_state
from tests.kit.readings import gpu, gpu_reading


class StubWatch:
    def __init__(self) -> None:
        self.deployment = deployment()
        self.states = {"node0": node_state("gpu-0", args=multinode_args(0), server="starting",
                                           lines=tuple(launch("2026-12-03 08:00:00", range(8)))),
                       "node1": node_state("gpu-1", args=multinode_args(1), last_line_at_s=NOW - 40)}
        from console.core.state import ReadingChanged

        self.states["node0"].apply(ReadingChanged("gpu-0", "gpu", gpu_reading(gpu(0, 80_000), gpu(1, 81_000))))
        self.probes: dict[str, Any] = {}

    def view(self) -> Any:
        return derive(self.deployment, self.states, self.probes, now_s=NOW)

    def checks(self) -> Any:
        return run_checks(self.deployment, self.states, self.probes)

    async def probe_all(self) -> dict[str, Any]:
        return {}


def test_the_screen_shows_the_status_the_nodes_and_each_nodes_gpus() -> None:
    watch = StubWatch()

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(DeploymentScreen(watch))

    async def run() -> None:
        async with Host().run_test(size=(160, 50)) as pilot:
            await pilot.pause()
            screen = pilot.app.screen
            status = str(screen.query_one("#deploy-status", Static).render())
            assert status.startswith(format_status_line(watch.view(), 156)[:60])
            assert "waiting for node 1" in status
            nodes = str(screen.query_one("#deploy-nodes", Static).render())
            assert "TP8–TP15 not launched" in nodes
            gpus0 = str(screen.query_one("#deploy-gpu-node0", Static).render())
            gpus1 = str(screen.query_one("#deploy-gpu-node1", Static).render())
            assert "78.1/140.4" in gpus0 and "79.1/140.4" in gpus0, gpus0
            assert "waiting for the first GPU sample" in gpus1
            timeline = str(screen.query_one("#deploy-timeline-text", Static).render())
            assert "node 0 TP7" in timeline

    asyncio.run(run())


def test_s_previews_every_nodes_commands_n_cancels_and_read_only_runs_nothing() -> None:
    from console.domain.deploy.swap import DeploymentSwap

    watch = StubWatch()
    d = watch.deployment
    watch.deployment = type(d)(d.name, d.kind, tuple(
        type(n)(n.profile.with_overrides({"unit": "new.service", "compare_unit": "old.service"}), n.role, n.node_rank)
        for n in d.nodes))
    for_real = DeploymentSwap(watch)
    screen = DeploymentScreen(watch, for_real)

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(screen)

    async def run() -> None:
        async with Host().run_test(size=(160, 50)) as pilot:
            await pilot.pause()
            await pilot.press("S")
            await pilot.pause()
            box = screen.query_one("#deploy-swap", Static)
            text = str(box.render())
            assert box.has_class("-shown") and "node 1: timeout -k 5 120 systemctl stop -- " in text
            assert "y: run these commands on the hosts" in text
            await pilot.press("n")
            await pilot.pause()
            assert not box.has_class("-shown") and screen._pending is None
            for_real.deployment = type(for_real.deployment)(
                "big", "multinode", tuple(type(n)(n.profile.with_overrides({"read_only": True}), n.role, n.node_rank)
                                          for n in for_real.deployment.nodes))
            await pilot.press("S")
            await pilot.pause()
            assert "read-only" in str(box.render()) and screen._pending is None

    asyncio.run(run())


def test_d_on_a_multinode_deployment_says_why_one_side_cannot_go_alone() -> None:
    from console.domain.deploy.swap import DeploymentSwap

    watch = StubWatch()
    screen = DeploymentScreen(watch, DeploymentSwap(watch))

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(screen)

    async def run() -> None:
        async with Host().run_test(size=(160, 50)) as pilot:
            await pilot.pause()
            await pilot.press("D")
            await pilot.pause()
            text = str(screen.query_one("#deploy-swap", Static).render())
            assert text == ("decode alone is not allowed now: one side is a prefill/decode deployment's: "
                            "a multi-node server's nodes swap together"), text
            assert screen._pending is None

    asyncio.run(run())


def test_a_shared_screen_serves_its_nodes_and_its_a_approves_only_for_another_person() -> None:
    from dataclasses import replace

    from console.domain.deploy.swap import DeploymentSwap
    from console.share.deployment import AttachedWatch, manifest_path
    from tests.kit.deploy import FakeWatch

    d = deployment()
    d = replace(d, nodes=tuple(replace(n, profile=replace(n.profile, unit="new.service", compare_unit="old.service",
                                                          require_approval=True)) for n in d.nodes))
    watch = FakeWatch(d, ready=False, states=StubWatch().states)
    swap = DeploymentSwap(watch, who="ana", ready_timeout_s=1, drain_timeout_s=5)
    screen = DeploymentScreen(watch, swap, share=True)

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(screen)

    async def until(predicate: Any, what: str) -> None:
        for _ in range(1500):
            if predicate():
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"{what} never happened")

    async def run() -> None:
        async with Host().run_test(size=(160, 50)) as pilot:
            await until(lambda: manifest_path("big").exists(), "the deployment served")
            attached = AttachedWatch.from_manifest("big", who="ana2")
            await attached.start()
            try:
                await until(lambda: format_status_line(attached.view(NOW)) == format_status_line(watch.view(NOW)),
                            "the attached console's status equal to the serving one's")
                task = asyncio.ensure_future(swap.run(confirmed=True))
                await until(lambda: swap.pending(), "the approval request")
                rid = swap.pending()[0].request_id
                await pilot.pause()
                await pilot.press("a")
                await until(lambda: "the two-person rule" in str(screen.query_one("#deploy-swap", Static).render()),
                            "the refusal on the serving screen")
                assert await attached.approve(rid) == ("another person must approve (the two-person rule): "
                                                       "ana asked, and that is you")
                assert swap.deny(rid, "ben") is None
                assert (await task).outcome == "refused: ben denied the request: nothing ran"
            finally:
                await attached.close()
                await screen.close_share()
        assert not manifest_path("big").exists()

    asyncio.run(run())
