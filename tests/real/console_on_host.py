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
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.config import HostProfile
from console.core.recording import Recorder
from console.core.runner import HostRunner
from console.core.state import HostState, Notice
from console.host.session import HostSession, make_transport
from console.domain.swap.controller import SwapController
from console.domain.swap.report import report_from_recording

WHO = "ana"


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
