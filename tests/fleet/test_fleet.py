"""The fleet: many hosts over SSH (real simulated hosts), the fleet screen (a real Textual pilot),
the rows computed from HostStates, groups in the config, and the exporter's metrics."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from console.cli.main import build_parser, main
from console.config import HostProfile
from console.core.state import ConnectionChanged, HostState, ReadingChanged
from console.domain.fleet.hosts import Fleet, host_keys
from console.domain.fleet.rows import fleet_row, format_cells, matches, sort_key
from console.demo.hostsim import HostSimulator
from console.demo.hostsim.server import HostIdentity
from console.model import GpuDevice, GpuStatus, Reading
from console.host.transport.base import ConnectionState
from tests.kit.hosts import wait_for


def sim_profile(sim: HostSimulator, name: str) -> HostProfile:
    return HostProfile(name=name, host="127.0.0.1", port=sim.port, user="root", identity=str(sim.client_key_path),
                       known_hosts=str(sim.known_hosts_path), connect_timeout_s=3)


@pytest.fixture
async def two_sims(tmp_path: Path) -> AsyncIterator[list[HostSimulator]]:
    sims = [HostSimulator(tmp_path / f"h{i}", identity=HostIdentity(hostname=f"gpu-sim-{i + 1:02d}"))
            for i in range(2)]
    for sim in sims:
        await sim.start()
    try:
        yield sims
    finally:
        for sim in sims:
            await sim.stop()


@pytest.fixture
def hanging_port() -> Iterator[int]:
    """A TCP port that accepts and then says nothing (an SSH server hung before its banner)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


# -- config and command line -------------------------------------------------------------------
def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_host_may_be_repeated_and_the_last_one_is_still_host() -> None:
    args = build_parser().parse_args(["--host", "a", "--host", "b"])
    assert args.hosts == ["a", "b"] and args.host == "b"
    args = build_parser().parse_args(["--host", "a"])
    assert args.hosts == ["a"] and args.host == "a"


