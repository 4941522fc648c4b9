"""The deployment screen (issue 37) draws the watch's derived view: the one status, the nodes, a
GPU pane per GPU node (the host screen's format_gpu_status), faults, checks and the timeline."""

from __future__ import annotations

import asyncio
from typing import Any

from textual.app import App
from textual.widgets import Static

from console.deploy.checks import run_checks
from console.deploy.screen import DeploymentScreen
from console.deploy.state import derive
from console.deploy.text import format_status_line
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
