"""Issue 20, "one truth for every view": the state taken whole (`HostState.snapshot()`), a late
attacher's mirror equal to the core, recordings that start with the state and seek by it, and
replay on the recording's clock. Pane text is compared through the panes' pure format functions."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from console.core import codec
from console.core.recording import Recorder, Replayer, read_recording
from console.core.runner import HostRunner
from console.core.state import BenchChanged, HostInfo, HostState, Notice, ReadingChanged, StateSnapshot
from console.demo.hostsim import HostSimulator, story
from console.demo.hostsim.scenario import demo_profile, start_scenario
from console.model import Reading
from console.host.session import HostSession, make_transport
from console.share.client import attach
from console.share.server import ShareServer
from console.domain.swap.controller import SwapController
from console.core.derive.swap_view import ApprovalChanged, SwapStep, SwapStepChanged
from tests.kit.clocks import Clock
from tests.kit.hosts import wait_for

SPEED = 4.0  # the story at 4 scenario seconds a second: the old server stops 11 s in, the new is ready at 19 s


def _plain(renderable: Any, width: int = 120) -> str:
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    console.print(renderable)
    return console.export_text()


def pane_texts(state: HostState, now_s: float) -> dict[str, str]:
    """What every pane says about `state` at `now_s`, as plain text (the panes' own format functions)."""
    from console.ui.panes.bench import chart, results_table
    from console.ui.panes.download import format_download, format_verify
    from console.ui.panes.gpu import format_gpu_status
    from console.ui.panes.header import format_header, format_presence
    from console.ui.panes.log import format_status
    from console.ui.panes.service import format_service
    from console.ui.panes.swap import format_plan

    texts = {
        "header": format_header(state.label, state.demo, state.connection, state.reading("host"), now_s).plain,
        "presence": format_presence(state.presence, state.note, None, now_s).plain,
        "gpu": format_gpu_status(state.reading("gpu"), 100, 30, now_s).plain,
        "download": format_download(state.reading("download"), 100, 30, now_s=now_s).plain,
        "service": format_service(state.reading("service"), 100).plain,
        "log status": format_status(state.reading("server"), state.reading("log"), 100, now_s).plain,
        "log lines": "\n".join(e.text for e in list(state.log_lines)[-200:]) + f"\n{state.log_lines_total}",
        "bench chart": chart(state.bench, 100, 20, now_s).plain,
        "bench table": _plain(results_table(state.bench, 100, 12)),
        "swap": format_plan(state.swap, now_s).plain,
        "notices": "\n".join(f"{n.title}: {n.message}" for n in state.notices),
    }
    if state.verify is not None:
        texts["verify"] = format_verify(state.verify, 100).plain
    return texts


def assert_same_panes(a: HostState, b: HostState, now_s: float) -> None:
    left, right = pane_texts(a, now_s), pane_texts(b, now_s)
    assert left.keys() == right.keys()
    for key in left:
        assert left[key] == right[key], f"the {key} pane differs"


async def _demo_core(tmp_path: Path, recorder: list[Recorder] | None = None,
                     ) -> AsyncIterator[tuple[HostSimulator, HostState, HostRunner, ShareServer, Path]]:
    sim = HostSimulator(tmp_path / "demo-host", speed=SPEED)
    await sim.start()
    short = Path(tempfile.mkdtemp(prefix="gc-"))
    try:
        await start_scenario(sim, driven=False)
        profile = demo_profile(sim)
        session = HostSession(profile, make_transport(profile), demo=True, bench_path=tmp_path / "bench.jsonl")
        state = HostState("127.0.0.1", label="sim", demo=True)
        runner = HostRunner(session, state, swap=SwapController)
        if recorder is not None:  # every 4 s a snapshot: the seeks below start from one
            recorder.append(Recorder(state, tmp_path / "rec", snapshot_every_s=4.0).start())
        runner.announce()
        server = await ShareServer(state, runner).start(unix_path=short / "core.sock")
        await runner.start()
        try:
            yield sim, state, runner, server, short / "core.sock"
        finally:
            await server.close()
            await runner.close()
    finally:
        shutil.rmtree(short, ignore_errors=True)
        await sim.stop()


# -- 1. the state taken whole ----------------------------------------------------------------
def test_a_snapshot_of_an_empty_state_round_trips_through_the_codec() -> None:
    state = HostState("h", label="lab")
    snap = state.snapshot()
    assert codec.decode_event(codec.encode_event(snap)) == snap
    again = HostState.from_snapshot(codec.decode_event(codec.encode_event(snap)))  # type: ignore[arg-type]
    assert again.label == "lab"
    assert replace(again.snapshot(), at_s=snap.at_s) == snap


@pytest.fixture
async def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    async for core in _demo_core(tmp_path):
        yield core


def _swap_done(state: HostState) -> bool:
    marks = [label for _, label in state.bench.marks]
    return "new server ready" in marks


async def test_the_whole_state_round_trips_after_the_demo_swap(demo: Any) -> None:
    sim, state, runner, server, sock = demo
    await wait_for(lambda: _swap_done(state), 60)
    state.apply(ApprovalChanged(state.host, "r1", "start_new", ("systemctl start x",), "ana", state.now()))
    await runner.close()  # nothing moves while the copy is compared
    snap = state.snapshot()
    decoded = codec.decode_event(codec.encode_event(snap))
    assert isinstance(decoded, StateSnapshot)
    assert decoded == snap  # every field survives the codec (readings typed by source, series, swap)
    copy = HostState.from_snapshot(decoded)
    assert replace(copy.snapshot(), at_s=snap.at_s) == snap
    assert len(copy.data("gpu").memory_history[0]) == len(state.data("gpu").memory_history[0]) > 3
    assert list(copy.bench.marks) == list(state.bench.marks)
    assert [a.request_id for a in copy.swap.pending_approvals] == ["r1"]
    assert_same_panes(copy, state, state.now())
    # and a state that is applied the snapshot as an event tells its views, like any event
    seen: list[object] = []
    other = HostState("127.0.0.1")
    other.subscribe(seen.append)
    other.apply(decoded)
    assert seen == [decoded] and other.log_lines_total == state.log_lines_total


# -- 2. attach sends the state first -----------------------------------------------------------
async def test_a_client_attached_after_the_swap_shows_what_one_attached_from_the_start_shows(demo: Any) -> None:
    sim, state, runner, server, sock = demo
    early = await attach(sock, name="early")
    early_pump = asyncio.ensure_future(early.pump())
    await wait_for(lambda: _swap_done(state), 60)
    state.apply(SwapStepChanged(state.host, SwapStep("stop_old", "Stop the old service", "done", 1.0, 2.0)))
    state.apply(ApprovalChanged(state.host, "r1", "start_new", ("systemctl start x",), "ana", state.now()))
    late = await attach(sock, name="late")
    late_pump = asyncio.ensure_future(late.pump())
    try:
        await wait_for(lambda: late.state.swap.pending_approvals, 10)
        await runner.close()  # the host's sources stop: both mirrors catch up with the core and stay
        await wait_for(lambda: early.state.log_lines_total == late.state.log_lines_total == state.log_lines_total
                       and early.state.presence == late.state.presence == state.presence, 10)
        await wait_for(lambda: len(late.state.bench.gpu_util) == len(early.state.bench.gpu_util) > 5
                       and list(late.state.bench.server_gen) == list(early.state.bench.server_gen), 30)
        assert len(late.state.bench.gpu_util) == len(early.state.bench.gpu_util) > 5
        assert list(late.state.bench.server_gen) == list(early.state.bench.server_gen)
        assert [m for _, m in late.state.bench.marks] == [m for _, m in early.state.bench.marks]
        assert "new server ready" in [m for _, m in late.state.bench.marks]
        assert late.state.swap.steps["stop_old"].state == "done"
        assert [a.request_id for a in late.state.swap.pending_approvals] == ["r1"]
        now = state.now()
        assert_same_panes(late.state, early.state, now)
        assert_same_panes(late.state, state, now)
    finally:
        for c, pump in ((early, early_pump), (late, late_pump)):
            await c.close()
            pump.cancel()


# -- 3. recordings: the first event kept, the whole state first, at rotation and every few minutes --
def _notice(state: HostState, i: int) -> Notice:
    return Notice(state.host, "n", f"event {i}", "information", state.now())


def test_a_recording_starts_with_the_whole_state_and_one_comes_at_each_rotation(tmp_path: Path) -> None:
    clock = Clock(1000.0)
    state = HostState("h", label="lab", clock=clock)
    state.apply(HostInfo("h", "lab", missing=(("log", "no log"),), read_only=True))
    recorder = Recorder(state, tmp_path, max_file_bytes=1, flush_every_s=0.0).start()
    for i in range(3):
        clock.t += 1
        state.apply(_notice(state, i))
    recorder.close()
    assert len(recorder.paths) >= 3  # every flush passed the limit: a new part each time
    for path in recorder.paths:
        rec = read_recording(path)
        first = rec.entries[0][1]
        assert isinstance(first, StateSnapshot)  # each part alone knows the host and its panes
        assert first.info.read_only and first.info.missing == (("log", "no log"),)


def test_a_snapshot_is_written_every_few_minutes_and_replay_at_seeks_to_the_one_before(tmp_path: Path) -> None:
    clock = Clock(1000.0)
    state = HostState("h", clock=clock)
    recorder = Recorder(state, tmp_path, snapshot_every_s=3600).start()
    states_at: dict[int, StateSnapshot] = {}
    for i in range(30):
        clock.t += 10
        state.apply(_notice(state, i))
        state.apply(ReadingChanged("h", "log", Reading("log", None, clock.t)))
        if i % 10 == 9:
            recorder.write_snapshot()  # what snapshot_every_s does on its own, at a time the test knows
        states_at[i] = state.snapshot()
    recorder.close()
    rec = read_recording(recorder.path)  # type: ignore[arg-type]
    assert len(rec.snapshots) == 4  # the start, then 3
    replayed = HostState("h")
    applied: list[object] = []
    replayed.subscribe(applied.append)
    replayer = Replayer(rec, replayed)
    at = 10 * 25 + 1  # just after event 24 (the 25th): the last snapshot before it is after event 19
    replayer.apply_until(at)
    assert isinstance(applied[0], StateSnapshot) and applied[0].notices[-1].message == "event 19"
    assert len(applied) == 1 + 2 * 5  # the snapshot, then events 20..24: nothing before it replayed
    assert replace(replayed.snapshot(), at_s=0) == replace(states_at[24], at_s=0)
    assert replayed.now() == rec.started_at + at  # the recording's clock


def test_the_usual_console_records_its_first_event(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`announce()` ran before `Recorder.start()`: the host's info (read-only, the missing panes)
    was lost from every recording."""
    from console.ui.app import ConsoleApp
    from console.config import HostProfile
    from console.host.session import HostSession, make_transport

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    profile = HostProfile(name="p", host="10.1.230.174", read_only=True)
    session = HostSession(profile, make_transport(profile))
    app = ConsoleApp.for_session(session, record=True, record_dir=tmp_path / "rec")
    app.recorder.close()
    rec = read_recording(app.recorder.path)
    infos = [e for _, e in rec.entries if isinstance(e, HostInfo)]
    assert infos and infos[0].read_only and dict(infos[0].missing).keys() >= {"download", "service", "log"}


# -- 4. replay is the same story, on the recording's clock ----------------------------------------
async def test_a_replayed_demo_swap_shows_every_pane_as_the_live_run_did_before_during_and_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    recorders: list[Recorder] = []
    moments: list[tuple[float, dict[str, str]]] = []
    async for sim, state, _runner, _server, _sock in _demo_core(tmp_path, recorders):
        for scenario_s in (story.T_OLD_STOP - 10, story.T_WEIGHTS_END, story.T_READY + 12):
            await wait_for(lambda t=scenario_s, s=sim: s.elapsed_s() >= t, 90)
            now = state.now()  # no await from here to the texts: the moment is exact
            moments.append((now, pane_texts(state, now)))
        recorders[0].close()
    rec = read_recording(recorders[0].path)  # type: ignore[arg-type]
    assert len(rec.snapshots) >= 3
    marks = [texts["bench chart"] for _, texts in moments]
    assert "old server stopped" not in marks[0] and "new server ready" in marks[2]  # before and after the swap
    for now, live in moments:
        replayed = HostState(rec.header["host"])
        Replayer(rec, replayed).apply_until(now - rec.started_at)
        assert replayed.now() == pytest.approx(now, abs=1e-5)  # staleness and ages on the recording's clock
        assert replayed.bench.now() == replayed.now()  # the time chart too (it drew against the wall clock)
        again = pane_texts(replayed, replayed.now())
        for key in live:
            assert again.get(key) == live[key], f"the {key} pane differs at {now - rec.started_at:.1f}s"
        assert replayed.replay is not None and replayed.replay.describe(replayed.now()).startswith("REPLAY")
    assert "no throughput yet" not in moments[2][1]["bench chart"]


async def test_replay_says_its_position_speed_and_end(tmp_path: Path) -> None:
    clock = Clock(1000.0)
    state = HostState("h", clock=clock)
    recorder = Recorder(state, tmp_path).start()
    for i in range(3):
        clock.t += 30
        state.apply(_notice(state, i))
    recorder.close()
    rec = read_recording(recorder.path)  # type: ignore[arg-type]
    replayed = HostState("h")
    replayer = Replayer(rec, replayed, speed=1000.0, at_s=35)
    replayer.seek(35)
    assert replayed.replay is not None
    assert replayed.replay.describe(rec.started_at + 35) == "REPLAY 35s / 1m30s ×1000"
    assert [n.message for n in replayed.notices] == ["event 0"]  # nothing from after 35 s
    await asyncio.wait_for(replayer.run(), 10)
    assert replayed.replay.finished and replayed.replay.describe(replayed.now()) == "REPLAY ended at 1m30s"
    assert replayed.notices[-1].title == "replay" and "end of the recording" in replayed.notices[-1].message


# -- 5. facts derived once, in the core ------------------------------------------------------------
def _service(old: tuple[str, str], new: tuple[str, str]) -> Any:
    from console.domain.analysis.service_report import ServiceReport, ServiceSide

    def side(name_state: tuple[str, str]) -> ServiceSide:
        return ServiceSide(name_state[0], None, None, None, active_state=name_state[1])

    return ServiceReport(side(old), side(new), (), (), (), (), None, (), (), "x", ())


def _log_with(series: list[tuple[float, float]], ready: bool = False, launch_at: str = "08:00:00") -> Any:
    from console.domain.analysis.log_state import BootStep, LogSummary, ThroughputPoint

    boot = (BootStep("launch", launch_at, 0.0, ""),) + ((BootStep("ready", "08:01:00", 60.0, ""),) if ready else ())
    return LogSummary("log", "ready" if ready else "launch", boot, None, None, None, None, None, None, (), 0, None,
                      tuple(ThroughputPoint(t, v, None, 1, 0) for t, v in series))


def test_showing_the_other_side_as_old_marks_nothing_and_a_named_unit_stopping_does() -> None:
    from console.core.derive.swap_view import SwapSetup

    clock = Clock(100.0)
    state = HostState("h", clock=clock)
    state.apply(SwapSetup("h", "old.service", "new.service", None, None))
    events: list[object] = []
    state.subscribe(events.append)

    def service(old: tuple[str, str], new: tuple[str, str]) -> None:
        clock.t += 5
        state.apply(ReadingChanged("h", "service", Reading("service", _service(old, new), clock.t)))

    service(("old.service", "active"), ("new.service", "inactive"))
    service(("new.service", "inactive"), ("old.service", "active"))  # `s`: the view's sides swapped
    service(("old.service", "active"), ("new.service", "inactive"))  # and back
    assert list(state.bench.marks) == []  # a view's choice is no host event
    service(("new.service", "inactive"), ("old.service", "inactive"))  # the old unit really stopped
    assert [label for _, label in state.bench.marks] == ["old server stopped"]


def test_the_server_series_has_a_gap_where_no_server_existed() -> None:
    from console.ui.panes.bench import chart

    clock = Clock(1000.0)
    state = HostState("h", clock=clock)
    state.apply(ReadingChanged("h", "log", Reading("log", _log_with([(990.0 + i, 600.0) for i in range(10)]), 1000.0)))
    state.apply(ReadingChanged("h", "service", Reading("service", _service(("a", "active"), ("b", "inactive")), 1001)))
    state.apply(ReadingChanged("h", "service", Reading("service", _service(("a", "inactive"), ("b", "activating")),
                                                       1002.0)))
    # a new boot, ready 55 s later, then its first decode lines
    state.apply(ReadingChanged("h", "log", Reading("log", _log_with([], launch_at="08:10:00"), 1010.0)))
    state.apply(ReadingChanged("h", "log", Reading("log", _log_with([], True, "08:10:00"), 1057.0)))
    clock.t = 1070.0
    state.apply(ReadingChanged("h", "log", Reading("log", _log_with([(1058.0 + i, 100.0) for i in range(10)], True,
                                                                    "08:10:00"), 1068.0)))
    pieces = state.bench.server_segments(clock.t, 120)
    assert len(pieces) == 2 and pieces[0][-1][0] == 999.0 - 1070.0 and pieces[1][0][0] == 1058.0 - 1070.0
    assert [label for _, label in state.bench.marks] == ["old server stopped", "new server launching",
                                                          "new server ready"]
    # on the chart, no flat line at 600 tok/s across the 55 s without a server: the columns between
    # the stop and the ready have no server point (the vertical marks aside)
    assert "server gen tok/s" in chart(state.bench, 100, 16, clock.t).plain


def _run(model: str, c: int, i: int, o: int, completed: int = 16, **extra: Any) -> dict[str, Any]:
    return {"host": "lab", "model": model, "max_concurrency": c, "random_input_len": i, "random_output_len": o,
            "dataset_name": "random", "completed": completed, "output_throughput": 100.0 * c, **extra}


def test_before_after_pairs_only_like_workloads() -> None:
    from console.domain.analysis.bench_view import before_after
    from console.ui.panes.bench import results_table

    old, new = "Qwen3.5-397B", "Qwen3.5-122B"
    pair, why = before_after([_run(old, 64, 1024, 1024), _run(new, 4, 256, 256)], "lab")
    assert pair is None and why == "not comparable: c=64 at 1024/1024 (random) vs c=4 at 256/256 (random)"
    runs = [_run(old, 4, 256, 256), _run(old, 64, 1024, 1024), _run(new, 4, 256, 256)]
    pair, why = before_after(runs, "lab")
    assert pair == (runs[0], runs[2]) and why is None
    state = HostState("h")
    state.apply(HostInfo("h", "lab"))
    state.apply(BenchChanged("h", "history", runs=(_run(old, 64, 1024, 1024), _run(new, 4, 256, 256))))
    assert "before/after not comparable: c=64" in " ".join(_plain(results_table(state.bench, 120, 12)).split())


def test_a_run_stopped_before_any_request_finished_is_not_a_result() -> None:
    from console.ui.panes.bench import results_table

    old, new = "Qwen3.5-397B", "Qwen3.5-122B"
    state = HostState("h")
    state.apply(HostInfo("h", "lab"))
    state.apply(BenchChanged("h", "history", runs=(_run(old, 4, 256, 256),)))
    state.apply(BenchChanged("h", "start", label="c=4", total=16))
    stopped = _run(old, 4, 256, 256, completed=0, stopped=True, request_throughput=0.0)
    state.apply(BenchChanged("h", "result", record=stopped))
    state.apply(BenchChanged("h", "done"))
    assert state.bench.results == [] and len(state.bench.history) == 1
    assert "before any request finished" in _plain(results_table(state.bench, 120, 12))
    # a later run of the new model pairs with the old model's last real run, never the stopped one
    state.apply(BenchChanged("h", "history", runs=(_run(old, 4, 256, 256, tag="real"), stopped, _run(new, 4, 256, 256))))
    pair, _ = state.bench.comparison()
    assert pair is not None and pair[0].get("tag") == "real"


def test_one_freshness_rule_for_the_gpu_pane_the_fleet_row_and_the_header() -> None:
    from console.core.freshness import is_stale
    from console.domain.fleet.rows import fleet_row
    from console.model import GpuDevice, GpuStatus, HostSummary
    from console.ui.panes.gpu import GpuPane
    from console.ui.panes.header import format_header

    state = HostState("h", clock=Clock(1010.0))
    gpu = GpuDevice(0, "x", "GPU-0", 1, 2, 5, 40, 100.0, 600.0)
    state.apply(ReadingChanged("h", "gpu", Reading("gpu", GpuStatus("nvml", (gpu,), sampled_at_s=1000.0), 1000.0)))
    reading = state.reading("gpu")
    assert is_stale("gpu", reading, 1010.0)
    assert reading.is_stale(GpuPane.STALE_AFTER_S, 1010.0)  # the pane: yellow
    assert "gpu" in fleet_row(state, 1010.0).stale  # the fleet row: stale too (it said fresh)
    host = Reading("host", HostSummary("h", None, 1.0, 0.1, 0.1, 0.1, 8, ()), 1000.0)
    assert "stale" in format_header("h", False, None, host, 1010.0 + 6).plain  # 16 s: the header's rule, shared


def test_a_fleet_row_shows_no_throughput_for_a_server_that_is_loading_weights() -> None:
    from console.domain.analysis.log_state import LogTracker
    from console.domain.analysis.server_status import HttpFacts, ServerStatus
    from console.domain.fleet.rows import fleet_row
    from console.host.parsers.sglang_log import parse_line

    # The log as the tracker sums it: the old server's decode line at 990, then this boot's launch
    # (the summary starts each boot afresh: the row needs no rule of its own for a booting server).
    tracker = LogTracker("log")
    tracker.feed([parse_line("[2026-01-01 10:00:00 TP0] Decode batch, #running-req: 4, "
                             "gen throughput (token/s): 116.00, #queue-req: 0,")], 990.0)
    tracker.feed([parse_line('[2026-01-01 10:05:00] server_args=ServerArgs(model_path="/m")')], 994.0)
    state = HostState("h", clock=Clock(1000.0))
    state.apply(ReadingChanged("h", "log", Reading("log", tracker.summary(), 995.0)))
    starting = ServerStatus("starting", "loading weights", "u", "active", 1, "weights loading", HttpFacts())
    state.apply(ReadingChanged("h", "server", Reading("server", starting, 999.0)))
    assert fleet_row(state, 1000.0).gen_tokens_per_s is None


def test_one_verification_state_whoever_ran_it() -> None:
    from console.core.state import VerifyChanged
    from console.host.sources.download import VerifyProgress

    state = HostState("h")
    assert state.verification.state == "not run"
    state.apply(VerifyChanged("h", VerifyProgress(40, 4000, 10, 1000, 10, current="a")))
    assert state.verification.state == "running"
    state.apply(VerifyChanged("h", VerifyProgress(40, 4000, 40, 4000, 40, finished=True)))
    assert state.verification.state == "passed" and state.verification.summary == "40/40 match"
    state.apply(VerifyChanged("h", VerifyProgress(40, 4000, 40, 4000, 39, ("model-00007.safetensors",), finished=True)))
    assert state.verification.state == "failed" and state.verification.summary == "39/40 match, 1 differ"
    # and it is part of the state a late attacher or a replay gets
    assert HostState.from_snapshot(state.snapshot()).verification == state.verification


# Each source's staleness limit as shipped (console/core/freshness.py says why each is what it is):
# the numbers are written here, not imported, so a changed limit is a changed test.
SHIPPED_STALE_AFTER_S = (("gpu", 5.0), ("host", 15.0), ("download", 25.0), ("server", 30.0), ("service", 60.0))


@pytest.mark.parametrize(("source", "limit_s"), SHIPPED_STALE_AFTER_S)
def test_a_sources_reading_reads_live_to_its_limit_and_stale_just_after(source: str, limit_s: float) -> None:
    from console.core.freshness import freshness

    reading = Reading(source, object(), 1000.0)
    assert freshness(source, reading, 1000.0 + limit_s).state == "live"
    late = freshness(source, reading, 1000.0 + limit_s + 0.5)
    assert (late.state, late.age_s) == ("stale", limit_s + 0.5)


@pytest.mark.parametrize(("pane", "limit_s"), [("gpu", 5.0), ("download", 25.0), ("service", 60.0)])
def test_each_pane_turns_yellow_at_its_sources_shipped_limit(pane: str, limit_s: float) -> None:
    from console.ui.panes.download import DownloadPane
    from console.ui.panes.gpu import GpuPane
    from console.ui.panes.service import ServicePane

    cls = {"gpu": GpuPane, "download": DownloadPane, "service": ServicePane}[pane]
    reading = Reading(pane, object(), 1000.0)
    assert not reading.is_stale(cls.STALE_AFTER_S, 1000.0 + limit_s)
    assert reading.is_stale(cls.STALE_AFTER_S, 1000.0 + limit_s + 0.5)


def test_the_header_says_the_host_summary_is_stale_only_past_15_seconds() -> None:
    from console.model import HostSummary
    from console.ui.panes.header import format_header

    host = Reading("host", HostSummary("h", None, 1.0, 0.1, 0.1, 0.1, 8, ()), 1000.0)
    assert "stale" not in format_header("h", False, None, host, 1015.0).plain
    assert "stale" in format_header("h", False, None, host, 1015.5).plain


def test_a_quiet_log_is_never_stale() -> None:
    from console.core.freshness import freshness

    assert freshness("log", Reading("log", object(), 1000.0), 1000.0 + 86400).state == "live"