def test_a_group_naming_an_unknown_profile_is_one_line_and_exit_2(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path, '[profiles.a]\nhost = "127.0.0.1"\n[groups]\nh200 = ["a", "nope"]\n')
    assert main(["--config", str(config), "--group", "h200"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope" in err and "Traceback" not in err


def test_an_unknown_group_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path, '[profiles.a]\nhost = "127.0.0.1"\n[groups]\nh200 = ["a"]\n')
    assert main(["--config", str(config), "--group", "h100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "h100" in err and "h200" in err


def test_a_group_that_is_not_a_list_is_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path, '[profiles.a]\nhost = "127.0.0.1"\n[groups]\nh200 = "a"\n')
    assert main(["--config", str(config), "--group", "h200"]) == 2
    assert "h200" in capsys.readouterr().err


def test_group_resolves_to_its_profiles_in_order(tmp_path: Path) -> None:
    from console.config import load_config

    config = load_config(write_config(tmp_path, '[profiles.a]\nhost = "10.0.0.1"\n[profiles.b]\nhost = "b.lan"\n'
                                                '[groups]\nall = ["b", "a"]\n'))
    assert [p.name for p in config.group("all")] == ["b", "a"]


@pytest.mark.parametrize("bad", ["10.1.2.3:9108", "0.0.0.0:9108", "127.0.0.1", "127.0.0.1:x", "example.org:1"])
def test_metrics_address_must_be_loopback_host_and_port(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--demo-hosts", "1", "--metrics", bad]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuconsole: --metrics") and err.count("\n") == 1


def test_bad_match_and_url_are_refused_before_anything_starts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--prometheus", "http://127.0.0.1:9", "--match", 'job="x"} or vector(1)']) == 2
    assert "--match" in capsys.readouterr().err
    assert main(["--prometheus", "file:///etc/passwd"]) == 2
    assert "--prometheus" in capsys.readouterr().err
    assert main(["--match", 'job="x"', "--host", "a", "--host", "b"]) == 2
    assert "--match needs --prometheus" in capsys.readouterr().err


def test_two_profiles_of_one_name_get_distinct_keys() -> None:
    keys = host_keys([HostProfile(name="gpu", host="a", port=22), HostProfile(name="gpu", host="a", port=2222),
                      HostProfile(name="gpu", host="a", port=2222)])
    assert len(set(keys)) == 3 and keys[0] == "gpu"


# -- rows from states --------------------------------------------------------------------------
def gpu(index: int, used: int | None, util: int | None, total: int = 97887) -> GpuDevice:
    return GpuDevice(index, "H200", f"GPU-{index}", used, total, util, 40, 300.0, 700.0)


def state_with(host: str, gpus: list[GpuDevice], *, now: float = 1000.0) -> HostState:
    state = HostState(host, clock=lambda: now)
    state.apply(ConnectionChanged(host, ConnectionState(host, "connected", now - 5)))
    state.apply(ReadingChanged(host, "gpu", Reading("gpu", GpuStatus("nvml", tuple(gpus), sampled_at_s=now), now)))
    return state


def test_a_row_sums_gpu_memory_averages_util_and_names_a_lost_gpu_as_the_worst_problem() -> None:
    state = state_with("h1", [gpu(0, 50_000, 40), gpu(1, 30_000, 60)])
    row = fleet_row(state, 1000.0)
    assert (row.memory_used_mib, row.memory_total_mib, row.util_mean_pct) == (80_000, 2 * 97887, 50.0)
    assert row.severity == 0 and row.problem is None
    # GPU 1 falls off the bus: missing from the next sample.
    state.apply(ReadingChanged("h1", "gpu", Reading("gpu", GpuStatus("nvml", (gpu(0, 50_000, 40),),
                                                                      sampled_at_s=1001.0), 1001.0)))
    row = fleet_row(state, 1001.0)
    assert row.gpus_lost == 1 and row.severity == 3 and "lost" in (row.problem or "")
    assert row.memory_used_mib == 50_000  # the lost GPU's last values are not counted as present
    assert "1✗" in format_cells(row)["gpus"]


def test_unknown_is_shown_as_unknown_and_old_data_as_stale() -> None:
    state = state_with("h1", [gpu(0, None, None)])
    cells = format_cells(fleet_row(state, 1000.0))
    assert cells["util"] == "?" and cells["server"] == "?" and cells["gen"] == "?"
    row = fleet_row(state, 1000.0 + 60)
    assert "gpu" in row.stale and row.severity == 2 and "gpu stale" in (row.problem or "")
    assert format_cells(row)["gpus"].startswith("~")


def test_a_failed_connection_outranks_everything_and_sorts_first() -> None:
    ok = state_with("a-ok", [gpu(0, 10, 10)])
    bad = HostState("z-bad")
    bad.apply(ConnectionChanged("z-bad", ConnectionState("z-bad", "failed", 990.0, "HOST KEY CHANGED: …")))
    rows = [fleet_row(ok, 1000.0), fleet_row(bad, 1000.0)]
    assert sorted(rows, key=lambda r: sort_key(r, "problem"))[0].host == "z-bad"
    assert sorted(rows, key=lambda r: sort_key(r, "host"))[0].host == "a-ok"
    assert "HOST KEY CHANGED" in (rows[1].problem or "")
    assert matches(rows[1], "error key") and not matches(rows[0], "error")


# -- many hosts over SSH -----------------------------------------------------------------------
async def test_a_hanging_host_and_a_changed_host_key_do_not_delay_the_others(
        two_sims: list[HostSimulator], hanging_port: int, tmp_path: Path) -> None:
    good = [sim_profile(s, f"gpu-sim-{i + 1:02d}") for i, s in enumerate(two_sims)]
    hung = HostProfile(name="hung", host="127.0.0.1", port=hanging_port, user="root",
                       identity=str(two_sims[0].client_key_path), known_hosts=str(two_sims[0].known_hosts_path),
                       connect_timeout_s=30)
    # A host whose recorded key is another host's: a changed host key.
    wrong_known = tmp_path / "known_hosts"
    wrong_known.write_text(two_sims[1].known_hosts_path.read_text().replace(str(two_sims[1].port),
                                                                             str(two_sims[0].port)))
    changed = HostProfile(name="changed", host="127.0.0.1", port=two_sims[0].port, user="root",
                          identity=str(two_sims[0].client_key_path), known_hosts=str(wrong_known),
                          connect_timeout_s=3)
    # The hung host holds one connect slot for up to its 30 s timeout; the others use the rest.
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connection refused
    refused = HostProfile(name="refused", host="127.0.0.1", port=closed.getsockname()[1], user="root",
                          identity=str(two_sims[0].client_key_path), known_hosts=str(two_sims[0].known_hosts_path),
                          connect_timeout_s=3)
    fleet = Fleet([hung, changed, refused, *good])
    await fleet.start()
    try:
        await wait_for(lambda: all(fleet.hosts[p.name].state.connection is not None
                                   and fleet.hosts[p.name].state.connection.status == "connected" for p in good), 25)
        # The others connected while the hung host still holds its slot (its timeout is 30 s): they
        # were not queued behind it. Said by the hung host's state, not by a wall clock (issue 27).
        hung_state = fleet.hosts["hung"].state.connection
        assert hung_state is None or hung_state.status == "connecting", hung_state
        await wait_for(lambda: fleet.hosts["changed"].state.connection.status == "failed", 10)
        changed_row = fleet_row(fleet.hosts["changed"].state)
        assert "HOST KEY CHANGED" in changed_row.connection and changed_row.severity == 3
        await wait_for(lambda: fleet.hosts["refused"].state.connection.status == "failed", 10)
        refused_row = fleet_row(fleet.hosts["refused"].state)
        assert refused_row.severity == 3 and "connection refused" in refused_row.connection.lower()
        hung_row = fleet_row(fleet.hosts["hung"].state)
        assert not hung_row.connection_ok and hung_row.connection.startswith("connecting")
        # The good hosts read their GPUs, each its own.
        await wait_for(lambda: all(fleet.hosts[p.name].state.data("gpu") is not None for p in good), 15)
        assert {fleet.hosts[p.name].state.data("host").hostname for p in good
                if fleet.hosts[p.name].state.data("host")} <= {"gpu-sim-01", "gpu-sim-02"}
    finally:
        closed.close()
        await asyncio.wait_for(fleet.close(), 15)


async def test_connects_are_bounded_by_the_semaphore(two_sims: list[HostSimulator], hanging_port: int) -> None:
    """With one slot, the hung host holds it until its connect timeout: the others wait (this is
    the bound working, and why the default has several slots)."""
    hung = HostProfile(name="hung", host="127.0.0.1", port=hanging_port, user="root",
                       identity=str(two_sims[0].client_key_path), known_hosts=str(two_sims[0].known_hosts_path),
                       connect_timeout_s=2)
    good = sim_profile(two_sims[0], "good")
    fleet = Fleet([hung, good], max_connecting=1)
    from console.core.state import ConnectionChanged

    seen: list[tuple[str, str]] = []  # every host's connection changes, in the order they happened
    for name in ("hung", "good"):
        fleet.hosts[name].state.subscribe(
            lambda e, name=name: seen.append((name, e.state.status)) if isinstance(e, ConnectionChanged) else None)
    await fleet.start()
    try:
        await wait_for(lambda: ("good", "connected") in seen, 30)
        # the good host connected only after the hung one gave its slot back (its connect failed)
        assert ("hung", "failed") in seen and seen.index(("hung", "failed")) < seen.index(("good", "connected")), seen
        assert fleet.hosts["hung"].state.connection.status in ("failed", "connecting")
    finally:
        await asyncio.wait_for(fleet.close(), 15)


# -- the fleet screen --------------------------------------------------------------------------
def offline_states(count: int) -> list[HostState]:
    now = time.time()
    states = []
    for i in range(count):
        host = f"gpu-{i:02d}"
        state = HostState(host)
        state.apply(ConnectionChanged(host, ConnectionState(host, "connected", now)))
        gpus = tuple(gpu(g, 1000 * (i + 1), (i * 7) % 100) for g in range(8))
        state.apply(ReadingChanged(host, "gpu", Reading("gpu", GpuStatus("nvml", gpus, sampled_at_s=now), now)))
        states.append(state)
    return states


async def test_thirty_hosts_fit_80x24_by_scrolling_and_rows_stay_keyed_by_host() -> None:
    from console.ui.app import FleetApp

    states = offline_states(30)
    opened: list[str] = []
    app = FleetApp(states, host_for=lambda key: opened.append(key) or None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.fleet_screen
        assert len(screen.visible_hosts()) == 30
        screen.sort_by = "host"
        screen.refresh_rows(full=True)
        screen._sort()
        assert screen.visible_hosts()[:2] == ["gpu-00", "gpu-01"]
        # Sorting by utilization reorders the rows; every row is still found by its host.
        await pilot.press("s")
        assert screen.sort_by == "util"
        order = screen.visible_hosts()
        utils = [screen.rows[h].util_mean_pct for h in order]
        assert utils == sorted(utils, reverse=True)
        # Scroll to the last row: the table scrolls, the row is reachable.
        for _ in range(29):
            await pilot.press("down")
        await pilot.pause()
        assert screen.table.scroll_y > 0
        await pilot.press("enter")
        await pilot.pause()
        assert opened == [order[-1]]


async def test_filter_hides_rows_and_escape_brings_them_back() -> None:
    from console.ui.app import FleetApp

    states = offline_states(5)
    states[3].apply(ConnectionChanged("gpu-03", ConnectionState("gpu-03", "failed", time.time(), "refused")))
    app = FleetApp(states)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("slash")
        for ch in "refused":
            await pilot.press(ch)
        await pilot.pause()
        assert app.fleet_screen.visible_hosts() == ["gpu-03"]
        await pilot.press("enter", "escape")
        await pilot.pause()
        assert len(app.fleet_screen.visible_hosts()) == 5


async def test_enter_opens_the_hosts_panes_over_ssh_and_escape_returns(two_sims: list[HostSimulator]) -> None:
    from console.ui.app import FleetApp
    from console.ui.fleet_screen import FleetScreen, HostScreen
    from console.ui.panes.header import HostHeader

    fleet = Fleet([sim_profile(s, f"gpu-sim-{i + 1:02d}") for i, s in enumerate(two_sims)])

    def host_for(key: str) -> object:
        host = fleet.hosts[key]
        return host.state, host.runner, None

    app = FleetApp(fleet.states, host_for=host_for, start=fleet.start, close=fleet.close)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.fleet_screen
        await wait_for(lambda: all(r.connection_ok and r.gpu_count for r in screen.rows.values())
                       and len(screen.rows) == 2, 20)
        screen.refresh_rows(full=True)
        assert set(screen.visible_hosts()) == {"gpu-sim-01", "gpu-sim-02"}
        assert screen.table.get_cell("gpu-sim-02", "conn") == "ok"
        screen.table.move_cursor(row=screen.table.get_row_index("gpu-sim-02"))
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, HostScreen) and app.screen.state.host == "gpu-sim-02"
        header = app.screen.query_one(HostHeader)
        await wait_for(lambda: "gpu-sim-02" in str(header.render()), 10)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)


# -- the exporter ------------------------------------------------------------------------------
def test_the_collector_exports_per_gpu_values_and_omits_unknowns() -> None:
    from prometheus_client import generate_latest
    from prometheus_client.registry import CollectorRegistry

    from console.domain.fleet.metrics import FleetCollector

    state = state_with("h1", [gpu(0, 1024, 50), gpu(1, None, None)])
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FleetCollector([state]))
    text = generate_latest(registry).decode()
    assert 'gpuconsole_gpu_memory_used_bytes{gpu="0",host="h1",uuid="GPU-0"} 1.073741824e+09' in text
    assert 'gpuconsole_gpu_utilization_ratio{gpu="0",host="h1",uuid="GPU-0"} 0.5' in text
    assert 'gpuconsole_gpu_memory_used_bytes{gpu="1"' not in text  # unknown is left out, never 0
    assert 'gpuconsole_host_connected{host="h1"} 1.0' in text
    assert "gpuconsole_swap_downtime_seconds" not in text


