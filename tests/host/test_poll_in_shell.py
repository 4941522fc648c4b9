"""A poll of builtins alone forks nothing on the host (issue 23 item 1: the subshell of every
framed command was ~0.9 ms of a 1.2 ms `true` through sshd). Anything else keeps its subshell,
and both stay under the shell's watchdog."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from console.host.transport import LocalTransport
from console.host.transport.shell import frame, runs_in_shell


@pytest.mark.parametrize("script", [
    "true", ":", "false", "printf '%s' ok", "echo a; echo b", "echo a\ntrue\n", 'echo "a;b"', "test -n x",
])
def test_builtin_only_scripts_run_in_the_shell(script: str) -> None:
    assert runs_in_shell(script)
    body = frame(script, "TOK", 5, "watchdog").decode()
    assert "{ " + script + "\n} </dev/null 4>&-" in body
    assert "( " + script not in body


@pytest.mark.parametrize("script", [
    "cd /", "exit 3", "cat /proc/loadavg", "true && false", "true | cat", "echo $HOME", "echo `id`",
    "x=1 true", "printf -v x 1", "read x", "set -e", "export A", "eval true", "exec true", ". ./x",
    "true >&4", "echo x > /tmp/f", "true &", "{ true; }", "echo 'open", "", "echo a\\\ncd /",
])
def test_everything_else_keeps_its_subshell(script: str) -> None:
    assert not runs_in_shell(script)
    assert ("( " + script + "\n)").encode() in frame(script, "TOK", 5, "watchdog")


async def test_in_shell_polls_keep_status_output_and_the_shells_state() -> None:
    transport = LocalTransport()
    try:
        home = (await transport.run("pwd", timeout=5)).text
        r = await transport.run("false", timeout=5)
        assert r.exit_status == 1
        r = await transport.run("printf 'a b'; echo c", timeout=5)
        assert (r.exit_status, r.stdout, r.stderr) == (0, b"a bc\n", b"")
        await transport.run("cd /", timeout=5)  # a subshell: the shell stays where it was
        assert (await transport.run("pwd", timeout=5)).text == home
        assert (await transport.run("echo alive", timeout=5)).text == "alive\n"
    finally:
        await transport.close()


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
async def test_a_builtin_poll_forks_nothing_on_the_host(tmp_path: Path) -> None:
    """strace attached to the host's shell counts its forks: none for 20 `true` polls (before:
    one subshell each), at least one for a poll that needs its subshell."""
    transport = LocalTransport()
    log = tmp_path / "strace.txt"
    try:
        shell_pid = int((await transport.run("echo $$", timeout=5)).text)
        tracer = subprocess.Popen(["strace", "-f", "-e", "trace=clone,clone3,fork,vfork", "-o", str(log),
                                   "-p", str(shell_pid)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            assert tracer.stderr is not None
            line = await asyncio.wait_for(asyncio.to_thread(tracer.stderr.readline), 20)
            if b"attached" not in line:
                pytest.skip(f"strace cannot attach here: {line.decode(errors='replace').strip()}")
            for _ in range(20):
                assert (await transport.run("true", timeout=5)).ok
            await asyncio.sleep(0.2)  # not a wait: late strace lines counted too, the count must stay 0
            forks_builtin = log.read_text().count("clone")
            assert (await transport.run("cd / && true", timeout=5)).ok
            deadline = time.monotonic() + 10
            while log.read_text().count("clone") == forks_builtin and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            forks_after = log.read_text().count("clone")
        finally:
            os.kill(tracer.pid, signal.SIGINT)
            tracer.wait(10)
        assert forks_builtin == 0, log.read_text()
        assert forks_after >= 1, "the strace saw no fork at all: it counts nothing"
    finally:
        await transport.close()
