"""The driven host of the swap's end-to-end tests (test_swap.py, test_container_swap.py,
test_swap_lived.py): the demo's Hub cache and data dirs, the host simulator with its story, a core
(session, state, runner, recorder) polling it over real SSH, and a bounded teardown.

One place for that set-up: each file once carried its own copy of these dozen lines."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from textual.app import App

from console.config import HostProfile
from console.core.recording import Recorder
from console.core.runner import HostRunner
from console.core.state import HostState
from console.demo.hostsim import HostSimulator
from console.demo.hostsim.downloader import DownloadPlan
from console.demo.hostsim.scenario import demo_profile, start_scenario, write_hub_cache
from console.host.session import HostSession, make_transport
from console.domain.swap.controller import SwapController
from console.core.derive.swap_view import (
    ApprovalChanged,
    AuditAppended,
    AuditEntry,
    DowntimeChanged,
    GateChanged,
    GateCheck,
    SwapSetup,
    SwapStep,
    SwapStepChanged,
)

BENCH_PLAN = [(2, 4, 64, 32)]  # one short sweep point: the swap's benchmark step, in seconds


@dataclass
class Driven:
    sim: HostSimulator
    state: HostState
    runner: HostRunner
    recorder: Recorder
    tmp_path: Path
    sshd: Any = None

    @property
    def audit(self) -> Path:
        """The demo's audit file (XDG_DATA_HOME is the test's own: see `demo_env`)."""
        return self.tmp_path / "data" / "gpuconsole" / "demo-audit.jsonl"

    def drop_connections(self) -> None:
        """Cut the console's SSH connections from the server side (sim: close them; OpenSSH: kill
        the per-connection sshd processes, children of the sshd this test started)."""
        if self.sshd is None:
            for conn in list(self.sim.open_connections):
                conn.close()
            return
        parent = self.sshd.process.pid
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry), signal.SIGKILL)


async def until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    """Wait for a condition (polled every 0.1 s); fails naming `what` after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if predicate():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def step(d: Driven, key: str) -> tuple[str, str]:
    s = d.state.swap.steps[key]
    return s.state, s.detail


async def run_step(d: Driven, key: str, timeout: float = 90) -> None:
    """Request a swap action (it must be accepted) and wait until the controller is idle again."""
    why = d.runner.swap.request(key)
    assert why is None, why
    await d.runner.swap.wait_idle(timeout)


def demo_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No Hub on the network, the demo's Hub cache under the test's dir, its data dir too."""
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:1")
    monkeypatch.setenv("GPUCONSOLE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    write_hub_cache(tmp_path / "cache", DownloadPlan())


@contextlib.asynccontextmanager
async def story_host(tmp_path: Path, *, scenario: str = "drive", speed: float = 8.0, oom: bool = False,
                     start: Callable[[HostSimulator], Awaitable[object]] | None = None) -> AsyncIterator[HostSimulator]:
    """The simulator with its story started (`start` replaces start_scenario); stopped at the end."""
    sim = HostSimulator(tmp_path / "host", speed=speed, scenario=scenario)
    await sim.start()
    try:
        if start is not None:
            await start(sim)
        else:
            await start_scenario(sim, DownloadPlan(tree_listing=True) if scenario == "swap" else None, oom=oom)
        yield sim
    finally:
        await asyncio.wait_for(sim.stop(), 60)


def sshd_for(sim: HostSimulator, directory: Path) -> Any:
    """OpenSSH's sshd whose sessions see the simulated host's fake tools (systemctl, systemd-run,
    hf, nvidia-smi, journalctl) first on their PATH, and its sandbox."""
    from console.demo.sshd import SshdError, find_sshd, start_sshd

    if find_sshd() is None or os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("sshd tests must run in CI (as root, with openssh-server)")
        pytest.skip("needs OpenSSH's sshd, as root")
    env = " ".join(f"{k}={v}" for k, v in sim.env().items() if k in ("PATH", "GPUSIM_ROOT", "PYTHONPATH", "HOME",
                                                                   "PYTHONDONTWRITEBYTECODE"))
    try:
        return start_sshd(directory, extra_config=f"SetEnv {env}\n")
    except SshdError as exc:
        pytest.fail(str(exc))


@contextlib.asynccontextmanager
async def driven_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, scenario: str = "drive",
                      speed: float = 8.0, oom: bool = False, via: str = "sim",
                      start: Callable[[HostSimulator], Awaitable[object]] | None = None,
                      profile: Callable[[HostSimulator, HostProfile], HostProfile] | None = None,
                      swap_poll_s: float | None = 0.2, bench_plan: list[tuple[int, int, int, int]] | None = BENCH_PLAN,
                      **profile_changes: object) -> AsyncIterator[Driven]:
    """A core on the story's host, through the in-process simulator's SSH server (via="sim") or
    OpenSSH's sshd (via="sshd"); `profile` changes the demo's profile. `swap_poll_s`/`bench_plan` None: the controller's own defaults."""
    demo_env(tmp_path, monkeypatch)
    async with story_host(tmp_path, scenario=scenario, speed=speed, oom=oom, start=start) as sim:
        prof = demo_profile(sim).with_overrides({"gpu_interval_s": 0.5, **profile_changes})
        if profile is not None:
            prof = profile(sim, prof)
        sshd: Any = None
        if via == "sshd":
            sshd = sshd_for(sim, tmp_path / "sshd")
            prof = prof.with_overrides({"port": sshd.port, "user": sshd.user, "identity": str(sshd.client_key),
                                        "known_hosts": str(sshd.known_hosts)})
        session = HostSession(prof, make_transport(prof), demo=True, bench_path=tmp_path / "bench.jsonl")
        state = HostState(sim.host_path("/"), label="sim")
        runner = HostRunner(session, state, swap=SwapController)
        if swap_poll_s is not None:
            runner.swap.poll_s = swap_poll_s
        if bench_plan is not None:
            runner.swap.bench_plan = list(bench_plan)
        recorder = Recorder(state, tmp_path / "recordings").start()
        runner.announce()
        await runner.start()
        try:
            yield Driven(sim, state, runner, recorder, tmp_path, sshd)
        finally:
            recorder.close()
            runner.swap.cancel()
            # Bounded: a teardown that hangs is reported as such (and the simulator still stops).
            hung = None
            try:
                await asyncio.wait_for(runner.close(), 60)
            except asyncio.TimeoutError:
                hung = "runner.close"
            if sshd is not None:
                sshd.stop()
            if hung:
                raise AssertionError(f"teardown hung in {hung}")


