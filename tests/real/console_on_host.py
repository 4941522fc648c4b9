"""The console's own core (session, state, runner, swap controller, recorder) on a real host: the
real systemd (tests/real/systemd_host.py) over its sshd, or the real dockerd over OpenSSH's sshd
(tests/real/docker_host.py). Nothing is stood in: every swap step is the controller's, asked for
as an operator asks (`request(key, who)`), its commands run by the real daemons, the report read
from the session's own recording.

Each run is driven in an event loop of its own (`asyncio.run`), so a module's fixture can run one
whole swap once and its tests read the report section by section."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from console.config import HostProfile
from console.core.derive.swap_observer import log_time
from console.core.recording import Recorder
from console.core.runner import HostRunner
from console.core.state import HostState, Notice
from console.host.session import HostSession, make_transport
from console.domain.swap.controller import SwapController
from console.domain.swap.report import SECTIONS, render, report_from_recording

WHO = "ana"
# The bounds every real swap's console runs under: GPU readings twice a second, and room for a loaded
# two-core machine (a boot, the drain, the SSH connect).
LIVED_BOUNDS: dict[str, float] = dict(gpu_interval_s=0.5, ready_timeout_s=150.0, drain_timeout_s=90.0,
                                      connect_timeout_s=20.0)
HF_TOKEN = "hf_sImUlAtEdToKeNnOtReAl"  # the seed units' (console/demo/hostsim/units/): never in a report


@dataclass
class LivedSwapFacts:
    """What every real swap module keeps of its one swap, as the console reported it: the report,
    the plan's steps, what each step said (state, detail), the downtime, when the swap began (the
    host's clock), and the audit file's entries. Each module's LivedSwap adds what the host recorded."""

    report: dict[str, Any]
    steps: dict[str, Any]
    said: dict[str, tuple[str, str]]
    downtime: Any
    began_s: float
    audit_file: list[dict[str, Any]]


def console_profile(name: str, ssh: Any, **fields: Any) -> HostProfile:
    """The console's profile of a real host reached over `ssh` (the SshOptions of its sshd: the
    systemd host's `ssh_options()`, OpenSSH's `options()` in front of dockerd), under LIVED_BOUNDS;
    `fields` name the service (unit or container, the draft, the router) and may change a bound."""
    return HostProfile(name=name, host=ssh.host, port=ssh.port, user=ssh.user, identity=ssh.identity,
                       known_hosts=ssh.known_hosts, **{**LIVED_BOUNDS, **fields})


