"""Issue 20, the rest of "one truth for every view": a view's choice creates no event (`s` in the diff
pane shows the report the other way round, delivered by the source, and asks nothing of the host),
the log's throughput series belongs to one boot, and every pane's ages read the state's one clock
(the recording's in a replay)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from console.domain.analysis.service_diff import HostFacts
from console.domain.analysis.service_report import build_report, side_from_text, with_other_way
from console.core.control import NoControl
from console.core.recording import Recorder, read_recording
from console.core.state import HostInfo, HostState, ReadingChanged
from console.demo.hostsim import HostSimulator
from console.demo.hostsim.scenario import NEW_UNIT, OLD_UNIT, demo_profile, start_scenario
from console.model import Reading
from console.host.session import HostSession, make_transport
from console.host.transport.ssh import SshTransport
from tests.kit.clocks import Clock
from tests.kit.hosts import sim_options, wait_for

UNITS = Path(__file__).resolve().parent.parent.parent / "console" / "demo" / "hostsim" / "units"


def _seeds_report() -> Any:
    """The seeds' two units as the service source delivers them: compared both ways."""
    old = side_from_text(OLD_UNIT, (UNITS / OLD_UNIT).read_text())
    new = side_from_text(NEW_UNIT, (UNITS / NEW_UNIT).read_text())
    return with_other_way(build_report(old, new, HostFacts()), build_report(new, old, HostFacts()))


class _Watching(NoControl):
    """A control that says what a view asked of it (nothing may be asked for `s`)."""

    def __init__(self) -> None:
        super().__init__("test")
        self.asked: list[str] = []

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if callable(value) and not name.startswith("_") and name not in ("asked",):
            object.__getattribute__(self, "asked").append(name)
        return value


def _pane_text(app: Any) -> str:
    return app.host_screen.query_one("#service-pane").render().plain  # type: ignore[no-any-return]


# -- 1. `s` is the view's choice: no event, nothing asked -----------------------------------------
async def test_s_in_the_diff_pane_flips_the_view_and_creates_no_event(tmp_path: Path) -> None:
    from console.ui.app import ConsoleApp

    state = HostState("h", label="h", clock=Clock(1000.0))
    state.apply(HostInfo("h", "h"))
    state.apply(ReadingChanged("h", "service", Reading("service", _seeds_report(), 1000.0)))
    recorder = Recorder(state, tmp_path / "rec", flush_every_s=0.0).start()
    control = _Watching()
    app = ConsoleApp(state, control)
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.pause()
        pane = app.host_screen.query_one("#service-pane")
        before = _pane_text(app)
        assert f"old {OLD_UNIT}" in before and f"new {NEW_UNIT}" in before
        version, events = state.version, []
        state.subscribe(events.append)
        control.asked.clear()
        pane.focus()
        await pilot.press("s")
        await pilot.pause()
        flipped = _pane_text(app)
        assert f"old {NEW_UNIT}" in flipped and f"new {OLD_UNIT}" in flipped  # the other way round, at once
        assert f"the swap's new unit is still {NEW_UNIT}" in flipped
        assert "(flipped)" in str(pane.border_title)
        # the diff itself is the other way: what the new unit added, the flipped view says it removes
        changes = {c.flag: c.change for c in state.data("service").changes}
        back = {c.flag: c.change for c in state.data("service").flipped().changes}
        assert changes["--speculative-algorithm"] == "added" and back["--speculative-algorithm"] == "removed"
        # ... and nothing else moved: no event in the state, nothing asked of the host
        assert state.version == version and events == []
        assert [a for a in control.asked if a not in ("client_id", "who")] == []
        assert state.data("service").new.name == NEW_UNIT  # the state's orientation is the host's
        await pilot.press("s")
        await pilot.pause()
        assert _pane_text(app) == before and state.version == version
    recorder.close()
    rec = read_recording(recorder.path)  # type: ignore[arg-type]
    readings = [e for _, e in rec.entries if isinstance(e, ReadingChanged)]
    assert readings == []  # the recording holds the state it started with, and no reading of `s`


