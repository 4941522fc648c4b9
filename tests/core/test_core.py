"""The HostState core: one state per host, typed events that round-trip through the codec, the
app and `snapshot` on one path, GPUs keyed by GPU, visible render errors, one backoff policy
that wakes on reconnect, a pane registry, and record/replay."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.text import Text

from console.host.backoff import Backoff
from console.core import codec
from console.core.recording import Recorder, RecordingError, Replayer, read_recording
from console.core.runner import HostRunner, run_one_cycle
from console.core.state import (
    BenchChanged,
    ConnectionChanged,
    HostInfo,
    HostState,
    LogAppended,
    Notice,
    ReadingChanged,
    VerifyChanged,
)
from console.demo.hostsim import HostSimulator
from console.demo.hostsim.scenario import demo_profile, start_scenario
from console.demo.hostsim.story import T_WEIGHTS_BEGIN
from console.model import GpuStatus, Reading
from console.host.session import HostSession
from console.cli.snapshot import snapshot_json
from console.domain.swap.controller import SwapController
from console.host.transport.base import ConnectionState
from console.host.transport.ssh import SshTransport
from tests.kit.hosts import DATA, sim_options, wait_for
from tests.kit.readings import gpu, gpu_reading

# -- the codec: every event and reading type, both ways -------------------------------------
LIVE_KINDS = ("HostInfo:", "ConnectionChanged:", "LogAppended:", "BenchChanged:", "ReadingChanged:host",
              "ReadingChanged:gpu", "ReadingChanged:download", "ReadingChanged:service",
              "ReadingChanged:server", "ReadingChanged:log")


def _kinds(events: list[object]) -> set[str]:
    return {type(e).__name__ + ":" + getattr(e, "source", "") for e in events}


async def _live_events(sim: HostSimulator, timeout_s: float) -> tuple[list[object], HostState]:
    """A live session's events until every kind of LIVE_KINDS was seen (or `timeout_s` passed: a
    loaded machine polls the slower sources late, so the test waits on what it needs, not a clock)."""
    profile = demo_profile(sim)
    session = HostSession(profile, SshTransport(sim_options(sim)), demo=True)
    state = HostState("127.0.0.1", label="demo", demo=True)
    events: list[object] = []
    state.subscribe(events.append)
    runner = HostRunner(session, state, swap=SwapController)
    runner.announce()
    await runner.start()
    try:
        with contextlib.suppress(AssertionError):  # the caller names what was never seen
            await wait_for(lambda: all(k in _kinds(events) for k in LIVE_KINDS), timeout=timeout_s, interval=0.2)
        runner.verify()  # a verification request too (answered with a reason or started)
    finally:
        await runner.close()
    return events, state


async def test_every_event_of_a_live_session_round_trips_through_the_codec(tmp_path: Path) -> None:
    sim = HostSimulator(tmp_path / "h", speed=8.0)
    await sim.start()
    try:
        await start_scenario(sim)
        events, state = await _live_events(sim, 90.0)
    finally:
        await sim.stop()
    kinds = _kinds(events)
    # Every source's reading type and the other events of a live session are covered.
    for expected in LIVE_KINDS:
        assert expected in kinds, f"{expected} never seen: {sorted(kinds)}"
    for event in events:
        assert codec.decode_event(codec.encode_event(event)) == event, type(event).__name__


def test_the_other_event_types_round_trip() -> None:
    from console.domain.bench.runner import Progress
    from console.host.sources.download import VerifyProgress

    samples = [
        Notice("h", "log", "resumed after the journal cursor", "warning", 12.5),
        VerifyChanged("h", VerifyProgress(3, 300, 1, 100, 1, ("b.safetensors: sha256 differs",), "c", False, None)),
        BenchChanged("h", "progress", progress=Progress(1, 0, 16, [0.1, 0.2], 12.5, [3.0], 99.0)),
        BenchChanged("h", "result", record={"output_throughput": 812.5, "host": "h"}),
        BenchChanged("h", "done", error="HTTP 500"),
        BenchChanged("h", "start", label="c=4", total=16),
        ConnectionChanged("h", ConnectionState("h", "reconnecting", 5.0, "connection lost")),
        HostInfo("h", "root@h:22", True, "journal of x", (("download", "no model dir"),), read_only=True),
        ReadingChanged("h", "gpu", Reading("gpu", None, None, "nvidia-smi: timed out", 3.0)),
    ]
    for event in samples:
        assert codec.decode_event(codec.encode_event(event)) == event


@pytest.mark.parametrize("data", [b"", b"{}", b"not json", b'{"event": "nope"}',
                                  b'{"event": "reading", "source": "gpu", "host": "h", "reading": {"source": 1}}',
                                  b'{"event": "reading", "source": "elsewhere", "host": "h", "reading": {}}',
                                  b'[1, 2]', b'{"event": "log", "host": "h", "events": "x"}'])
def test_bytes_that_are_not_an_event_are_one_decode_error(data: bytes) -> None:
    with pytest.raises(codec.DecodeError):
        codec.decode_event(data)


# -- the app and snapshot share one path ------------------------------------------------------
async def test_snapshot_of_a_booting_server_says_starting_as_the_app_does(tmp_path: Path) -> None:
    # Speed 2: the boot's 19 scenario seconds from weights loading to ready leave ~9 s for the connect
    # and one cycle (at speed 4, 4.75 s was too little under a loaded CI: the server was ready by then).
    sim = HostSimulator(tmp_path / "h", speed=2.0)
    await sim.start()
    try:
        await start_scenario(sim)
        # Into the new server's boot: weights loading, before CUDA graphs are done.
        # (No bound on the clock here: a boot already over by the snapshot fails the "starting" below.)
        await wait_for(lambda: sim.elapsed_s() > T_WEIGHTS_BEGIN + 1, timeout=60)
        from dataclasses import replace

        # The unit alone (no model dir: its Hub lookup would let the boot finish meanwhile).
        profile = replace(demo_profile(sim), compare_unit=None, model_dir=None)
        session = HostSession(profile, SshTransport(sim_options(sim)), demo=True)
        await session.transport.connect()
        state = HostState("127.0.0.1", demo=True)
        try:
            await run_one_cycle(session, state)
        finally:
            await session.close()
        out = snapshot_json(state)
    finally:
        await sim.stop()
    assert out["server"]["status"] == "starting", out["server"]
    # The setup pins the boot past "weights loading" and before the server is up: the phase is one
    # of those in between, the same in the server's status as in the log's summary.
    from console.host.parsers.sglang_log import BOOT_PHASES

    between = BOOT_PHASES[BOOT_PHASES.index("weights loading"):BOOT_PHASES.index("http up")]
    assert out["log"]["phase"] in between, out["log"]["phase"]
    assert out["server"]["phase"] == out["log"]["phase"]
    assert "weights loading" in [b["phase"] for b in out["log"]["boot"]]


# -- GPUs keyed by GPU ------------------------------------------------------------------------
def test_a_gpu_that_drops_out_stays_as_lost_and_its_neighbour_keeps_its_own_history() -> None:
    state = HostState("h")
    for t in range(3):
        state.apply(ReadingChanged("h", "gpu", gpu_reading(gpu(0, 10_000), gpu(1, 100_000), gpu(2, 140_000),
                                                           at=100.0 + t)))
    # GPU 1 falls off the bus: the next sample has GPUs 0 and 2 only.
    state.apply(ReadingChanged("h", "gpu", gpu_reading(gpu(0, 10_000), gpu(2, 140_000), at=110.0)))
    status = state.data("gpu")
    assert [g.index for g in status.gpus] == [0, 1, 2]
    lost = status.gpus[1]
    assert lost.lost_at_s == 110.0 and lost.memory_used_mib == 100_000  # its last values
    assert any("GPU 1" in p and "lost" in p for p in status.problems)
    # Row 2 draws GPU 2's history (full), not GPU 1's.
    assert status.memory_history[2][-1] == pytest.approx(140_000 / 143771)
    assert len(status.memory_history[2]) == 4 and len(status.memory_history[1]) == 3


def test_the_gpu_pane_draws_a_lost_gpu_in_red_with_its_age() -> None:
    from console.ui.panes.gpu import format_gpu_status

    state = HostState("h")
    state.apply(ReadingChanged("h", "gpu", gpu_reading(gpu(0, 10_000), gpu(1, 100_000), at=100.0)))
    state.apply(ReadingChanged("h", "gpu", gpu_reading(gpu(0, 10_000), at=110.0)))
    text = format_gpu_status(state.reading("gpu"), width=100, height=12, now_s=125.0)
    row = next(line for line in text.plain.splitlines() if line.strip().startswith("1 "))
    assert "LOST" in row and "15s" in row and "97.7" in row
    start = text.plain.index(row)
    assert any(span.style and "red" in str(span.style) for span in text.spans
               if span.start <= start + row.index("LOST") < span.end)


def test_a_failed_sample_does_not_mark_gpus_lost() -> None:
    state = HostState("h")
    state.apply(ReadingChanged("h", "gpu", gpu_reading(gpu(0, 10_000), gpu(1, 1), at=100.0)))
    failed = Reading("gpu", GpuStatus("nvml", (), sampled_at_s=100.0), 100.0, "nvml: timed out", 105.0)
    state.apply(ReadingChanged("h", "gpu", failed))
    assert all(g.lost_at_s is None for g in state.data("gpu").gpus)


# -- one backoff policy -----------------------------------------------------------------------
async def test_backoff_grows_to_its_cap_with_jitter_and_a_wake_cuts_it_short() -> None:
    b = Backoff(initial_s=1.0, cap_s=8.0, jitter=0.2)
    delays = [b.next_delay_s() for _ in range(6)]
    assert 0.8 <= delays[0] <= 1.2 and all(d <= 9.6 for d in delays) and delays[-1] >= 6.4
    b.failures = 5
    waiter = asyncio.ensure_future(b.sleep(3600))
    await asyncio.sleep(0)  # the waiter is waiting
    assert not waiter.done()
    b.wake()
    # True: woken, not timed out (an hour): no wall-clock bound needed (issue 27)
    assert await asyncio.wait_for(waiter, 60) is True and b.failures == 0


async def test_every_source_polls_at_once_when_the_connection_comes_back(tmp_path: Path) -> None:
    """After an outage a pane must not stay stale for its whole backoff (up to 30 s before)."""
    sim = HostSimulator(tmp_path / "h")
    await sim.start()
    try:
        await start_scenario(sim)
        profile = demo_profile(sim)
        session = HostSession(profile, SshTransport(sim_options(sim)), demo=True)
        state = HostState("127.0.0.1")
        runner = HostRunner(session, state, swap=SwapController)
        await runner.start()
        try:
            await wait_for(lambda: state.reading("host") is not None and state.reading("host").data, timeout=15)
            source = runner.sources["host"]
            source.backoff.failures = 10  # as after a long outage: its next wait would be the 30 s cap
            source.interval_s = 60.0
            before = state.reading("host").ok_at_s
            for conn in list(sim.open_connections):
                conn.close()
            await wait_for(lambda: state.connection.status == "reconnecting", timeout=10)
            await wait_for(lambda: state.connection.status == "connected", timeout=20)
            await wait_for(lambda: (state.reading("host").ok_at_s or 0) > before, timeout=5)
        finally:
            await runner.close()
    finally:
        await sim.stop()


# -- panes: the registry, and errors that show -------------------------------------------------
async def test_a_toy_pane_registered_once_is_in_the_help_the_palette_and_the_layout() -> None:
    from textual.widgets import Static

    from console.ui.app import ConsoleApp, help_text
    from console.ui.panes.base import ReadingPane
    from console.ui.panes.registry import PaneSpec, register, unregister

    class ToyPane(ReadingPane):
        def render_reading(self, reading: Reading[object] | None) -> Text:
            return Text(f"toy says {reading.data if reading else 'nothing'}")

    register(PaneSpec("toy", "9", "Toy", ("toy",), lambda state: ToyPane(), "`t` does toy things"))
    try:
        assert "9 Toy" in help_text() and "`t` does toy things" in help_text()
        state = HostState("h")
        app = ConsoleApp(state, None, mode="replay")
        async with app.run_test(size=(120, 40)) as pilot:
            pane = app.query_one("#toy-pane")
            assert isinstance(pane, ToyPane) and pane.border_title == "9 Toy"
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert "Maximize Toy" in titles
            state.apply(ReadingChanged("h", "toy", Reading("toy", "hello", time.time())))
            await pilot.pause()
            assert "toy says hello" in str(pane.render())
            await pilot.press("9")
            assert app.screen.maximized is pane
            assert isinstance(app.query_one("#gpu-pane"), Static)
    finally:
        unregister("toy")


async def test_a_pane_whose_render_fails_says_so_and_keeps_its_last_frame() -> None:
    from console.ui.app import ConsoleApp

    state = HostState("h")
    state.apply(ReadingChanged("h", "gpu", gpu_reading(gpu(0, 10_000), at=time.time())))
    app = ConsoleApp(state, None, mode="replay")
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one("#gpu-pane")
        good = str(pane.render())
        assert "H200" in good

        def broken(reading: object) -> Text:
            raise KeyError("memory_history")

        pane.render_reading = broken  # type: ignore[method-assign]
        state.apply(ReadingChanged("h", "gpu", gpu_reading(gpu(0, 20_000), at=time.time())))
        await pilot.pause()
        assert "render error: KeyError" in str(pane.border_subtitle)
        assert pane.has_class("-error")
        assert str(pane.render()) == good


# -- record and replay ------------------------------------------------------------------------
def _pane_texts(app: object) -> dict[str, str]:
    out = {}
    for key in ("gpu", "download", "service"):
        out[key] = str(app.query_one(f"#{key}-pane").render())  # type: ignore[attr-defined]
    log = app.query_one("#log-pane")  # type: ignore[attr-defined]
    out["log-status"] = str(log.query_one("#log-status").render())
    out["log-lines"] = "\n".join(log.log_widget.lines[-20:])
    return out


async def test_replay_of_a_recorded_demo_shows_the_same_panes_as_the_live_run(tmp_path: Path) -> None:
    from console.ui.app import ConsoleApp

    sim = HostSimulator(tmp_path / "h", speed=4.0)
    await sim.start()
    try:
        await start_scenario(sim)
        profile = demo_profile(sim)
        session = HostSession(profile, SshTransport(sim_options(sim)), demo=True)
        live = ConsoleApp.for_session(session, record=True, record_dir=tmp_path / "rec")
        async with live.run_test(size=(120, 40)) as pilot:
            await wait_for(lambda: all(live.state.reading(s) and live.state.reading(s).data
                                       for s in ("gpu", "download", "service", "server", "log")), timeout=30)
            first = live.state.reading("gpu").ok_at_s  # a few more readings recorded: the GPUs' next ones
            await wait_for(lambda: (live.state.reading("gpu").ok_at_s or 0) >= (first or 0) + 2, timeout=30)
            await pilot.pause()
            # Freeze the moment: the host's workers stop (the log pane renders from the state's
            # line store, so the state itself must stop moving), then the recording closes.
            await live.runner.close()
            await pilot.pause(0.3)
            live.recorder.close()
            # The screen flushes streaming news once a second at most: what the state holds now,
            # on the panes now (the replay below shows the state as it ends).
            live.host_screen.flush()
            await pilot.pause()
            live.state._subscribers.clear()
            live_texts = _pane_texts(live)
            moment = live.state.now()
            recorded = live.recorder.path
    finally:
        await sim.stop()
    recording = read_recording(recorded)
    assert recording.damage is None and recording.skipped == 0 and len(recording.entries) > 20
    state = HostState(recording.header["host"])
    replayer = Replayer(recording, state)
    replayer.apply_until(recording.duration_s + 1)
    state.clock = lambda: moment
    app = ConsoleApp(state, None, mode="replay")
    async with app.run_test(size=(120, 40)):
        await wait_for(lambda: _pane_texts(app) == live_texts, timeout=30, interval=0.1)
        assert _pane_texts(app) == live_texts


def _write(path: Path, lines: list[bytes], cut: int = 0) -> None:
    data = gzip.compress(b"".join(lines))
    path.write_bytes(data[:-cut] if cut else data)


def _header(version: int = 1) -> bytes:
    return json.dumps({"format": "gpuconsole-recording", "version": version, "host": "h"}).encode() + b"\n"


def _entry(t: float, event: object) -> bytes:
    return b'{"t":%.3f,"e":' % t + codec.encode_event(event) + b"}\n"  # type: ignore[arg-type]


def test_a_recording_with_a_bad_line_skips_it_and_counts_it(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl.gz"
    note = Notice("h", "t", "m")
    _write(path, [_header(), _entry(1.0, note), b'{"t":2.0,"e":{"event":"gpu-from-the-future"}}\n',
                  b"garbage\n", _entry(3.0, note)])
    rec = read_recording(path)
    assert (len(rec.entries), rec.skipped, rec.damage) == (2, 2, None)


def test_a_truncated_recording_replays_up_to_the_damage(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl.gz"
    entries = [_entry(float(i), Notice("h", "t", f"message {i}" * 20)) for i in range(200)]
    _write(path, [_header(), *entries], cut=200)
    rec = read_recording(path)
    assert rec.damage is not None and 0 < len(rec.entries) < 200


@pytest.mark.parametrize("content, why", [
    (None, "no such file"),
    (b"plain text, not gzip", "not a gpuconsole recording"),
    (gzip.compress(b'{"hello": 1}\n', mtime=0), "not a gpuconsole recording"),  # mtime 0: the same test id in every xdist worker
    (gzip.compress(_header(version=99), mtime=0), "format version 99"),
])
def test_replay_of_something_that_is_not_a_recording_is_one_line_and_exit_2(tmp_path: Path, content: bytes | None,
                                                                          why: str) -> None:
    path = tmp_path / "x.jsonl.gz"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(RecordingError, match=why):
        read_recording(path)
    out = subprocess.run([sys.executable, "-m", "console", "replay", str(path)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and why in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_a_recording_that_cannot_be_written_stops_with_a_notice_and_the_state_goes_on(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    state = HostState("h")
    notices: list[Notice] = []
    state.subscribe(lambda e: notices.append(e) if isinstance(e, Notice) else None)
    recorder = Recorder(state, blocker / "rec").start()
    assert recorder.error is not None and notices and "recording stopped" in notices[0].message
    state.apply(LogAppended("h", ()))  # the state goes on
    recorder.close()


def test_recordings_rotate_and_the_oldest_go_past_the_total(tmp_path: Path) -> None:
    state = HostState("h")
    recorder = Recorder(state, tmp_path, max_file_bytes=2_000, max_total_bytes=6_000, flush_every_s=0).start()
    import random

    rng = random.Random(1)
    for i in range(400):
        state.apply(Notice("h", "t", "".join(rng.choice("abcdefghij") for _ in range(200)), at_s=float(i)))
    recorder.close()
    files = sorted(tmp_path.glob("*.jsonl.gz"))
    assert len(recorder.paths) > 3
    assert sum(f.stat().st_size for f in files) <= 6_000 + 2_500
    assert recorder.path in files and all(f.stat().st_mode & 0o777 == 0o600 for f in files)


def test_decode_stats_are_typed_from_a_real_decode_line() -> None:
    from console.domain.analysis.log_state import LogTracker
    from console.host.parsers.sglang_log import parse_line

    # tests/data/sglang_real_lines.txt line 24, verbatim from a user's issue (PROVENANCE.md): speculative
    # decoding's accept length and CUDA graphs on one line.
    line = (DATA / "sglang_real_lines.txt").read_text().splitlines()[23]
    assert line.startswith("[2025-05-31 18:31:21 DP0 TP0] Decode batch.")
    tracker = LogTracker("x")
    tracker.feed([parse_line(line)])
    d = tracker.summary().last_decode
    assert d is not None
    assert (d.running_reqs, d.queue_reqs, d.gen_tokens_per_s, d.accept_len, d.cuda_graph, d.kv_usage) == (
        8, 0, 171.01, 2.90, True, 0.13)
    event = ReadingChanged("h", "log", Reading("log", tracker.summary(), 1.0))
    assert codec.decode_event(codec.encode_event(event)) == event
