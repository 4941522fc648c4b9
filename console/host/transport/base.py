"""The transport interface shared by the SSH and local implementations.

A transport knows how to reach one host and nothing about GPUs or SGLang. Commands are shell
scripts that our code builds with `quote()`/`join()`: no user value is ever spliced in raw.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

ConnectionStatus = Literal["connecting", "connected", "reconnecting", "failed"]


def join(argv: Sequence[str]) -> str:
    """An argv list as one shell word list, every element quoted."""
    return shlex.join(list(argv))


quote = shlex.quote


def operand(path: str) -> str:
    """A path as one quoted shell word that no tool can read as an option.

    Quoting stops the shell; it does not stop `find`, `tail` or `ls` from taking `-delete` or
    `--version` as an option. Tools that accept `--` get it from the builder as well; `find`
    does not, so a relative path that starts with `-` becomes `./-…` (the same file).
    """
    if path.startswith("-"):
        path = "./" + path
    return shlex.quote(path)


def operands(paths: Sequence[str]) -> str:
    return " ".join(operand(p) for p in paths)


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What a finished command left behind."""

    exit_status: int
    stdout: bytes
    stderr: bytes
    elapsed_s: float
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def error_text(self) -> str:
        return self.stderr.decode("utf-8", "replace").strip()


@dataclass(frozen=True, slots=True)
class FileStat:
    """One file's metadata (from SFTP, os.stat or a listing)."""

    path: str
    size_bytes: int
    mtime_s: float
    is_dir: bool
    is_link: bool = False


@dataclass(frozen=True, slots=True)
class ConnectionState:
    """The connection as every pane should see it."""

    host: str
    status: ConnectionStatus
    since_s: float
    detail: str | None = None

    @property
    def usable(self) -> bool:
        return self.status == "connected"

    def describe(self, now_s: float | None = None) -> str:
        now = time.time() if now_s is None else now_s
        age = max(0.0, now - self.since_s)
        if self.status == "connected":
            return "connected"
        if self.status == "reconnecting":
            return f"reconnecting for {age:.0f}s" + (f": {self.detail}" if self.detail else "")
        if self.status == "failed":
            return f"failed: {self.detail or 'unknown error'}"
        return "connecting"


class LineStream(Protocol):
    """A long-lived remote command whose stdout arrives line by line."""

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    def chunks(self) -> AsyncIterator[list[bytes]]:
        """The same lines, a list per read: what a reader of a flood takes (one step per 64 KiB)."""
        ...

    async def close(self) -> None: ...

    @property
    def exit_status(self) -> int | None: ...

    @property
    def stderr_tail(self) -> str: ...


class Transport(Protocol):
    """How bytes reach one host. Implemented by `SshTransport` and `LocalTransport`."""

    @property
    def label(self) -> str: ...

    @property
    def state(self) -> ConnectionState: ...

    def on_state(self, callback: Callable[[ConnectionState], None]) -> None: ...

    async def connect(self) -> None: ...

    async def run(self, script: str, *, timeout: float = 10.0) -> CommandResult:
        """Run a shell script on a persistent shell and return its output and exit status."""
        ...

    async def run_fresh(self, script: str, *, timeout: float = 10.0) -> CommandResult:
        """Run a script on a new channel/process (what `doctor` compares against)."""
        ...

    async def stat(self, path: str, *, timeout: float = 10.0) -> FileStat: ...

    async def read_file(self, path: str, *, max_bytes: int = 1 << 20, timeout: float = 10.0) -> bytes: ...

    async def write_file(self, path: str, data: bytes, *, timeout: float = 10.0) -> None:
        """Write one file (SFTP over SSH): used only by the swap's unit install."""
        ...

    async def stream(self, script: str) -> LineStream: ...

    async def http_base_url(self, remote_port: int) -> str:
        """A base URL on this machine that reaches `remote_port` on the host."""
        ...

    async def close(self) -> None: ...