def demo_app(sim: HostSimulator, tmp_path: Path, **profile_changes: object) -> Any:
    """The console's app on the story's host, recording into tmp_path/rec (the palette's report
    is written next to the recording)."""
    from console.ui.app import ConsoleApp

    prof = demo_profile(sim).with_overrides(profile_changes)
    return ConsoleApp.for_session(HostSession(prof, make_transport(prof), demo=True,
                                              bench_path=tmp_path / "bench.jsonl"),
                                  record=True, record_dir=tmp_path / "rec")


EVENTS = [
    SwapStepChanged("h", SwapStep("stop_old", "Stop", "done", 1.0, 2.5, "drained", ("systemctl stop -- x",), "ana")),
    GateChanged("h", (GateCheck("download", False, "partial"), GateCheck("fit", None, "no GPU", "ben")), 3.0),
    DowntimeChanged("h", 10.0, "the old server's last served request (its log)", 171.0, "new ready"),
    ApprovalChanged("h", "r1", "stop_old", ("timeout -k 5 120 systemctl stop -- a.service",), "ana", 1.0,
                    "granted", "ben", 2.0),
    AuditAppended("h", AuditEntry("ana", 1.0, "stop_old", "systemctl stop", 0, "ok", 0.5, "")),
    SwapSetup("h", "old.service", "new.service", "Qwen/X", "/shared/m", True, True, False, "stop_old"),
]


class PlanHost(App[None]):
    def __init__(self, screen: Any) -> None:
        super().__init__()
        self._first = screen

    def on_mount(self) -> None:
        self.push_screen(self._first)


def narrow_plan_state() -> HostState:
    state = HostState("h", label="h")
    state.apply(SwapSetup("h", "sglang-qwen397b-nvfp4.service", "sglang-qwen122b-bf16.service",
                          "Qwen/Qwen3.5-122B-A10B", "/shared/models/m"))
    state.apply(SwapStepChanged("h", SwapStep("stop_old", "Stop the old service and wait for its memory",
                                              "done", 100.0, 104.0, "drained", observed=True)))
    state.apply(SwapStepChanged("h", SwapStep("start_new", "Start the new service and follow it to ready",
                                              "done", 104.5, 166.4, "ready", who="ana")))
    state.apply(DowntimeChanged("h", 99.6, "the old server's last served request, in its log", 166.4,
                                "the new server's first answered /health_generate"))
    return state


def as_recorded(events: list[Any], host: str = "h") -> list[Any]:
    """What a recording of a live session holds for these host events: each event, then the swap
    facts the live observer derived from it (the report reads those, it never derives them)."""
    from console.core.derive.swap_observer import SwapObserver

    live = HostState(host)
    observer = SwapObserver(live)
    out: list[Any] = []
    for event in events:
        live.apply(event)
        out.append(event)
        for derived in observer.see(event):
            if observer.still_valid(derived):
                live.apply(derived)
                out.append(derived)
    return out
