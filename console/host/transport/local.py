"""The local transport: this machine, the same interface, used when `--host` is not given."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import stat as stat_mod
import time
from collections.abc import Callable

from console.host.transport.base import CommandResult, ConnectionState, FileStat, LineStream
from console.host.transport.errors import CommandError, CommandTimeout
from console.host.transport.shell import PersistentShell, ShellPool
from console.host.transport.streams import ProcessLineStream
from console.units import seconds


class _LocalShellChannel:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdin and proc.stdout and proc.stderr
        self._proc = proc
        self.stdin = proc.stdin
        self.stdout = proc.stdout
        self.stderr = proc.stderr

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signal.SIGKILL)


async def _spawn(script: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", script,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )


class LocalTransport:
    """Runs everything on this machine through `/bin/sh`, with the SSH transport's semantics."""

    def __init__(self) -> None:
        self._label = socket.gethostname()
        self._state = ConnectionState(self._label, "connected", time.time())
        self._pool = ShellPool(self._open_shell)
        self._streams: list[ProcessLineStream] = []
        self._shells: list[asyncio.subprocess.Process] = []  # reaped on close

    @property
    def label(self) -> str:
        return self._label

    @property
    def state(self) -> ConnectionState:
        return self._state

    def on_state(self, callback: Callable[[ConnectionState], None]) -> None:
        callback(self._state)

    async def connect(self) -> None:
        return None

    async def _open_shell(self) -> PersistentShell:
        proc = await _spawn("exec /bin/sh")
        self._shells = [p for p in self._shells if p.returncode is None] + [proc]
        return PersistentShell(_LocalShellChannel(proc))

    async def run(self, script: str, *, timeout: float = 10.0) -> CommandResult:
        return await self._pool.run(script, timeout=timeout)

    async def run_fresh(self, script: str, *, timeout: float = 10.0) -> CommandResult:
        started = time.perf_counter()
        proc = await _spawn(script)
        try:
            out, err = await asyncio.wait_for(proc.communicate(b""), timeout)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            raise CommandTimeout(f"command timed out after {seconds(timeout)}") from None
        return CommandResult(proc.returncode or 0, out, err, time.perf_counter() - started)

    async def stat(self, path: str, *, timeout: float = 10.0) -> FileStat:
        st = await asyncio.wait_for(asyncio.to_thread(os.stat, path), timeout)
        is_link = await asyncio.to_thread(os.path.islink, path)

        return FileStat(path, st.st_size, st.st_mtime, stat_mod.S_ISDIR(st.st_mode), is_link)

    async def read_file(self, path: str, *, max_bytes: int = 1 << 20, timeout: float = 10.0) -> bytes:
        def _read() -> bytes:
            with open(path, "rb") as fh:
                return fh.read(max_bytes)

        return await asyncio.wait_for(asyncio.to_thread(_read), timeout)

    async def write_file(self, path: str, data: bytes, *, timeout: float = 10.0) -> None:
        def _write() -> None:
            with open(path, "wb") as fh:
                fh.write(data)

        await asyncio.wait_for(asyncio.to_thread(_write), timeout)

    async def stream(self, script: str) -> LineStream:
        proc = await _spawn(script)
        assert proc.stdout and proc.stderr

        def closer() -> None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)

        stream = ProcessLineStream(proc.stdout, proc.stderr, closer, lambda: proc.returncode, proc.wait)
        self._streams.append(stream)
        return stream

    async def http_base_url(self, remote_port: int) -> str:
        return f"http://127.0.0.1:{int(remote_port)}"

    async def close(self) -> None:
        await self._pool.close()
        for stream in self._streams:
            await stream.close()
        self._streams.clear()
        for proc in self._shells:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), 2)
        self._shells.clear()


__all__ = ["LocalTransport", "CommandError"]