def test_metrics_server_serves_on_loopback_and_closes() -> None:
    import httpx

    from console.domain.fleet.metrics import start_metrics_server

    server = start_metrics_server([state_with("h1", [gpu(0, 1024, 50)])], "127.0.0.1", 0)
    try:
        body = httpx.get(server.url, timeout=5).text
        assert 'gpuconsole_gpu_power_watts{gpu="0",host="h1",uuid="GPU-0"} 300.0' in body
    finally:
        server.close()
    with pytest.raises(httpx.ConnectError), contextlib.closing(httpx.Client(timeout=2)) as client:
        client.get(server.url)


# -- the command line, end to end --------------------------------------------------------------
def test_demo_hosts_starts_a_fleet_of_simulated_hosts_in_the_fleet_screen(tmp_path: Path) -> None:
    import subprocess
    import sys

    shot = tmp_path / "fleet.svg"
    done = subprocess.run([sys.executable, "-m", "console", "--demo-hosts", "3", "--screenshot", str(shot),
                           "--screenshot-after", "10", "--screenshot-size", "100x24"],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-500:]
    svg = shot.read_text()
    for name in ("gpu-sim-01", "gpu-sim-02", "gpu-sim-03", "3 hosts over SSH"):
        assert name.replace(" ", "&#160;") in svg or name in svg, name