async def test_the_service_source_delivers_the_other_way_as_a_flipped_watcher_read_it(sim: HostSimulator) -> None:
    """The other way round is what watching the old unit as the new gave (its own paths, model
    config, SGLang flags), read in the same poll."""
    from console.host.sources.service import ServiceWatcher

    await start_scenario(sim, driven=False)
    transport = SshTransport(sim_options(sim))
    await transport.connect()
    try:
        watcher = ServiceWatcher(transport, NEW_UNIT, OLD_UNIT, forbidden_prefixes=(sim.host_path("/data"),))
        report = await watcher.poll()
        assert (watcher.new_unit, watcher.old_unit) == (NEW_UNIT, OLD_UNIT)
        assert report.flags_source == "checked against the host's SGLang 0.5.23"  # the new unit's, kept
        watcher.swap()
        swapped = await watcher.poll()
    finally:
        await transport.close()
    flipped = report.flipped()
    assert flipped is not None and flipped.new.name == OLD_UNIT and flipped.old is not None
    assert flipped.old.name == NEW_UNIT
    assert flipped.changes == swapped.changes and flipped.unit_changes == swapped.unit_changes
    assert flipped.env_changes == swapped.env_changes and flipped.raw_diff == swapped.raw_diff
    assert [x.message for x in flipped.lints] == [x.message for x in swapped.lints]
    # the old unit's model is under the forbidden prefix: said only when it is shown as the new
    assert any("is under" in x.message for x in flipped.lints)
    assert not any("is under" in x.message for x in report.lints)
    assert flipped.model_config == swapped.model_config and flipped.real_paths == swapped.real_paths
    assert flipped.flipped() is None  # one level: the report's other way is the way back


