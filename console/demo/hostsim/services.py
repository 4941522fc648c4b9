"""The simulated host's systemd: unit files in the sandbox, real processes for active units.

A unit's process is its own ExecStart run for real (the fake `sglang.launch_server`), so
`systemctl show -p MainPID` and `/proc/PID/cmdline` tell the truth. State lives in
`.sim/units.json`, which the simulated `systemctl` reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from console.demo.hostsim import drive
from console.host.parsers.systemd import parse_unit

if TYPE_CHECKING:
    from console.demo.hostsim.server import HostSimulator

UNITS_DIR = "/etc/systemd/system"
TEMPLATES = Path(__file__).parent / "units"


@dataclass
class Timeline:
    """When each unit runs, in scenario seconds: [start, stop)."""

    windows: dict[str, tuple[float, float]]


def install_units(sim: HostSimulator, names: list[str], server_port: int) -> None:
    units = sim.path(UNITS_DIR)
    units.mkdir(parents=True, exist_ok=True)
    for name in names:
        text = (TEMPLATES / name).read_text().replace("{ROOT}", str(sim.root))
        # A free port of this machine, not 30000: a real SGLang or another demo may hold that one.
        text = text.replace("--port 30000", f"--port {server_port}")
        (units / name).write_text(text)
    # The unit's interpreter path exists, and is a real python3.
    venv_bin = sim.path("/opt/sglang/.venv/bin")
    venv_bin.mkdir(parents=True, exist_ok=True)
    # Not a pyenv shim: a shim re-executes the real interpreter and loses the unit's argv[0].
    python = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.path.exists(p)), sys.executable)
    link = venv_bin / "python"
    if not link.exists():
        link.symlink_to(python)
    pylib = sim.root / ".sim" / "pylib" / "sglang"
    pylib.mkdir(parents=True, exist_ok=True)
    for f in (Path(__file__).parent / "fake_sglang").glob("*.py"):
        shutil.copy(f, pylib / f.name)
    sim.path("/etc/sglang").mkdir(parents=True, exist_ok=True)


def _write_state(sim: HostSimulator, state: dict[str, dict[str, object]]) -> None:
    path = sim.root / ".sim" / "units.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(path)


class UnitRunner:
    """Starts and stops each unit's real process along the timeline."""

    def __init__(self, sim: HostSimulator, timeline: Timeline) -> None:
        self.sim = sim
        self.timeline = timeline
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self.since: dict[str, float] = {}
        self.failed: dict[str, float] = {}
        self.extra_env: dict[str, dict[str, str]] = {}
        self.failed_at_t: dict[str, float] = {}
        # Each unit's process: its last start and its last exit (ns since the epoch), as Docker keeps a
        # container's State.StartedAt/FinishedAt (the mirrored containers' `docker inspect` reads them).
        self.started_ns: dict[str, int] = {}
        self.finished_ns: dict[str, int] = {}
        # The driven scenario ("drive"): the windows come from the simulated `systemctl start/stop`
        # (console/demo/hostsim/drive.py), not from a fixed timeline.
        self.driven = False
        self._readers: list[asyncio.Future[None]] = []
        self._described: dict[str, str] = {}  # "NAME - Description", as PID 1's lines name a unit

    async def _start(self, name: str) -> None:
        text = self.sim.path(f"{UNITS_DIR}/{name}").read_text()
        unit = parse_unit(text, name)
        main = unit.main_command
        if main is None:
            return
        env = {**self.sim.env(), **dict(unit.environment), "PYTHONUNBUFFERED": "1",
               "GPUSIM_SPEED": str(self.sim.speed), "GPUSIM_START": str(self.sim.start_s),
               "GPUSIM_UNIT": name}  # issue 24: the server's lifecycle, by unit (fake_sglang/lifecycle.py)
        env.update(self.extra_env.get(name, {}))
        if self.driven:  # serving for hours at the start; started again (a rollback), it boots
            self.extra_env.get(name, {}).pop("GPUSIM_BOOTED", None)
        spawn = asyncio.ensure_future(asyncio.create_subprocess_exec(
            *main.argv, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True,
        ))
        try:
            proc = await asyncio.shield(spawn)
        except asyncio.CancelledError:
            # Stopped while spawning: let the spawn finish and register the process, so the
            # simulator's final sweep kills it (an unregistered one would outlive us).
            with contextlib.suppress(Exception):
                self.sim.unit_pids.add((await spawn).pid)
            raise
        self.procs[name] = proc
        self.sim.unit_pids.add(proc.pid)
        self._described[name] = f"{name} - {unit.description}" if unit.description else name
        Journal(self.sim).append(name, 1, f"Started {self._described[name]}.", pid1=True)
        self.since[name] = time.time()
        self.started_ns[name] = time.time_ns()
        self._readers.append(asyncio.ensure_future(self._journal(name, proc)))

    async def _journal(self, name: str, proc: asyncio.subprocess.Process) -> None:
        """What journald does for a unit: every output line becomes an entry with a cursor."""
        assert proc.stdout is not None
        journal = Journal(self.sim)
        while True:
            line = await proc.stdout.readline()
            if not line:
                break
            journal.append(name, proc.pid, line.rstrip(b"\n").decode("utf-8", "replace"))
        code = await proc.wait()
        self.finished_ns[name] = time.time_ns()  # the process has exited (Docker's FinishedAt)
        if code not in (0, -15, 143) and self.procs.get(name) is proc:
            # systemd 252's words (tests/data/real/journal_pid1_lines.json)
            status = f"{-code}/{signal.Signals(-code).name.removeprefix('SIG')}" if code < 0 else \
                f"{code}/FAILURE" if code == 1 else f"{code}/n/a"
            journal.append(name, 1, f"{name}: Main process exited, code={'killed' if code < 0 else 'exited'}, "
                           f"status={status}", pid1=True)
            journal.append(name, 1, f"{name}: Failed with result '{'signal' if code < 0 else 'exit-code'}'.",
                           pid1=True)
            self.failed[name] = time.time()
            self.failed_at_t[name] = self.sim.elapsed_s()
            self.procs.pop(name, None)

    async def _stop(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        self.since[name] = time.time()
        if proc is not None and proc.returncode is None:
            Journal(self.sim).append(name, 1, f"Stopping {self._described.get(name, name)}...", pid1=True)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except asyncio.TimeoutError:
                # As systemd does after TimeoutStopSec: a unit that ignores SIGTERM is killed, so its
                # successor can have the port.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(proc.wait(), 5)
            Journal(self.sim).append(name, 1, f"{name}: Deactivated successfully.", pid1=True)
            Journal(self.sim).append(name, 1, f"Stopped {self._described.get(name, name)}.", pid1=True)

    def state(self) -> dict[str, dict[str, object]]:
        out: dict[str, dict[str, object]] = {}
        for name in self._names():
            proc = self.procs.get(name)
            running = proc is not None and proc.returncode is None
            failed = not running and name in self.failed
            out[name] = {"active": "active" if running else "failed" if failed else "inactive",
                         "sub": "running" if running else "failed" if failed else "dead",
                         "pid": proc.pid if running and proc else 0, "since": self.since.get(name, self.sim.start_s)}
            for key, times in (("started_ns", self.started_ns), ("finished_ns", self.finished_ns)):
                if name in times:
                    out[name][key] = times[name]
            if name in self.failed:
                out[name]["failed_at"] = self.failed[name]
                out[name]["failed_at_t"] = self.failed_at_t.get(name, 0.0)
        return out

    def _names(self) -> list[str]:
        if self.driven:
            return list(drive.windows(self.sim.root))
        return list(self.timeline.windows)

    def _wanted(self, t: float) -> dict[str, bool]:
        if self.driven:
            return drive.wanted(self.sim.root, t)
        return {name: start <= t < stop for name, (start, stop) in self.timeline.windows.items()}

    def _failed_in_window(self, name: str, t: float) -> bool:
        """A failed unit stays failed until it is started again (a new window opens after it)."""
        if name not in self.failed:
            return False
        if not self.driven:
            return True

        ws = drive.windows(self.sim.root).get(name) or []
        opened = float(ws[-1][0] or 0) if ws else 0.0
        return self.failed_at_t.get(name, 0.0) >= opened

    async def run(self, every_s: float = 0.25) -> None:
        try:
            while True:
                t = self.sim.elapsed_s()
                for name, should in self._wanted(t).items():
                    if should and name not in self.procs and not self._failed_in_window(name, t):
                        if self.driven:
                            self.failed.pop(name, None)
                        await self._start(name)
                    elif not should and name in self.procs:
                        await self._stop(name)
                _write_state(self.sim, self.state())
                await asyncio.sleep(every_s)
        finally:
            for name in list(self.procs):
                await self._stop(name)
            for reader in self._readers:
                reader.cancel()


class Journal:
    """The simulated journal: one JSON line per entry in .sim/journal/UNIT.jsonl, journald's fields."""

    def __init__(self, sim: HostSimulator) -> None:
        self.dir = sim.root / ".sim" / "journal"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.hostname = sim.identity.hostname

    def append(self, unit: str, pid: int, message: str, *, pid1: bool = False) -> None:
        """An entry of the unit's journal; `pid1`: one of systemd's own lines about the unit
        (`_SYSTEMD_UNIT=init.scope`, `UNIT=` the unit, as journald records them)."""
        path = self.dir / f"{unit}.jsonl"
        now_us = int(time.time() * 1e6)
        entry = {"__CURSOR": f"s=gpusim;u={unit};t={now_us};p={path.stat().st_size if path.exists() else 0}",
                 "__REALTIME_TIMESTAMP": str(now_us), "_SYSTEMD_UNIT": "init.scope" if pid1 else unit,
                 "_PID": "1" if pid1 else str(pid), "_HOSTNAME": self.hostname,
                 "SYSLOG_IDENTIFIER": "systemd" if pid1 else "python", "MESSAGE": message}
        if pid1:
            entry["UNIT"] = unit
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")