async def test_metrics_on_the_one_host_console_serves_its_readings(tmp_path: Path) -> None:
    import httpx

    from console.demo.sshd import free_port

    port = free_port()
    run = asyncio.ensure_future(asyncio.to_thread(main, [
        "--demo", "--no-record", "--metrics", f"127.0.0.1:{port}", "--screenshot", str(tmp_path / "x.svg"),
        "--screenshot-after", "12"]))
    body = ""
    try:
        deadline = time.monotonic() + 60
        async with httpx.AsyncClient(timeout=2) as client:
            while time.monotonic() < deadline and "gpuconsole_gpu_memory_total_bytes{" not in body:
                with contextlib.suppress(httpx.HTTPError):
                    body = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
                await asyncio.sleep(0.3)
        assert 'gpuconsole_gpu_memory_total_bytes{gpu="0",host="127.0.0.1"' in body
        assert 'gpuconsole_host_connected{host="127.0.0.1"} 1.0' in body
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(run, 60)


async def test_the_host_screen_maximizes_with_number_keys_and_escape_steps_back() -> None:
    from console.ui.app import FleetApp
    from console.ui.fleet_screen import FleetScreen, HostScreen

    states = offline_states(2)
    app = FleetApp(states, host_for=lambda key: (next(s for s in states if s.host == key), None, None))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app.fleet_screen.open_host("gpu-01")  # type: ignore[misc]
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, HostScreen) and screen.state.host == "gpu-01"
        await pilot.press("1")
        await pilot.pause()
        assert screen.maximized is not None
        await pilot.press("escape")
        await pilot.pause()
        assert screen.maximized is None and app.screen is screen
        # A Prometheus-only row has no SSH session: asking it for something is said, not a crash.
        screen.on_download_pane_verify_requested(None)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)


