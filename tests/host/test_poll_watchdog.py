"""The poll without a fork per command (issue 23 item 1): each persistent shell has one watchdog
that kills what overruns, instead of coreutils' `timeout` around every command. The guarantee
stays: a command we gave up on dies on the host, also after quit or SIGKILL of the console."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import console.host.transport.shell as shell_module
from console.host.transport import CommandError, CommandTimeout, LocalTransport, Transport
from console.host.transport.shell import KILL_GRACE_S, host_time_limit
from console.host.transport.ssh import SshTransport
from tests.kit.hosts import sim_options


def _hang_tool(tmp_path: Path) -> Path:
    """A tool with a unique name that hangs, with a child of its own (as `nvidia-smi | grep`)."""
    tool = tmp_path / f"hangtool-{uuid.uuid4().hex[:10]}"
    tool.write_text("#!/bin/sh\nsleep 300 &\nwait\n")
    tool.chmod(0o755)
    return tool


def _running(marker: str) -> list[str]:
    out = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True)
    return [ln for ln in out.stdout.splitlines() if "pgrep" not in ln]


async def _gone(marker: str, within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while _running(marker):
        assert time.monotonic() < deadline, f"left on the host: {_running(marker)}"
        await asyncio.sleep(0.2)


async def test_polls_run_in_the_shell_itself_not_a_new_process_each(transport: Transport) -> None:
    """Before: every command ran as `timeout … sh -c eval` (a new `sh`, a new $$ each time)."""
    first = await transport.run("echo $$", timeout=5)
    second = await transport.run("echo $$", timeout=5)
    assert first.ok and second.ok
    assert first.text.strip() == second.text.strip(), "each poll started a new shell on the host"
    # Exit status, stdout and stderr still arrive as before.
    r = await transport.run("printf out; echo err >&2; exit 7", timeout=5)
    assert (r.exit_status, r.stdout, r.stderr) == (7, b"out", b"err\n")


@pytest.mark.parametrize("watchdog", [True, False], ids=["watchdog", "no-bash-wrapper"])
async def test_a_command_we_gave_up_on_dies_on_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        sim: object, watchdog: bool) -> None:
    """Over SSH (the simulator: a closed channel closes the shell's stdin and kills nothing, as
    sshd) the host's side alone must end the command."""
    from console.demo.hostsim import HostSimulator

    assert isinstance(sim, HostSimulator)
    if not watchdog:
        monkeypatch.setattr(shell_module, "WATCHDOG_SHELL", "gc-no-such-bash")
    tool = _hang_tool(tmp_path)
    transport = SshTransport(sim_options(sim))
    await transport.connect()
    try:
        await transport.run("true", timeout=5)
        assert transport._pool is not None
        assert [s.mode for s in transport._pool._idle] == ["watchdog" if watchdog else "wrapper"]
        with pytest.raises(CommandTimeout):
            await transport.run(f"{tool} | cat", timeout=1)
        assert _running(str(tool)), "the tool was running"
        await _gone(str(tool), host_time_limit(1) + KILL_GRACE_S + 5)
        # The next poll opens a new shell and works.
        assert (await transport.run("echo alive", timeout=5)).text == "alive\n"
    finally:
        await transport.close()


CHILD = """
import asyncio, sys
from console.host.transport import LocalTransport
async def main():
    t = LocalTransport()
    await t.run("true", timeout=5)
    print("ready", flush=True)
    await t.run(sys.argv[1], timeout=3)
asyncio.run(main())
"""


async def test_sigkill_of_the_console_leaves_nothing_running(tmp_path: Path) -> None:
    tool = _hang_tool(tmp_path)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tool)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        deadline = time.monotonic() + 30
        while not _running(str(tool)):
            assert time.monotonic() < deadline and child.poll() is None, child.stderr.read() if child.stderr else ""
            await asyncio.sleep(0.1)
        child.send_signal(signal.SIGKILL)  # no cleanup of ours runs
        child.wait(5)
        await _gone(str(tool), host_time_limit(3) + KILL_GRACE_S + 5)
    finally:
        if child.poll() is None:
            child.kill()


async def test_a_dead_watchdog_means_no_command_runs_unwatched(tmp_path: Path) -> None:
    transport = LocalTransport()
    try:
        shell_pid = int((await transport.run("echo $$", timeout=5)).text)
        out = subprocess.run(["pgrep", "-P", str(shell_pid), "-f", "gc-watchdog"], capture_output=True, text=True)
        pids = [int(p) for p in out.stdout.split()]
        assert pids, "no watchdog beside the shell"
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.2)
        marker = tmp_path / "ran"
        with pytest.raises(CommandError):
            await transport.run(f"touch {marker}", timeout=5)
        assert not marker.exists(), "a command ran with nobody to kill it"
        assert (await transport.run("echo alive", timeout=5)).text == "alive\n"
    finally:
        await transport.close()
