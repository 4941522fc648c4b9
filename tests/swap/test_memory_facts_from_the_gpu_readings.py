"""GPU memory before, after the stop, after and freed are the observer's facts, written into the swap
state from the GPU readings (issue 33, item 3): "before" is the reading before the host began to
change as its own facts date that (stepped back over a drain already under way), "freed" is before
minus the drained reading, "after" the reading once the swap was over (followed for a minute while it
changes). The report renders
them as the state holds them and never picks readings of its own."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from console.core.derive.swap_observer import SwapObserver
from console.core.derive.swap_view import (
    MEMORY,
    AuditAppended,
    AuditEntry,
    SwapSetup,
    SwapStep,
    SwapStepChanged,
    freed_lines,
)
from console.core.recording import Recorder
from console.core.state import DowntimeChanged, HostState, LogAppended, PathEvent, ReadingChanged
from console.domain.analysis.service_report import side_from_text
from console.domain.swap.report import render, report_from_recording
from console.host.parsers.sglang_log import LogEvent
from console.model import GpuDevice, GpuStatus, Reading

T0 = dt.datetime(2026, 12, 1, 10, 0, 0).timestamp()
OLD, NEW = "old.service", "new.service"
UNIT = "[Service]\nExecStart=/opt/sglang/.venv/bin/python -m sglang.launch_server --model-path /m/{m} --tp 2 --port 30000\n"


class Host:
    """A HostState and its observer; every event goes through both, as the live core does."""

    def __init__(self) -> None:
        self.state = HostState("h", clock=lambda: T0 + 1000)
        self.observer = SwapObserver(self.state)
        self.feed(SwapSetup("h", OLD, NEW, "o/new", "/m/new"))

    def feed(self, event: Any) -> None:
        self.state.apply(event)
        for derived in self.observer.see(event):
            if self.observer.still_valid(derived):
                self.state.apply(derived)

    def units(self, at: float, old: str, new: str) -> None:
        sides = [replace(side_from_text(name, UNIT.format(m=name)), active_state=active)
                 for name, active in ((OLD, old), (NEW, new))]
        self.feed(ReadingChanged("h", "service", Reading("service", SimpleNamespace(old=sides[0], new=sides[1]),
                                                         ok_at_s=at)))

    def gpu(self, at: float, *used: int) -> None:
        status = GpuStatus("nvidia-smi", tuple(GpuDevice(i, "RTX", None, m, 97887, None, None, None, None)
                                               for i, m in enumerate(used)), sampled_at_s=at)
        self.feed(ReadingChanged("h", "gpu", Reading("gpu", status, ok_at_s=at + 0.1)))

    def stopping(self, at: float) -> None:
        stamp = dt.datetime.fromtimestamp(at).isoformat(sep=" ", timespec="milliseconds")
        self.feed(LogAppended("h", (LogEvent("unit", f"Stopping {OLD}...", ts=stamp, fields={
            "kind": "unit stopping", "transition": "stopping", "unit": OLD}),)))

    def server(self, at: float, status: str) -> None:
        s = SimpleNamespace(unit=NEW, unit_state="active", status=status, reason=f"{status}: /health 200")
        self.feed(ReadingChanged("h", "server", Reading("server", s, ok_at_s=at)))


def _used(part: dict[str, Any]) -> list[int]:
    return [g["used_mib"] for g in part["gpus"]]


def test_an_operators_restart_gives_before_stopped_freed_and_after_from_the_readings() -> None:
    h = Host()
    h.units(T0, "active", "inactive")
    h.gpu(T0 + 0.5, 91204, 91210)
    h.gpu(T0 + 1.5, 91204, 91210)
    h.gpu(T0 + 2.5, 80000, 81000)  # already falling: systemd's line dates the stop just after it
    h.stopping(T0 + 2.4)
    h.gpu(T0 + 3.5, 0, 512)  # drained
    h.units(T0 + 5, "inactive", "active")
    h.gpu(T0 + 8, 30000, 30000)  # the new server booting: not "after"
    h.server(T0 + 12, "ready")
    h.gpu(T0 + 13, 85970, 85974)
    assert _used(h.state.swap.memory()["after"]) == [85970, 85974]
    h.gpu(T0 + 14, 85971, 85974)  # followed while it changes, for a minute after the ready
    h.gpu(T0 + 80, 2000, 2000)  # then no more: the swap's "after" is not the host's later life
    m = h.state.swap.memory()
    assert _used(m["before"]) == [91204, 91210] and m["before"]["at"] == T0 + 1.5
    assert _used(m["stopped"]) == [0, 512] and m["stopped"]["at"] == T0 + 3.5
    assert _used(m["after"]) == [85971, 85974] and m["after"]["what"] == "after the new server was ready"
    assert m["freed_by"] == "the stop"
    assert freed_lines(m) == ["GPU 0 91,204 MiB", "GPU 1 90,698 MiB (512 MiB left)"]


def test_a_stop_dated_back_by_the_hosts_facts_moves_before_back_with_it() -> None:
    h = Host()
    h.units(T0, "active", "inactive")
    h.gpu(T0 + 1, 91204, 91210)
    h.gpu(T0 + 2, 91000, 91000)
    h.gpu(T0 + 3, 70000, 70000)
    h.units(T0 + 3.2, "inactive", "inactive")  # the poll sees it stopped: dated by the memory's fall (T0 + 3)
    h.gpu(T0 + 3.3, 60000, 60000)
    assert _used(h.state.swap.memory()["before"]) == [91000, 91000]
    # the stop command's reply, read later, says it was issued earlier
    h.feed(AuditAppended("h", AuditEntry("ana", T0 + 3.4, "stop_old", f"timeout -k 5 120 systemctl stop -- {OLD}",
                                         0, "", 2.0)))
    h.gpu(T0 + 4, 0, 0)
    assert _used(h.state.swap.memory()["before"]) == [91204, 91210]


def test_a_drain_read_before_the_stops_reply_is_the_stopped_reading_at_the_reply() -> None:
    """`docker stop` and `systemctl stop` return once the server has gone: the drained reading can
    come first. The stop's reply then gives "stopped" and "freed" at once (the stop step's words
    read them as soon as it sees the drain: they said no "freed" in one run of the container swap)."""
    h = Host()
    h.units(T0, "active", "inactive")
    h.gpu(T0 + 1, 91204, 91210)
    h.gpu(T0 + 3, 0, 0)
    h.feed(AuditAppended("h", AuditEntry("ana", T0 + 3.5, "stop_old", f"timeout -k 5 120 systemctl stop -- {OLD}",
                                         0, "", 1.5)))
    m = h.state.swap.memory()
    assert m["stopped"]["at"] == T0 + 3 and freed_lines(m) == ["GPU 0 91,204 MiB",
                                                              "GPU 1 91,210 MiB"]


def test_nothing_is_written_before_a_swap_begins() -> None:
    h = Host()
    h.units(T0, "active", "inactive")
    for i in range(5):
        h.gpu(T0 + i, 91204, 91210)
    assert h.state.swap.memory() == {} and MEMORY not in h.state.swap.paths


def _recorded(tmp_path: Path, fill) -> Path:  # noqa: ANN001
    state = HostState("h", label="h")
    rec = Recorder(state, tmp_path).start()
    fill(state)
    rec.close()
    assert rec.path is not None
    return rec.path


def _gpus(at: float, *used: int) -> ReadingChanged:
    status = GpuStatus("nvidia-smi", tuple(GpuDevice(i, "RTX", None, m, 97887, None, None, None, None)
                                           for i, m in enumerate(used)), sampled_at_s=at)
    return ReadingChanged("h", "gpu", Reading("gpu", status, ok_at_s=at))


def _swap(state: HostState) -> None:
    state.apply(SwapSetup("h", OLD, NEW, "o/new", "/m/new"))
    state.apply(_gpus(T0, 50000, 50000))  # readings the report must not pick from
    state.apply(SwapStepChanged("h", SwapStep("stop_old", "Stop", "done", T0 + 1, T0 + 2, "stopped", who="ana")))
    state.apply(_gpus(T0 + 2, 0, 0))
    state.apply(SwapStepChanged("h", SwapStep("start_new", "Start", "done", T0 + 3, T0 + 9, "ready", who="ana")))
    state.apply(DowntimeChanged("h", T0 + 1, "the stop command", T0 + 9, "new.service ready"))
    state.apply(_gpus(T0 + 10, 40000, 40000))


def test_the_report_renders_the_memory_facts_of_the_state_and_picks_no_reading(tmp_path: Path) -> None:
    fact = {"before": {"at": T0 - 5, "gpus": [{"gpu": 0, "used_mib": 91204, "total_mib": 97887, "processes": []},
                                              {"gpu": 1, "used_mib": 91210, "total_mib": 97887, "processes": []}]},
            "stopped": {"at": T0 + 2, "gpus": [{"gpu": 0, "used_mib": 0, "total_mib": 97887, "processes": []},
                                               {"gpu": 1, "used_mib": 512, "total_mib": 97887, "processes": []}]},
            "after": {"at": T0 + 10, "since": T0 + 9, "what": "after the new server was ready",
                      "gpus": [{"gpu": 0, "used_mib": 85970, "total_mib": 97887, "processes": []},
                               {"gpu": 1, "used_mib": 85974, "total_mib": 97887, "processes": []}]},
            "freed": [{"gpu": 0, "mib": 91204, "from": 91204, "to": 0}, {"gpu": 1, "mib": 90698, "from": 91210, "to": 512}],
            "freed_by": "the stop"}

    def fill(state: HostState) -> None:
        _swap(state)
        state.apply(PathEvent("h", MEMORY, json.dumps(fact), T0 + 10))

    r = report_from_recording(_recorded(tmp_path, fill))
    g = r["gpu"]
    assert [x["used_mib"] for x in g["before"]] == [91204, 91210]
    assert [x["used_mib"] for x in g["stopped"]] == [0, 512]
    assert [x["used_mib"] for x in g["after"]] == [85970, 85974]
    assert [x["mib"] for x in g["freed"]] == [91204, 90698]
    md = render(r, "md").split("## GPU memory")[1].split("##")[0]
    assert "| 0 | 91,204 | 0 | 91,204 | 85,970 | 97,887 |" in md and "freed: before minus after the stop" in md
    assert "50,000" not in md and "40,000" not in md


def test_a_recording_without_the_facts_says_unknown_rather_than_picking_readings(tmp_path: Path) -> None:
    r = report_from_recording(_recorded(tmp_path, _swap))
    assert r["gpu"]["before"] == [] and r["gpu"]["after"] == []
    assert "GPU memory unknown" in render(r, "md")

