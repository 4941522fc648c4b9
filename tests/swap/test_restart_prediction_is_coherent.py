"""The restart's prediction covers the whole downtime it predicts (issue 33, item 4): the stop and
drain (learned from this host's earlier swaps, else one named assumption), the unit's start up to
the server's first log line (from systemd's "Started" line before an earlier boot), then the boot's
phases; every assumption is named once; beside's measured downtime is the clock the observer
wrote, never a 0 put in for a missing figure."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path

from console.core.derive.swap_view import SwapSetup, SwapStep, SwapStepChanged
from console.core.recording import Recorder
from console.core.state import DowntimeChanged, HostState, LogAppended, PathEvent, ReadingChanged
from console.domain.analysis.service_report import HostFacts, build_report, side_from_text
from console.domain.swap import downtime_report
from console.domain.swap import prediction as pred
from console.domain.swap.report import render, report_from_recording
from console.host.parsers.sglang_log import LogEvent, parse_line
from console.model import Reading

T0 = dt.datetime(2026, 12, 1, 10, 0, 0).timestamp()
BOOT = [  # seconds after the unit's start, the lines SGLang logs
    (0.5, "server_args=ServerArgs(model_path='/m/new', tp_size=2, port=30000)"),
    (1.0, "Load weight begin. avail mem=94.21 GB"),
    (11.0, "Load weight end. elapsed=10.00 s, type=X, dtype=torch.bfloat16, avail mem=36.18 GB, mem usage=58.03 GB."),
    (11.5, "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 893440, K size: 5.11 GB, V size: 5.11 GB"),
    (11.6, "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=4, avail mem=5.84 GB"),
    (13.6, "Capture target decode CUDA graph end. bs=[1, 2, 4], elapsed=2.00 s, mem usage=1.58 GB, avail mem=4.26 GB."),
    (14.0, "The server is fired up and ready to roll!"),
]


def stamp(at: float) -> str:
    return dt.datetime.fromtimestamp(at).isoformat(sep=" ", timespec="milliseconds")


def boot_lines(start: float, *, with_unit: bool = True) -> list[LogEvent]:
    out = [LogEvent("unit", "Started new.service.", ts=stamp(start), fields={
        "kind": "unit started", "transition": "started", "unit": "new.service"})] if with_unit else []
    for offset, text in BOOT:
        rank = "" if text.startswith(("server_args", "The server")) else " TP0"
        out.append(replace(parse_line(f"[{stamp(start + offset)}{rank}] {text}"), ts=stamp(start + offset)))
    return out


def test_a_boot_carries_the_units_start_up_to_its_first_log_line() -> None:
    (sample,) = pred.boots_from_events(boot_lines(T0))
    assert sample.start_s is not None and abs(sample.start_s - 0.5) < 0.01
    (without,) = pred.boots_from_events(boot_lines(T0, with_unit=False))
    assert without.start_s is None


def test_the_restart_prediction_has_its_stop_and_drain_and_start_phases() -> None:
    (sample,) = pred.boots_from_events(boot_lines(T0))
    p = pred.predict_restart([sample], sample.weights_bytes, pred.Residency(0, int(sample.weights_bytes), 1))
    assert list(p.phases)[:2] == ["stop", "start"]
    assert p.phases["stop"] == pred.ASSUMED_STOP_S and abs(p.phases["start"] - 0.5) < 0.01
    assert p.total_s == sum(p.phases.values())
    stop_said = [a for a in p.assumptions if "stop and drain" in a]
    assert len(stop_said) == 1 and "counted as 0" not in stop_said[0]
    assert "stop and drain 1 s" in p.text
    # an earlier swap's stop on this host replaces the assumption
    learned = pred.predict_restart([replace(sample, stop_s=7.0)], sample.weights_bytes, None)
    assert learned.phases["stop"] == 7.0 and not any("stop and drain" in a for a in learned.assumptions)


def test_an_earlier_swaps_stop_in_the_recordings_is_the_stop_before_the_next_boot(tmp_path: Path) -> None:
    state = HostState("h", label="h")
    rec = Recorder(state, tmp_path).start()
    state.apply(SwapStepChanged("h", SwapStep("stop_old", "Stop", "done", T0 - 6, T0 - 2.5, "stopped", who="ana")))
    state.apply(LogAppended("h", tuple(boot_lines(T0))))
    rec.close()
    samples, problems = pred.samples_from_recordings(tmp_path)
    assert not problems and [s.stop_s for s in samples] == [3.5]


def test_each_assumption_is_named_once_in_the_report(tmp_path: Path) -> None:
    (sample,) = pred.boots_from_events(boot_lines(T0))
    p = pred.predict_restart([sample], sample.weights_bytes, pred.Residency(0, int(sample.weights_bytes), 1))
    plan = {"chosen": "restart", "forced": False, "options": [
        {"path": "restart", "possible": True, "reason": p.text.removeprefix("restart: "),
         "predicted_downtime_s": p.total_s, "details": []}]}
    state = HostState("h", label="h")
    state.apply(PathEvent("h", "plan", json.dumps({"plan": plan, "restart": p.to_json()}), T0))
    tables = downtime_report.tables({"downtime_s": None, "predicted_downtime_s": p.total_s,
                                     **downtime_report.section(state, None)})
    notes = tables[0][3]
    assert sum("GB weights at" in n for n in notes) == 1, notes
    assert sum("stop and drain 1 s assumed" in n for n in notes) == 1, notes


def _containers(started: float | None) -> ReadingChanged:
    """The service reading of a container host: the old container serving since `started` (Docker's
    State.StartedAt), the new one created."""
    unit = "[Service]\nExecStart=/py -m sglang.launch_server --model-path /m/{m} --tp 2 --port 30000\n"
    old = replace(side_from_text("sglang-old", unit.format(m="old")), active_state="active", started_at_s=started)
    new = replace(side_from_text("sglang-new", unit.format(m="new")), active_state="inactive")
    return ReadingChanged("h", "service", Reading("service", build_report(old, new, HostFacts()), ok_at_s=T0 + 20))


def test_a_containers_boot_carries_dockers_start_up_to_its_first_log_line(tmp_path: Path) -> None:
    """In a container no systemd "Started" line comes before the launch: the container's start is
    Docker's (State.StartedAt, in the service reading), and the restart's prediction counts it (it
    was counted as 0, and the container restart was predicted 16 % short on the simulator)."""
    state = HostState("h", label="h")
    rec = Recorder(state, tmp_path).start()
    state.apply(LogAppended("h", tuple(boot_lines(T0, with_unit=False))))
    state.apply(_containers(T0 - 0.8))  # read after the boot, as the console does: the start stays in it
    rec.close()
    (sample,), problems = pred.samples_from_recordings(tmp_path)
    assert not problems and sample.start_s is not None and abs(sample.start_s - 1.3) < 0.01  # 0.8 + the launch's 0.5
    p = pred.predict_restart([sample], sample.weights_bytes, None, container=True)
    assert abs(p.phases["start"] - 1.3) < 0.01 and not any("first log line" in a for a in p.assumptions)
    # a start long before the launch (a container up for hours, its boot's log lost) is no boot's start
    later = HostState("h", label="h")
    rec = Recorder(later, tmp_path / "b").start()
    later.apply(LogAppended("h", tuple(boot_lines(T0, with_unit=False))))
    later.apply(_containers(T0 - 3600))
    rec.close()
    (old,), _ = pred.samples_from_recordings(tmp_path / "b")
    assert old.start_s is None
    said = pred.predict_restart([old], old.weights_bytes, None, container=True).assumptions
    assert [a for a in said if "first log line" in a] == [
        "the container's start (Docker's start event) → the server's first log line is not in the earlier boots' "
        "logs: counted as 0"]


def _beside(state: HostState, *, clock: bool) -> None:
    state.apply(SwapSetup("h", "old.service", "new.service", "o/new", "/m/new"))
    plan = {"chosen": "beside", "forced": False, "options": [
        {"path": "beside", "possible": True, "reason": "fits", "predicted_downtime_s": 0.0, "details": []}]}
    state.apply(PathEvent("h", "plan", json.dumps({"plan": plan}), T0))
    state.apply(SwapStepChanged("h", SwapStep("beside", "Beside", "done", T0, T0 + 18, "ready", who="ana")))
    state.apply(PathEvent("h", "outcome", json.dumps({"path": "beside"}), T0 + 30))  # no figure in it
    if clock:
        state.apply(DowntimeChanged("h", T0 + 30, "beside: the router moved traffic before the old server stopped",
                                    T0 + 30, "beside: no request was refused"))


def _recorded(tmp_path: Path, clock: bool) -> dict:
    state = HostState("h", label="h")
    rec = Recorder(state, tmp_path).start()
    _beside(state, clock=clock)
    rec.close()
    assert rec.path is not None
    return report_from_recording(rec.path)


def test_beside_zero_downtime_is_the_observers_clock_and_unknown_without_it(tmp_path: Path) -> None:
    with_clock = _recorded(tmp_path / "a", True)
    (row,) = with_clock["downtime_paths"]["phases"]
    assert row["measured_s"] == 0.0 and with_clock["downtime_s"] == 0.0
    without = _recorded(tmp_path / "b", False)
    (row,) = without["downtime_paths"]["phases"]
    assert row["measured_s"] is None and without["downtime_s"] is None
    assert "| total downtime | 0.0 s | – |" in render(without, "md")