def test_a_dead_server_shows_no_throughput_from_its_last_log_line() -> None:
    from console.domain.analysis.server_status import HttpFacts, ServerStatus

    state = state_with("h1", [gpu(0, 600, 0)])
    dead = ServerStatus("dead", "unit inactive", "x.service", "inactive", None, None, HttpFacts(), 116.0, None, 2.0)
    state.apply(ReadingChanged("h1", "server", Reading("server", dead, 1000.0)))
    row = fleet_row(state, 1000.0)
    assert row.server_status == "dead" and row.severity == 3
    assert row.gen_tokens_per_s is None and row.running_reqs is None
    assert format_cells(row)["gen"] == "?"


def test_serve_exports_the_headless_cores_readings_for_prometheus(tmp_path: Path) -> None:
    """`gpuconsole serve --metrics`: the pairing core (no UI) is a Prometheus target too."""
    import os
    import signal
    import subprocess
    import sys

    import httpx

    from console.demo.sshd import free_port

    port = free_port()
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "console", "serve", "--demo", "--no-record",
                             "--metrics", f"127.0.0.1:{port}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env)
    body = ""
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "gpuconsole_gpu_memory_total_bytes{" not in body:
            with contextlib.suppress(httpx.HTTPError):
                body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
            time.sleep(0.3)
        assert 'gpuconsole_gpu_memory_total_bytes{gpu="0",host="127.0.0.1"' in body
        assert 'gpuconsole_host_connected{host="127.0.0.1"} 1.0' in body
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err.decode()[-500:]
    assert f"metrics: http://127.0.0.1:{port}/metrics" in out.decode()
