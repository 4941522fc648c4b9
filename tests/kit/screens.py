"""Shared test kit: moved from test_host_screen.py so that no test imports another test module."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from console.ui import host_screen
from console.ui.app import ConsoleApp
from console.config import HostProfile
from console.core.state import HostInfo, HostState
from console.demo.hostsim import HostSimulator
from console.ui.panes.header import HostHeader
from console.host.session import HostSession
from console.host.transport.ssh import SshTransport
from tests.kit.clocks import Clock
from tests.kit.hosts import sim_options


def screen_text(app: object) -> str:
    """The screen as plain text, the way export_screenshot renders it."""
    width, height = app.size  # type: ignore[attr-defined]
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, color_system="truecolor",
                      record=True, legacy_windows=False, safe_box=False)
    render = app.screen._compositor.render_update(  # type: ignore[attr-defined]
        full=True, screen_stack=app._background_screens, simplify=True)  # type: ignore[attr-defined]
    console.print(render)
    return console.export_text()


def header_text(app: ConsoleApp) -> str:
    return str(app.query_one(HostHeader).render())


@pytest.fixture
def app(sim: HostSimulator) -> ConsoleApp:
    profile = HostProfile(name="sim", host="127.0.0.1", port=sim.port,
                          disk_paths=(sim.host_path("/shared"),))
    return ConsoleApp.for_session(HostSession(profile, SshTransport(sim_options(sim)), demo=True))


def offline_state(host: str = "gpu-01") -> HostState:
    state = HostState(host, label=host)
    state.apply(HostInfo(host, host, log_label="journal: sglang.service"))
    return state


def gpu_pane_on_clocks(monkeypatch: pytest.MonkeyPatch) -> tuple[Clock, Clock, HostState, ConsoleApp]:
    """A console on one host ("gpu-01", no session) whose two clocks the test moves by hand: the
    flush cadence's (the host screen's monotonic clock) and the host's (the state's, the samples'
    times). Returns (flush clock, host clock, the state, the app, not yet run)."""
    flush_clock = Clock(5_000.0)
    monkeypatch.setattr(host_screen, "_monotonic", flush_clock, raising=False)
    clock = Clock(1_000_000.0)
    state = HostState("gpu-01", label="gpu-01", clock=clock)
    return flush_clock, clock, state, ConsoleApp(state, None)