async def test_s_on_the_live_console_asks_the_host_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a real runner: the watcher keeps its units and no service reading follows the key
    (it re-read the units flipped, and the new reading went to every client and the recording)."""
    from console.ui.app import ConsoleApp

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    sim = HostSimulator(tmp_path / "host", speed=1.0)
    await sim.start()
    try:
        await start_scenario(sim, driven=False)
        profile = demo_profile(sim)
        session = HostSession(profile, make_transport(profile), demo=True, bench_path=tmp_path / "bench.jsonl")
        app = ConsoleApp.for_session(session, record=True, record_dir=tmp_path / "rec")
        async with app.run_test(size=(140, 50)) as pilot:
            state = app.state
            await wait_for(lambda: state.data("service") is not None
                           and state.data("service").flipped() is not None, 60)
            # On the pane too (the screen flushes streaming news once a second at most).
            await wait_for(lambda: f"old {OLD_UNIT}" in _pane_text(app), 30)
            await pilot.pause()
            service_readings: list[object] = []
            state.subscribe(lambda e: service_readings.append(e)
                            if isinstance(e, ReadingChanged) and e.source == "service" else None)
            app.host_screen.query_one("#service-pane").focus()
            await pilot.press("s")
            await pilot.pause()
            text = _pane_text(app)
            assert f"old {NEW_UNIT}" in text and f"new {OLD_UNIT}" in text  # flipped before any poll
            assert service_readings == []
            watcher = session.service_watcher()
            assert watcher is not None and (watcher.new_unit, watcher.old_unit) == (NEW_UNIT, OLD_UNIT)
            assert state.data("service").new.name == NEW_UNIT
    finally:
        await sim.stop()


# -- 2. the log's throughput series belongs to one boot -----------------------------------------
DECODE = ("[2026-01-01 10:00:{s:02d} TP0] Decode batch, #running-req: 48, #token: 4100, token usage: 0.40, "
          "cuda graph: True, gen throughput (token/s): 116.20, #queue-req: 0,")
LAUNCH = '[2026-01-01 10:05:00] server_args=ServerArgs(model_path="/models/new")'


def _tracker_after_a_restart() -> Any:
    from console.domain.analysis.log_state import LogTracker
    from console.host.parsers.sglang_log import parse_line

    tracker = LogTracker("journal: sglang.service")
    for i in range(5):
        tracker.feed([parse_line(DECODE.format(s=i))], 990.0 + i)
    assert len(tracker.summary().series) == 5
    tracker.feed([parse_line(LAUNCH)], 996.0)  # a new server launching
    return tracker


def test_a_new_boot_starts_the_logs_throughput_series_afresh() -> None:
    from console.domain.analysis.log_state import LogTracker
    from console.host.parsers.sglang_log import parse_line

    summary = _tracker_after_a_restart().summary()
    assert summary.phase == "launch" and summary.series == () and summary.last_decode is None
    # a phase earlier than where the log stands is a new boot too (a restart without a launch line seen)
    tracker = LogTracker("log")
    tracker.feed([parse_line("[2026-01-01 10:00:00 TP0] Load weight begin. avail mem=94.21 GB"),
                  parse_line("[2026-01-01 10:00:09 TP0] Capture cuda graph begin. This can take up to several "
                             "minutes. avail mem=20.00 GB")], 900.0)
    tracker.feed([parse_line(DECODE.format(s=30))], 950.0)
    assert len(tracker.summary().series) == 1
    tracker.feed([parse_line("[2026-01-01 10:09:00 TP0] Load weight begin. avail mem=94.21 GB")], 960.0)
    assert tracker.summary().series == ()


def test_the_status_line_and_the_fleet_row_say_nothing_of_the_last_boots_throughput() -> None:
    """The status's gen tok/s and the fleet row read the summary: during the new boot (5 s after the
    old server's last decode line) neither shows the old server's 116 tok/s."""
    from console.domain.analysis.server_status import HttpFacts, combine
    from console.domain.fleet.rows import fleet_row

    summary = _tracker_after_a_restart().summary()
    status = combine("new.service", "active", 42, summary, HttpFacts(), 999.0)
    assert status.status == "starting" and status.gen_throughput is None and status.running_reqs is None
    state = HostState("h", clock=Clock(999.0))
    state.apply(ReadingChanged("h", "log", Reading("log", summary, 999.0)))
    state.apply(ReadingChanged("h", "server", Reading("server", status, 999.0)))
    row = fleet_row(state, 999.0)
    assert row.server_status == "starting" and row.gen_tokens_per_s is None and row.running_reqs is None


# -- 3. one clock for every pane: the state's (the recording's in a replay) -------------------------
def _age(state: HostState) -> HostState:
    """Readings old by known amounts at the state's clock: a GPU lost 12 s ago (in the sample 20 s
    ago, missing from the one 12 s ago, the last), so the GPU reading is stale by 12 s; a download
    stalled for 30 s; a log quiet for 90 s."""
    from console.domain.analysis.download import DownloadProgress
    from console.domain.analysis.log_state import LogSummary
    from console.model import GpuDevice, GpuStatus

    t = state.now()
    state.apply(HostInfo("h", "h", log_label="journal: sglang.service"))
    gpu0, gpu1 = (GpuDevice(i, "x", f"GPU-{i}", 1, 2, 5, 40, 100.0, 600.0) for i in (0, 1))
    state.apply(ReadingChanged("h", "gpu", Reading("gpu", GpuStatus("nvml", (gpu0, gpu1), sampled_at_s=t - 20.0),
                                                   t - 20.0)))
    state.apply(ReadingChanged("h", "gpu", Reading("gpu", GpuStatus("nvml", (gpu0,), sampled_at_s=t - 12.0), t - 12.0)))
    stalled = DownloadProgress("/models/m", "org/m", "hub", 10 << 30, 20 << 30, 2, 4, 2, 4, (), 0.0, None,
                               t - 30.0, 100 << 30, True, False, (), t - 1.0)
    state.apply(ReadingChanged("h", "download", Reading("download", stalled, t - 1.0)))
    summary = LogSummary("log", "serving", (), None, None, None, None, None, None, (), 10, t - 90.0)
    state.apply(ReadingChanged("h", "log", Reading("log", summary, t - 90.0)))
    return state


def _ages(app: Any) -> dict[str, str]:
    screen = app.host_screen
    gpu, download, log = (screen.query_one(f"#{k}-pane") for k in ("gpu", "download", "log"))
    return {"gpu": gpu.render().plain, "gpu subtitle": str(gpu.border_subtitle),
            "download": download.render().plain, "log subtitle": str(log.border_subtitle)}


async def test_the_panes_draw_their_ages_on_the_states_clock() -> None:
    """The GPU and download panes drew "LOST … ago", "stale …" and "STALLED for …" against the wall
    clock: 56 years for a state whose clock says 12 s."""
    from console.ui.app import ConsoleApp

    clock = Clock(1_000_000.0)
    app = ConsoleApp(_age(HostState("h", label="h", clock=clock)), None)
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.pause()
        ages = _ages(app)
    assert "LOST 12s ago" in ages["gpu"]
    assert ages["gpu subtitle"] == "stale 12s"
    assert "STALLED for 30s" in ages["download"]
    assert "quiet 1m30s" in ages["log subtitle"]


async def test_a_replay_seeked_to_t_draws_the_ages_the_live_screen_drew_at_t(tmp_path: Path) -> None:
    from console.ui.app import ConsoleApp
    from console.core.recording import Replayer

    clock = Clock(1_000_000.0)
    state = HostState("h", label="h", clock=clock)
    recorder = Recorder(state, tmp_path / "rec", flush_every_s=0.0).start()
    _age(state)  # recorded as they come
    clock.t += 4.0  # the moment T: 4 s after the last reading
    live = ConsoleApp(state, None)
    async with live.run_test(size=(140, 50)) as pilot:
        await pilot.pause()
        live_ages = _ages(live)
    recorder.close()
    rec = read_recording(recorder.path)  # type: ignore[arg-type]
    replayed = HostState("h")
    # a replay barely moving (its clock is the recording's: 1/1000 of the wall clock's pace here)
    Replayer(rec, replayed, speed=0.001).seek(clock.t - rec.started_at)
    assert replayed.now() == pytest.approx(clock.t, abs=0.01)
    app = ConsoleApp(replayed, None, mode="replay")
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.pause()
        replay_ages = _ages(app)
    assert "LOST 16s ago" in live_ages["gpu"] and live_ages["gpu subtitle"] == "stale 16s"
    assert replay_ages == live_ages


# -- 4. the readers agree: facts derived once, not in a view -----------------------------------------
def test_the_log_status_line_and_the_fleet_row_give_the_same_throughput() -> None:
    """An idle server: its last decode line (116 tok/s, 48 running, 3 queued) is a minute old and
    its gauges say 0. The fleet row said 0 tok/s; the log pane's status line, computing its own,
    said "gen 116 tok/s run 48 queue 3" for the same state."""
    from console.domain.analysis.log_state import LogTracker
    from console.domain.analysis.server_status import HttpFacts, combine
    from console.domain.fleet.rows import fleet_row
    from console.ui.panes.log import format_status
    from console.host.parsers.sglang_log import parse_line

    tracker = LogTracker("log")
    tracker.feed([parse_line(DECODE.replace("#queue-req: 0", "#queue-req: 3").format(s=0))], 940.0)
    metrics = {"sglang:gen_throughput": 0.0, "sglang:num_running_reqs": 0.0, "sglang:num_queue_reqs": 0.0}
    http = HttpFacts(server_info={"status": "ready"}, metrics=metrics, health_ok=True, health_ever_ok=True)
    state = HostState("h", clock=Clock(1000.0))
    state.apply(ReadingChanged("h", "log", Reading("log", tracker.summary(), 1000.0)))
    status = combine("u.service", "active", 1, tracker.summary(), http, 1000.0)
    state.apply(ReadingChanged("h", "server", Reading("server", status, 1000.0)))
    row = fleet_row(state, 1000.0)
    line = format_status(state.reading("server"), state.reading("log"), 100, 1000.0).plain
    assert (row.gen_tokens_per_s, row.running_reqs, row.queued_reqs) == (0.0, 0.0, 0.0)
    assert "gen 0 tok/s  run 0  queue 0" in line
    # and while the decode line is fresh, both say what it says (the newest line beats the gauges)
    tracker.feed([parse_line(DECODE.replace("#queue-req: 0", "#queue-req: 3").format(s=1))], 995.0)
    status = combine("u.service", "active", 1, tracker.summary(), http, 1000.0)
    state.apply(ReadingChanged("h", "log", Reading("log", tracker.summary(), 1000.0)))
    state.apply(ReadingChanged("h", "server", Reading("server", status, 1000.0)))
    row = fleet_row(state, 1000.0)
    line = format_status(state.reading("server"), state.reading("log"), 100, 1000.0).plain
    assert (row.gen_tokens_per_s, row.running_reqs, row.queued_reqs) == (116.2, 48.0, 3.0)
    assert "gen 116 tok/s  run 48  queue 3" in line


async def test_the_log_pane_says_a_stale_server_status_as_the_fleet_row_does() -> None:
    """The server was last read 45 s ago (its limit is 30 s): the fleet row and the header's rule
    call it stale; the log pane's status line said "READY serving" as if it were now."""
    from console.domain.analysis.server_status import HttpFacts, ServerStatus
    from console.ui.app import ConsoleApp
    from console.domain.fleet.rows import fleet_row
    from console.ui.panes.log import format_status

    clock = Clock(1000.0)
    state = HostState("h", label="h", clock=clock)
    state.apply(HostInfo("h", "h", log_label="journal: u.service"))
    ready = ServerStatus("ready", "serving: /health_generate answered", "u.service", "active", 1, "ready",
                         HttpFacts(health_ok=True))
    state.apply(ReadingChanged("h", "server", Reading("server", ready, 955.0)))
    assert "server" in fleet_row(state, 1000.0).stale
    line = format_status(state.reading("server"), None, 100, 1000.0).plain
    assert line.startswith(" READY  stale 45s serving")
    assert "stale" not in format_status(state.reading("server"), None, 100, 970.0).plain  # 15 s: fresh
    app = ConsoleApp(state, None)
    async with app.run_test(size=(140, 50)) as pilot:
        await pilot.pause()
        shown = app.host_screen.query_one("#log-status").render().plain
    assert "stale 45s" in shown  # the pane draws it on the state's clock
