"""The app as the operator uses it: real Textual pilot, real SSH to the simulated host."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.ui.app import ConsoleApp, HelpScreen
from console.demo.hostsim import HostSimulator
from console.host.session import HostSession
from tests.kit.hosts import wait_for
from tests.kit.screens import (
    header_text,
)


@pytest.fixture
def demo_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ConsoleApp]:
    """The app against the full demo (scenario running), with bench runs saved under tmp_path."""
    from console.demo.hostsim.process import SimulatorThread
    from console.host.session import make_transport

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    sim = SimulatorThread()
    profile = sim.start()
    try:
        yield ConsoleApp.for_session(HostSession(profile, make_transport(profile), demo=True))
    finally:
        sim.stop()


async def test_header_shows_host_connection_and_free_disk(app: ConsoleApp) -> None:
    async with app.run_test(size=(120, 40)):
        await wait_for(lambda: "gpu-sim-01" in header_text(app), 10)
        text = header_text(app)
        assert "DEMO" in text and "connected" in text
        assert "…/shared: 895 GB free" in text


async def test_number_keys_maximize_and_restore_panes(app: ConsoleApp) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        for key, pane in [("1", "gpu"), ("4", "log"), ("5", "bench")]:
            await pilot.press(key)
            assert app.screen.maximized is app.pane(pane)
            await pilot.press(key)
            assert app.screen.maximized is None
        await pilot.press("2", "escape")
        assert app.screen.maximized is None


async def test_help_opens_and_closes(app: ConsoleApp) -> None:
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_ctrl_s_saves_a_screenshot(app: ConsoleApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Into the data dir, never the working directory (a walk left 8 SVGs in the repo's screenshots/)."""
    import os

    monkeypatch.chdir(tmp_path)
    (tmp_path / "screenshots").mkdir()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+s")
        await pilot.pause()
    assert not list(tmp_path.rglob("*.svg"))
    shots = list((Path(os.environ["XDG_DATA_HOME"]) / "gpuconsole" / "screenshots").glob("gpuconsole-*.svg"))
    assert len(shots) == 1 and shots[0].read_text().startswith("<svg")


async def test_a_lost_connection_shows_in_the_header_and_recovers(app: ConsoleApp, sim: HostSimulator) -> None:
    async with app.run_test(size=(120, 40)):
        await wait_for(lambda: "gpu-sim-01" in header_text(app), 10)
        for conn in list(sim.open_connections):
            conn.close()
        await wait_for(lambda: "reconnecting" in header_text(app), 5)
        await wait_for(lambda: "● connected" in header_text(app), 10)


async def test_the_demo_runs_a_benchmark_from_the_pane_and_saves_it(demo_app: ConsoleApp, tmp_path: Path) -> None:
    app = demo_app
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: "gpu-sim-01" in header_text(app), 10)
        # The run is saved with the hash of the serving unit's flags: read once the unit has been (a run
        # that ends before the service source's first read is saved with none, truthfully).
        await wait_for(lambda: (r := app.state.data("service")) is not None and r.new.command is not None, 30)
        app.query_one("#bench-pane").focus()
        await pilot.pause()
        app.start_bench("quick", plan=[(2, 4, 16, 16)])
        await wait_for(lambda: bool(app.state.bench.results) and app.state.bench.live is None, 30)
        result = app.state.bench.results[0]
        assert result["completed"] == 4 and result["model"] == "qwen3.5-397b"
        await wait_for(lambda: "req/s" in (shot := app.export_screenshot()) and "out&#160;tok/s" in shot, 30, 0.2)
    # A demo keeps its own runs: the user's bench.jsonl is not touched.
    assert not (tmp_path / "gpuconsole" / "bench.jsonl").exists()
    saved = (tmp_path / "gpuconsole" / "demo-bench.jsonl").read_text().splitlines()
    assert len(saved) == 1 and json.loads(saved[0])["flags_hash"]


async def test_the_fit_view_opens_from_the_diff_pane(demo_app: ConsoleApp) -> None:
    from console.ui.panes.fit import FitScreen

    app = demo_app
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: app.pane("service").reading is not None and app.pane("gpu").reading is not None
                       and app.pane("service").reading.data is not None
                       and app.pane("service").reading.data.model_config is not None, 15)
        app.pane("service").focus()
        await pilot.press("f")
        await pilot.pause()
        assert isinstance(app.screen, FitScreen)
        text = app.screen.text.plain
        assert "FITS" in text and "GDN state slots" in text and "binding constraint" in text
