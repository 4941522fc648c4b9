"""Fault injection against OpenSSH's sshd (issue 15, the suite): forced drops while following a
file and a journal, sshd restarted, the host key changed between reconnects, a tool that hangs,
a tool that floods, the console SIGKILLed mid-command, a full disk on the console's own data dir.
Nothing lost, nothing duplicated, nothing left running on the host.

The host is this machine's sshd on 127.0.0.1 with `SetEnv PATH=…` putting fake tools first:
`nvidia-smi` (hangs or floods on demand) and `journalctl` (the simulator's journal, read from
files). The SSH connection, the drops and the processes on the host are real.

Figures: with GPUCONSOLE_FAULT_REPORT=FILE each test appends a JSON line (tried, failed, lost,
duplicated, leaked) that `benchmarks/fault_suite.py` turns into the README's table.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from console.host.sources.gpu import GpuSource
from console.host.sources.log import LogFollower
from console.host.sources.service import ServiceWatcher
from console.demo.sshd import Sshd, start_sshd
from console.host.transport import CommandTimeout
from console.host.transport.shell import KILL_GRACE_S, host_time_limit
from console.host.transport.ssh import SshTransport
from tests.kit.figures import record
from tests.kit.hosts import require_sshd

pytestmark = pytest.mark.sshd
DROPS = int(os.environ.get("GPUCONSOLE_FAULT_DROPS", "50"))


@dataclass
class FaultHost:
    """A real sshd whose sessions find our fake tools first on PATH."""

    directory: Path
    bin: Path
    sim_root: Path
    sshd: Sshd

    @property
    def extra_config(self) -> str:
        return f"SetEnv PATH={self.bin}:/usr/local/bin:/usr/bin:/bin GPUSIM_ROOT={self.sim_root}\n"

    def tool(self, name: str, body: str) -> None:
        path = self.bin / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)

    def _children(self) -> list[int]:
        out = subprocess.run(["pgrep", "-P", str(self.sshd.process.pid)], capture_output=True, text=True)
        return [int(p) for p in out.stdout.split()]

    def drop(self) -> int:
        """Every open connection dies (its sshd session process is killed), as in a network cut."""
        pids = self._children()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(pids)

    def restart(self, *, new_host_key: bool = False) -> None:
        self.drop()
        self.sshd.stop()
        if new_host_key:
            for name in ("host_key", "host_key.pub"):
                (self.directory / name).unlink()
        port = self.sshd.port
        deadline = time.monotonic() + 10
        while True:
            try:
                self.sshd = start_sshd(self.directory, extra_config=self.extra_config, port=port)
                return
            except Exception:  # noqa: BLE001 - the port may take a moment to be free again
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def processes(self, marker: str) -> list[str]:
        out = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True)
        return [ln for ln in out.stdout.splitlines() if "pgrep" not in ln and str(os.getpid()) != ln.split()[0]]


@pytest.fixture
def fault_host(tmp_path: Path) -> Iterator[FaultHost]:
    require_sshd()
    directory, bin_dir, sim_root = tmp_path / "sshd", tmp_path / "faultbin", tmp_path / "host"
    bin_dir.mkdir()
    (sim_root / ".sim" / "journal").mkdir(parents=True)
    host = FaultHost(directory, bin_dir, sim_root, None)  # type: ignore[arg-type]
    host.tool("journalctl", f"exec {sys.executable} -c 'import sys; from console.demo.hostsim import fake_journalctl as j; "
                            "sys.exit(j.main(sys.argv[1:]))' \"$@\" --marker={sim_root}")
    host.sshd = start_sshd(directory, extra_config=host.extra_config)
    try:
        yield host
    finally:
        host.sshd.stop()


@pytest.fixture
async def connected(fault_host: FaultHost) -> AsyncIterator[SshTransport]:
    transport = SshTransport(fault_host.sshd.options())
    await transport.connect()
    try:
        yield transport
    finally:
        await transport.close()


def _journal_append(root: Path, unit: str, message: str) -> None:
    path = root / ".sim" / "journal" / f"{unit}.jsonl"
    now_us = int(time.time() * 1e6)
    size = path.stat().st_size if path.exists() else 0
    entry = {"__CURSOR": f"s=fault;u={unit};t={now_us};p={size}", "__REALTIME_TIMESTAMP": str(now_us),
             "_SYSTEMD_UNIT": unit, "MESSAGE": message}
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\n")


class Followed:
    """A follower's lines, collected in the background."""

    def __init__(self, follower: LogFollower) -> None:
        self.lines: list[str] = []
        self.errors: list[str] = []
        self.task = asyncio.ensure_future(self._run(follower))

    async def _run(self, follower: LogFollower) -> None:
        async for batch in follower.batches():
            self.lines.extend(e.text for e in batch.events)
            if batch.error:
                self.errors.append(batch.error)

    async def wait(self, predicate: object, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(self.lines):  # type: ignore[operator]
            assert time.monotonic() < deadline, f"waited {timeout}s; have {len(self.lines)} lines, errors {self.errors[-3:]}, last {self.lines[-1:]}"
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def _write_lines(fault_host: FaultHost, log: Path, counter: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        i = counter[0]
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"[2026-01-01 10:00:00] file line {i}\n")
        _journal_append(fault_host.sim_root, "seq.service", f"journal line {i}")
        counter[0] += 1
        await asyncio.sleep(0.01)


async def _follow_through_faults(fault_host: FaultHost, transport: SshTransport, faults: int,
                                 inject: object, name: str) -> None:
    log = fault_host.sim_root / "sglang.log"
    log.write_text("[2026-01-01 10:00:00] file line 0\n")
    _journal_append(fault_host.sim_root, "seq.service", "journal line 0")
    # Line 0 is the backlog of both: once both have it, both streams run and no line is "before".
    file_f = Followed(LogFollower(transport, log_file=str(log)))
    journal_f = Followed(LogFollower(transport, units=("seq.service",), backlog=1))
    await file_f.wait(lambda s: len(s) >= 1, 30)
    await journal_f.wait(lambda s: len(s) >= 1, 30)
    counter, stop = [1], asyncio.Event()
    writer = asyncio.ensure_future(_write_lines(fault_host, log, counter, stop))
    try:
        for _ in range(faults):
            seen = len(file_f.lines), len(journal_f.lines)
            await file_f.wait(lambda s, n=seen[0]: len(s) > n + 3, 60)
            await journal_f.wait(lambda s, n=seen[1]: len(s) > n + 3, 60)
            inject()  # type: ignore[operator]
        stop.set()
        await writer
        total = counter[0]
        await file_f.wait(lambda s: len(s) >= total, 60)
        await journal_f.wait(lambda s: len(s) >= total, 60)
        # An end marker, not a sleep: the streams are ordered, so once the marker is there any
        # extra line (a duplicate replayed by a resume) has arrived before it.
        with open(log, "a", encoding="utf-8") as fh:
            fh.write("[2026-01-01 10:00:00] file line end\n")
        _journal_append(fault_host.sim_root, "seq.service", "journal line end")
        await file_f.wait(lambda s: "[2026-01-01 10:00:00] file line end" in s, 60)
        await journal_f.wait(lambda s: "journal line end" in s, 60)
    finally:
        stop.set()
        await file_f.stop()
        await journal_f.stop()
    assert file_f.lines[-1:] == ["[2026-01-01 10:00:00] file line end"] and journal_f.lines[-1:] == ["journal line end"]
    file_f.lines.pop()
    journal_f.lines.pop()
    file_expected = [f"[2026-01-01 10:00:00] file line {i}" for i in range(total)]
    journal_expected = [f"journal line {i}" for i in range(total)]
    lost = len(set(file_expected) - set(file_f.lines)) + len(set(journal_expected) - set(journal_f.lines))
    duplicated = (len(file_f.lines) - len(set(file_f.lines))) + (len(journal_f.lines) - len(set(journal_f.lines)))
    record(name, tried=faults, lines=2 * total, lost=lost, duplicated=duplicated,
           failed=int(file_f.lines != file_expected or journal_f.lines != journal_expected))
    assert file_f.lines == file_expected
    assert journal_f.lines == journal_expected


async def test_forced_drops_while_following_a_file_and_a_journal(fault_host: FaultHost,
                                                                 connected: SshTransport) -> None:
    await _follow_through_faults(fault_host, connected, DROPS, fault_host.drop, "drops while following")
    await asyncio.sleep(1)
    log = str(fault_host.sim_root / "sglang.log")
    await _gone(fault_host, log, 5)  # no tail left behind on the host
    await _gone(fault_host, f"--marker={fault_host.sim_root}", 5)  # no journalctl either


async def test_sshd_restarted_while_following(fault_host: FaultHost, connected: SshTransport) -> None:
    await _follow_through_faults(fault_host, connected, 3, fault_host.restart, "sshd restarted")


async def test_a_changed_host_key_between_reconnects_is_refused(fault_host: FaultHost, tmp_path: Path) -> None:
    known_path = tmp_path / "known_hosts"  # the console's own file (start_sshd rewrites the fixture's)
    known_path.write_bytes(fault_host.sshd.known_hosts.read_bytes())
    known = known_path.read_bytes()
    connected = SshTransport(fault_host.sshd.options(known_hosts=str(known_path), accept_new_host_key=True))
    await connected.connect()
    log = fault_host.sim_root / "sglang.log"
    log.write_text("[2026-01-01 10:00:00] before\n")
    followed = Followed(LogFollower(connected, log_file=str(log)))
    try:
        await followed.wait(lambda s: "before" in " ".join(s), 20)
        fault_host.restart(new_host_key=True)
        with open(log, "a") as fh:
            fh.write("[2026-01-01 10:00:01] from the impostor\n")
        deadline = time.monotonic() + 30
        while connected.state.status != "failed":
            assert time.monotonic() < deadline, connected.state
            await asyncio.sleep(0.1)
        await asyncio.sleep(2)
    finally:
        await followed.stop()
        await connected.close()
    assert "HOST KEY CHANGED" in (connected.state.detail or "")
    assert known_path.read_bytes() == known, "nothing written to known_hosts, even with --accept-new-host-key"
    assert not any("impostor" in line for line in followed.lines)
    record("host key changed between reconnects", tried=1, failed=0, accepted=0)


HANG = "while :; do sleep 1; done"


async def test_a_hanging_nvidia_smi_is_reported_and_killed_on_the_host(fault_host: FaultHost,
                                                                      connected: SshTransport) -> None:
    fault_host.tool("nvidia-smi", HANG)
    gpu = GpuSource(connected, local=False, interval_s=0.5)
    gpu._stall_s = 2.0
    gpu.oneshot_timeout_s = 2.0
    errors: list[str] = []

    async def watch() -> None:
        async for reading in gpu.readings():
            if reading.error and reading.error not in errors:
                errors.append(reading.error)
            if any("timed out" in e for e in errors):
                return

    await asyncio.wait_for(watch(), 30)
    assert any("hung" in e for e in errors), errors
    watcher = ServiceWatcher(connected, "x.service", None)
    import console.host.sources.service as service_module

    service_module.GPU_COUNT_TIMEOUT_S = 1.0
    try:
        sides, _, gpus = await asyncio.wait_for(watcher.read_sides(["x.service"]), 20)
    finally:
        service_module.GPU_COUNT_TIMEOUT_S = 8.0
    assert gpus is None and len(sides) == 1, "the diff's round-trip does not wait for nvidia-smi"
    await connected.close()
    await _gone(fault_host, str(fault_host.bin / "nvidia-smi"), host_time_limit(2.0) + KILL_GRACE_S + 3)
    record("a tool that hangs", tried=1, failed=0, leaked=0)


async def _gone(fault_host: FaultHost, marker: str, within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while fault_host.processes(marker):
        assert time.monotonic() < deadline, f"left on the host: {fault_host.processes(marker)}"
        await asyncio.sleep(0.2)


async def test_a_timed_out_command_is_killed_on_the_host_after_quit(fault_host: FaultHost,
                                                                   connected: SshTransport) -> None:
    fault_host.tool("slowtool", HANG)
    with pytest.raises(CommandTimeout):
        await connected.run("slowtool | grep x | cat", timeout=1)
    assert fault_host.processes(str(fault_host.bin / "slowtool")), "the tool was running"
    await connected.close()
    await _gone(fault_host, str(fault_host.bin / "slowtool"), host_time_limit(1) + KILL_GRACE_S + 3)


CHILD = """
import asyncio, sys
from console.host.transport.ssh import SshOptions, SshTransport
async def main():
    t = SshTransport(SshOptions(host="127.0.0.1", port={port}, user={user!r}, identity={key!r},
                                known_hosts={known!r}, ssh_config=(), connect_timeout_s=5))
    await t.connect()
    print("connected", flush=True)
    await t.run("nvidia-smi -L | grep -c ^GPU", timeout=3)
asyncio.run(main())
"""


async def test_sigkill_of_the_console_leaves_nothing_on_the_host(fault_host: FaultHost) -> None:
    fault_host.tool("nvidia-smi", HANG)
    s = fault_host.sshd
    code = CHILD.format(port=s.port, user=s.user, key=str(s.client_key), known=str(s.known_hosts))
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    marker = str(fault_host.bin / "nvidia-smi")
    try:
        deadline = time.monotonic() + 20
        while not fault_host.processes(marker):
            assert time.monotonic() < deadline and child.poll() is None, child.stderr.read() if child.stderr else ""
            await asyncio.sleep(0.1)
        child.kill()  # SIGKILL: no cleanup of ours runs
        child.wait(5)
        await _gone(fault_host, marker, host_time_limit(3) + KILL_GRACE_S + 3)
    finally:
        if child.poll() is None:
            child.kill()
    record("console SIGKILLed mid-command", tried=1, failed=0, leaked=0)


async def test_a_flooding_tool_stays_bounded_and_is_reported(fault_host: FaultHost, connected: SshTransport) -> None:
    marker = "flood-" + os.urandom(4).hex()
    fault_host.tool("nvidia-smi", f"exec yes '{marker} garbage, not a GPU row'")
    gpu = GpuSource(connected, local=False, interval_s=0.5)
    gpu._stall_s = 2.0
    gpu.oneshot_timeout_s = 2.0
    errors: list[str] = []

    async def watch() -> None:
        async for reading in gpu.readings():
            if reading.error and reading.error not in errors:
                errors.append(reading.error)
            if len(errors) >= 2:
                return

    await asyncio.wait_for(watch(), 60)
    assert any("no GPU rows" in e for e in errors), errors
    assert all(len(e) < 400 for e in errors)
    await connected.close()
    await _gone(fault_host, marker, host_time_limit(2.0) + KILL_GRACE_S + 3)
    record("a tool that floods", tried=1, failed=0, leaked=0)


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "full"
    mount.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if r.returncode != 0:
        if os.environ.get("CI") == "true":  # CI runs as root: the full-disk case must be tested there
            pytest.fail(f"cannot mount a small tmpfs under CI: {r.stderr.decode(errors='replace').strip()}")
        pytest.skip("cannot mount a small tmpfs here")
    try:
        with open(mount / "filler", "wb") as fh:
            try:
                fh.write(b"x" * (1 << 20))
            except OSError:
                pass
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


async def test_a_full_disk_on_the_consoles_own_data_dir(full_disk: Path, fault_host: FaultHost) -> None:
    from tests.kit.bench import FaultyServer

    server = await asyncio.start_server(FaultyServer().handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "console", "bench", "--url", url, "--num-prompts", "2", "--input-len", "4",
            "--output-len", "4", "--json", "--output-file", str(full_disk / "bench.jsonl"),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        server.close()
    err = stderr.decode()
    assert proc.returncode == 1 and "Traceback" not in err and "not saved" in err, err
    assert json.loads(stdout)["completed"] == 2, "the figures are still printed"
    known = full_disk / "known_hosts"
    t = SshTransport(fault_host.sshd.options(known_hosts=str(known), accept_new_host_key=True))
    from console.host.transport import ConnectError

    with pytest.raises(ConnectError, match="could not record the host key"):
        await t.connect()
    await t.close()
    record("disk full on the console's data dir", tried=2, failed=0)


async def test_log_lines_resume_as_soon_as_the_connection_is_back(fault_host: FaultHost,
                                                                   connected: SshTransport) -> None:
    """The follower's backoff grew while the host was down; it must not outlast the outage. Its
    waits are made an hour long here: only the wake-up on reconnection can bring the lines back
    within the test's wait (a wall-clock bound said this before; issue 27)."""
    from console.host.backoff import Backoff

    log = fault_host.sim_root / "sglang.log"
    log.write_text("[2026-01-01 10:00:00] before\n")
    follower = LogFollower(connected, log_file=str(log))
    follower.backoff = Backoff(initial_s=3600.0, cap_s=3600.0, jitter=0.0)
    followed = Followed(follower)
    try:
        await followed.wait(lambda s: len(s) >= 1, 20)
        fault_host.drop()
        fault_host.sshd.stop()  # the host is gone: the follower's next attempt fails, and it waits an hour
        deadline = time.monotonic() + 40
        while follower.backoff.failures < 1:
            assert time.monotonic() < deadline, follower.backoff.failures
            await asyncio.sleep(0.1)
        with open(log, "a") as fh:
            fh.write("[2026-01-01 10:00:01] after\n")
        fault_host.restart()
        await followed.wait(lambda s: any("after" in x for x in s), 60)
    finally:
        await followed.stop()
    assert followed.lines == ["[2026-01-01 10:00:00] before", "[2026-01-01 10:00:01] after"]