@dataclass
class Console:
    """The console's core, started on one host."""

    state: HostState
    runner: HostRunner
    recorder: Recorder
    notices: list[Notice] = field(default_factory=list)

    @property
    def swap(self) -> Any:
        return self.runner.swap

    def step(self, key: str) -> tuple[str, str]:
        s = self.state.swap.steps[key]
        return s.state, s.detail

    async def run_step(self, key: str, timeout_s: float = 180) -> tuple[str, str]:
        """Ask for one swap action as `WHO` (it must be accepted), wait until it ended."""
        why = self.swap.request(key, WHO)
        assert why is None, f"{key} refused: {why}"
        await self.swap.wait_idle(timeout_s)
        return self.step(key)

    async def until(self, predicate: Callable[[], object], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")

    def memory_after_on(self, gpus: set[int]) -> bool:
        """The swap's memory fact "after" (the observer's, followed a minute from the readings once the swap
        was over: what the report says) holds memory on GPUS and on no other."""
        after = (self.state.swap.memory().get("after") or {}).get("gpus", ())
        return {r["gpu"] for r in after if r["used_mib"]} == gpus

    def report(self) -> dict[str, Any]:
        self.recorder.flush()
        assert self.recorder.path is not None
        return report_from_recording(self.recorder.path, in_progress=True)


@contextlib.asynccontextmanager
async def console_on(profile: HostProfile, directory: Path, *, label: str, poll_s: float = 0.3) -> AsyncIterator[Console]:
    """The console's core on `profile`'s host, recording into DIRECTORY/rec, its audit in
    DIRECTORY/audit.jsonl; closed (bounded) at the end."""
    directory.mkdir(parents=True, exist_ok=True)
    session = HostSession(profile, make_transport(profile), bench_path=directory / "bench.jsonl")
    state = HostState(label, label=label)
    runner = HostRunner(session, state, swap=SwapController)
    runner.swap.poll_s = poll_s
    runner.swap.audit_file = directory / "audit.jsonl"
    notices: list[Notice] = []
    state.subscribe(lambda e: notices.append(e) if isinstance(e, Notice) else None)
    recorder = Recorder(state, directory / "rec").start()
    runner.announce()
    await asyncio.wait_for(runner.start(), 60)
    console = Console(state, runner, recorder, notices)
    try:
        yield console
    finally:
        runner.swap.cancel()
        try:
            await asyncio.wait_for(runner.close(), 60)
        finally:
            recorder.close()


def ready_reading(console: Console, unit: str | None) -> bool:
    """The server source says ready for `unit` (a container: its port answers) and the service
    pane has read the host."""
    r = console.state.reading("server")
    s = r.data if r is not None else None
    return s is not None and s.status == "ready" and (unit is None or s.unit == unit) \
        and console.state.data("service") is not None and console.state.data("gpu") is not None


# -- a lived swap's report read against the host's own records (the report modules of tests/real) ---------
def audit_entries(directory: Path) -> list[dict[str, Any]]:
    """The console's audit file as `console_on` wrote it (DIRECTORY/audit.jsonl), one entry a line."""
    text = (directory / "audit.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def server_stamp(line: str) -> float:
    """The server's own stamp of its log line ("[2026-12-03 17:09:49] ...": whole seconds, the host's
    time) as epoch seconds."""
    value = log_time(line[1:20])
    assert value is not None, line
    return value


def logged(lines: Sequence[tuple[Any, ...]], text: str, *, since_s: float = 0.0, last: bool = False,
           who: str = "the server") -> tuple[Any, ...]:
    """The first (with LAST, the last) of a server's LINES containing TEXT at or after SINCE_S; a line is
    a tuple with the host's time first and the message last (`docker logs -t`: (time, line); the unit's
    journal: (time, _PID, MESSAGE))."""
    found = [x for x in lines if text in x[-1] and x[0] >= since_s]
    assert found, f"{who} logged no {text!r} since {since_s:.3f}: {[x[-1] for x in lines][-8:]}"
    return found[-1] if last else found[0]


def check_step_rows(report: dict[str, Any], steps: dict[str, Any]) -> None:
    """Each step the report says done: its duration and start are the live step's (the observer's times)."""
    done = [s for s in report["steps"] if s["state"] == "done"]
    assert done, report["steps"]
    for row in done:
        live = steps[row["key"]]
        assert row["duration_s"] == pytest.approx(live.ended_at_s - live.started_at_s, abs=0.01), (row, live)
        assert row["started"] == time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(live.started_at_s)), (row, live)


def check_in_place_gpu_memory(report: dict[str, Any], gpus: list[int], pid: int) -> None:
    """An in-place update's GPU section: the same GPUs held before and after, by the one serving
    process (`pid`, the host's own: systemd's MainPID, Docker's State.Pid), nothing freed or stopped."""
    g = report["gpu"]
    held = {x["gpu"]: x for x in g["before"] if x["used_mib"]}
    after = {x["gpu"]: x for x in g["after"] if x["used_mib"]}
    assert sorted(held) == sorted(after) == gpus, g
    pids = {p.split()[0] for x in [*held.values(), *after.values()] for p in x["processes"]}
    assert pids == {str(pid)}, g
    assert g["freed"] == [] and g["freed_by"] == "the swap" and g["stopped"] == [], g
    assert g["after_what"] == "after the update (the new weights serving)", g


def check_audit_is_the_file(report: dict[str, Any], audit_file: list[dict[str, Any]]) -> None:
    """The report's audit is the console's audit file, entry by entry (who, action, command), all by WHO."""
    said = [(a["who"], a["action"], a["command"]) for a in report["audit"]]
    assert said == [(a["who"], a["action"], a["command"]) for a in audit_file], said
    assert {a["who"] for a in report["audit"]} == {WHO}, said


def check_renders_every_section(report: dict[str, Any], fmt: str, path: str, *, shows: Sequence[str] = (),
                                never: Sequence[str] = ("boot to ready",)) -> None:
    """The report rendered as FMT (md, html, json): every section's heading, the PATH taken, what it SHOWS,
    never what it must NEVER say, and no secret of the host's."""
    text = render(report, fmt)
    assert HF_TOKEN not in text  # the unit's HF_TOKEN never reaches the report
    if fmt == "json":
        assert json.loads(text)["swap_path"] == path
        assert all(s in text for s in shows), shows
        return
    plain = text.replace("&gt;", ">").replace("\\", "")
    for section in SECTIONS:
        assert (f"## {section}" if fmt == "md" else f">{section}</h2>") in plain, section
    for said in shows:
        assert said in plain, said
    for wrong in never:
        assert wrong not in plain, wrong


def router_stamp(router_log: str, text: str) -> float:
    """The router's own stamp of its first line containing TEXT (whole seconds): the beside modules'
    router writes `STAMP message` lines to a file the test reads back."""
    for line in router_log.splitlines():
        if text in line:
            value = log_time(line.split(" ", 1)[0].replace("T", " "))
            assert value is not None, line
            return value
    raise AssertionError(f"the router logged no {text!r}: {router_log[-800:]}")
