"""The deployment demo's two scenarios swapped from the console's own screen, end to end (issue 37):
the app `gpuconsole --demo-deployment multinode|pd` opens (the simulated hosts on their own thread, as
the demo runs them), S shows every node's commands, y runs them, the screen ends with the report (each
node's timeline), and the session's recording replays to the same report."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from console.config import load_config
from console.demo.hostsim.deployment import DeploymentSimThread
from console.domain.deploy.recording import ReplayWatch
from console.domain.deploy.watch import DeploymentWatch
from console.ui.app import ConsoleApp


async def until(predicate: Any, timeout: float, what: str, show: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} never happened: {show() if show else ''}"
        await asyncio.sleep(0.2)


def swapped_from_the_screen(kind: str, tmp_path: Path) -> tuple[str, str]:
    """Open the demo's app, S then y once the gate passes; (the screen's report, the replayed one)."""
    sim = DeploymentSimThread(kind, speed=4.0, operator=False)
    started = sim.start()
    try:
        cfg = tmp_path / "config.toml"
        cfg.write_text(started.config_toml("big"))
        watch = DeploymentWatch(load_config(cfg).deployment("big"), demo=True)
        record = tmp_path / "recording"
        app = ConsoleApp.for_deployment(watch, demo=True, record=True, record_dir=record)

        async def run() -> str:
            async with app.run_test(size=(200, 60)) as pilot:
                screen: Any = app.screen
                box = lambda: str(screen.query_one("#deploy-swap", Static).render())  # noqa: E731
                await until(lambda: not screen.swap.gate(), 150, "the gate passing",
                            lambda: (screen.swap.gate(), watch.view().status))
                await pilot.press("S")
                await until(lambda: "y: run these commands on the hosts" in box(), 30, "the preview", box)
                assert "systemctl stop -- " in box() and "systemctl start -- " in box()
                await pilot.press("y")
                await until(lambda: box().startswith("# swap of big: "), 240, "the report", box)
                return box()

        report = asyncio.run(run())
        replay = ReplayWatch(record)
        replay.apply_until(10_000.0)
        return report, replay.report() or ""
    finally:
        sim.stop()


@pytest.mark.timeout(420)
def test_the_two_node_demo_swapped_from_the_screen_with_its_report(tmp_path: Path) -> None:
    report, replayed = swapped_from_the_screen("multinode", tmp_path)
    assert report.startswith("# swap of big: ready"), report
    for node in ("node 0", "node 1"):
        section = report.split(f"## {node}")[1].split("##")[0]
        assert "GPU memory drained" in section and "distributed init ended" in section, report
    assert "ready line (node 0)" in report
    assert replayed == report


@pytest.mark.timeout(420)
def test_the_pd_demo_swapped_from_the_screen_with_its_report_and_the_routers_view(tmp_path: Path) -> None:
    report, replayed = swapped_from_the_screen("pd", tmp_path)
    assert report.startswith("# swap of big: ready"), report
    assert "## prefill 0" in report and "## decode 0" in report and "## router" in report
    assert "start sglang-prefill.service issued by" in report
    assert "router: prefill http://127.0.0.1:" in report.split("## router")[1]
    assert replayed == report
