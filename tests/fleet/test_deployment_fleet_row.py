"""The fleet shows a deployment whose hosts it holds as one row with its nodes (issue 37), derived
from the fleet's own HostStates; a deployment with a host outside the fleet is not shown."""

from __future__ import annotations

import asyncio

from textual.widgets import Static

from console.domain.deploy.fleetrows import deployment_rows
from console.ui.app import FleetApp
from tests.kit.deploy import NOW, deployment, launch, multinode_args, node_state


def fleet_states() -> dict[str, object]:
    return {"gpu-0": node_state("gpu-0", args=multinode_args(0), server="starting",
                                lines=tuple(launch("2026-12-03 08:00:00", range(8))), now=NOW),
            "gpu-1": node_state("gpu-1", args=multinode_args(1), last_line_at_s=NOW - 40, now=NOW)}


def test_a_deployment_is_one_row_with_its_nodes() -> None:
    rows = deployment_rows({"big": deployment()}, fleet_states(), width=200)
    assert rows == ["big              WAITING   node 0 … · node 1 …  "
                    "waiting for node 1 (no line from it for 40 s) at distributed init"]
    only_one = {"gpu-0": fleet_states()["gpu-0"]}
    assert deployment_rows({"big": deployment()}, only_one) == []


def test_the_fleet_screen_shows_the_deployment_row() -> None:
    states = fleet_states()

    async def run() -> None:
        app = FleetApp(list(states.values()),
                       deployment_lines=lambda: deployment_rows({"big": deployment()}, states, 150))
        async with app.run_test(size=(160, 30)) as pilot:
            await pilot.pause()
            box = pilot.app.screen.query_one("#fleet-deployments", Static)
            assert box.has_class("-shown")
            assert "big              WAITING   node 0 … · node 1 …" in str(box.render())

    asyncio.run(run())
