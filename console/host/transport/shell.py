"""One long-lived `sh` that runs our commands one after another.

Each command is framed by a fresh random token:

    ( SCRIPT
    ) </dev/null; rc=$?; printf '\\n%s %d\\n' TOKEN "$rc"; printf '\\n%s\\n' TOKEN >&2

We always print a newline before the token, so output without a trailing newline, binary
bytes and stderr cannot break the framing; we strip exactly that newline again. The subshell
keeps `cd` or `exit` in a script from changing or killing the shared shell, and `</dev/null`
keeps a script from eating the commands that follow it.

A command that times out leaves the shell in an unknown state: the shell is closed and the
pool opens a new one, so one hung command never blocks the next poll.

A command we gave up on must not run on after us on the host, also when the console quits or is
SIGKILLed (nobody is left to clean up). Each shell starts one watchdog (`bash`, reading a fifo)
when it opens: before a command the shell tells it `S <limit>`, after it `E` (builtin `printf`s,
no fork). If `E` does not come within the limit, the watchdog kills the shell's whole process
group (the shell, the command and its children: sshd makes every session its own group), TERM
then KILL. The poll itself forks once (the subshell), as before the guarantee existed; the
earlier way, coreutils' `timeout` in a new process group per command, forked and exec'd twice
per poll and tripled its round trip. A host without bash, or whose shell does not lead its own
process group, gets that wrapper per command instead.

A script made only of builtins that keep no state (`runs_in_shell`: `true`, `printf`, `echo`,
`test` and the like, no expansion, no redirection) runs in the shell itself, in a `{ …; }` group
with stdin from /dev/null and the watchdog's fd closed: no fork at all on the host, still under
the watchdog (a `printf` blocked on a full channel dies with the group). The subshell cost a
fork per poll: ~0.9 ms of the 1.2 ms a `true` took through sshd on the 2-core VM.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import secrets
import shlex
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from console.host.transport.base import CommandResult
from console.host.transport.bounded import bounded
from console.host.transport.errors import CommandError, CommandTimeout
from console.units import seconds

MAX_CAPTURE_BYTES = 32 << 20
_READ_CHUNK = 1 << 16


class ByteReader(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


class ByteWriter(Protocol):
    def write(self, data: bytes) -> None: ...


class ShellChannel(Protocol):
    """The three pipes of a running `sh`, whatever carries them."""

    stdin: ByteWriter
    stdout: ByteReader
    stderr: ByteReader

    def close(self) -> None: ...


KILL_GRACE_S = 2


def host_time_limit(timeout: float) -> int:
    """Seconds the host lets a command run: past our own timeout, so ours fires first and the
    host's `timeout` is what cleans up (a command we gave up on never runs on)."""
    return max(1, math.ceil(timeout)) + 1


# The watchdog, run by bash with the fifo as stdin and the shell's process group as $1.
# `read -t` is bash's builtin timer: no process per command. `E` within the limit: fine. The
# limit passed (status > 128), or the shell gone mid-command (EOF): the command is one we gave
# up on, so the group dies; the watchdog ignores TERM so that it can send the KILL, which ends
# it too.
WATCHDOG_SCRIPT = (
    "trap '' TERM INT HUP PIPE; pg=$1\n"
    "while read -r ev lim; do\n"
    "  [ \"$ev\" = S ] || continue\n"
    "  read -r -t \"$lim\" ev && continue\n"
    "  kill -TERM -- \"-$pg\" 2>/dev/null; sleep \"$2\"; kill -KILL -- \"-$pg\" 2>/dev/null; exit 0\n"
    "done\n"
)
WATCHDOG_SHELL = "bash"  # a module constant so that a test can take bash away
WATCHDOG_FD = 4

# Modes of a shell: "watchdog" (one watchdog per shell), "wrapper" (`timeout` per command).
ShellMode = str


def setup_script(token: str) -> bytes:
    """Run once in the shell itself (not a subshell): start the watchdog on a fifo held as fd 4
    (write end only: if the watchdog dies, the shell's next `S` gets SIGPIPE and the shell dies
    with it, so no command ever runs unwatched), and print the mode."""
    fd = WATCHDOG_FD
    script = (
        "__gc_m=wrapper\n"
        f"if command -v {WATCHDOG_SHELL} >/dev/null 2>&1; then\n"
        "  __gc_pg=$(ps -o pgid= -p $$ 2>/dev/null); set -- $__gc_pg\n"
        "  if [ \"${1:-}\" = \"$$\" ] && __gc_d=$(mktemp -d 2>/dev/null) && mkfifo -m 600 \"$__gc_d/w\"; then\n"
        f"    {WATCHDOG_SHELL} -c {shlex.quote(WATCHDOG_SCRIPT)} gc-watchdog \"$$\" {KILL_GRACE_S} "
        "<\"$__gc_d/w\" >/dev/null 2>&1 &\n"
        f"    exec {fd}>\"$__gc_d/w\"; rm -rf \"$__gc_d\"; __gc_m=watchdog\n"
        "  fi\n"
        "  set --\n"
        "fi\n"
        f"printf '\\n%s %s\\n' '{token}' \"$__gc_m\"; printf '\\n%s\\n' '{token}' >&2\n"
    )
    return script.encode()


# Builtins of every POSIX sh that change nothing the next command sees (no `cd`, `exit`, `read`,
# `set`, `export`, `eval`, `exec`, `trap`, `.`): a script of these alone can run without a subshell.
_IN_SHELL_WORDS = frozenset({":", "true", "false", "printf", "echo", "test", "["})
# Anything that expands, substitutes, redirects, groups, backgrounds or pipes (each could fork,
# assign, or touch the watchdog's fd) sends the script to a subshell as before.
_IN_SHELL_REJECT = frozenset("`$(){}<>&|\\*?~#=")


@functools.lru_cache(maxsize=512)  # pollers repeat the same few scripts
def runs_in_shell(script: str) -> bool:
    """True when `script` is only `;`/newline-separated simple commands of `_IN_SHELL_WORDS`,
    with quoted or plain literal words: safe to run in the shared shell itself (no fork)."""
    if not script.strip() or any(c in _IN_SHELL_REJECT for c in script):
        return False
    lexer = shlex.shlex(script, posix=True, punctuation_chars=";\n")
    lexer.whitespace = " \t"
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # an unterminated quote
        return False
    first = True
    for token in tokens:
        if token and set(token) <= {";", "\n"}:
            first = True
            continue
        if first:
            if token not in _IN_SHELL_WORDS:
                return False
            first = False
        elif token.startswith("-v"):  # bash's `printf -v VAR` assigns in the shell
            return False
    return True


def frame(script: str, token: str, timeout: float | None = None, mode: ShellMode = "wrapper") -> bytes:
    """The framed command. With `timeout`: in "watchdog" mode the shell's watchdog kills the
    shell's process group if the command is not done within the host's limit; in "wrapper" mode
    coreutils' `timeout` runs it in its own process group and kills the whole group (TERM, then
    KILL) when the time is up. Either way, even if we are gone: a hung `nvidia-smi` and its
    `grep` and `sh` never outlive the command's timeout on the host."""
    if timeout is None:
        body = f"( {script}\n) </dev/null; __gc_rc=$?"
    elif mode == "watchdog":
        fd = WATCHDOG_FD
        # A brace group does not fork; a subshell does (and keeps `cd`/`exit` away from the shell).
        group = f"{{ {script}\n}}" if runs_in_shell(script) else f"( {script}\n)"
        body = (f"printf 'S %d\\n' {host_time_limit(timeout)} >&{fd}; {group} </dev/null {fd}>&-; "
                f"__gc_rc=$?; printf 'E\\n' >&{fd}")
    else:
        limit = host_time_limit(timeout)
        # The script travels in the environment, not in argv: `ps` on the host shows `sh -c eval…`.
        argv = ["sh", "-c", 'eval "$__gc_s"']
        run, timed = f"{shlex.join(argv)} </dev/null", f"{bounded(argv, limit, kill_after_s=KILL_GRACE_S)} </dev/null"
        body = (f"__gc_s={shlex.quote(script)}; export __gc_s; if command -v timeout >/dev/null 2>&1; "
                f"then {timed}; else {run}; fi; __gc_rc=$?")
    wrapped = (
        f"{body}; unset __gc_s; "
        f"printf '\\n%s %d\\n' '{token}' \"$__gc_rc\"; printf '\\n%s\\n' '{token}' >&2\n"
    )
    return wrapped.encode()


async def _read_until(reader: ByteReader, marker: bytes, limit: int) -> tuple[bytes, bytes, bool]:
    """Read until `marker`; return (before, after, truncated). Memory stays within `limit`."""
    buf = bytearray()
    truncated = False
    while True:
        idx = buf.find(marker)
        if idx >= 0:
            return bytes(buf[:idx]), bytes(buf[idx + len(marker):]), truncated
        chunk = await reader.read(_READ_CHUNK)
        if not chunk:
            raise CommandError("the remote shell closed while a command was running")
        buf += chunk
        if len(buf) > limit + len(marker) + 64:
            # Keep the tail so a marker split across chunks is still found.
            keep = len(marker) + 64
            del buf[limit : len(buf) - keep]
            truncated = True


class PersistentShell:
    """Runs framed commands on one `sh`; not safe for concurrent use (the pool serializes)."""

    SETUP_TIMEOUT_S = 10.0

    def __init__(self, channel: ShellChannel) -> None:
        self._channel = channel
        self.broken = False
        self.mode: ShellMode | None = None  # set by the first command: "watchdog" or "wrapper"

    async def run(self, script: str, *, timeout: float) -> CommandResult:
        if self.broken:
            raise CommandError("shell is closed")
        if self.mode is None:
            # Once per shell: start its watchdog. Not counted in the command's own timeout.
            token = "__GC_" + secrets.token_hex(16)
            _out, word, _err, _ = await self._exchange(setup_script(token), token,
                                                       max(timeout, self.SETUP_TIMEOUT_S))
            self.mode = "watchdog" if word == b"watchdog" else "wrapper"
        token = "__GC_" + secrets.token_hex(16)
        started = time.perf_counter()
        stdout, word, stderr, truncated = await self._exchange(frame(script, token, timeout, self.mode),
                                                               token, timeout)
        try:
            status = int(word or b"255")
        except ValueError:
            status = 255
        # The framing printed one newline before the token on each stream.
        return CommandResult(
            exit_status=status,
            stdout=stdout[1:] if stdout.startswith(b"\n") else stdout,
            stderr=stderr[1:] if stderr.startswith(b"\n") else stderr,
            elapsed_s=time.perf_counter() - started,
            truncated=truncated,
        )

    async def _exchange(self, payload: bytes, token: str, timeout: float) -> tuple[bytes, bytes, bytes, bool]:
        """Send one framed payload; return (stdout, the word after the token, stderr, truncated)."""
        try:
            self._channel.stdin.write(payload)
            out_marker = f"\n{token} ".encode()
            err_marker = f"\n{token}\n".encode()

            async def read_stdout() -> tuple[bytes, bytes, bool]:
                body, rest, truncated = await _read_until(self._channel.stdout, out_marker, MAX_CAPTURE_BYTES)
                while b"\n" not in rest:
                    chunk = await self._channel.stdout.read(_READ_CHUNK)
                    if not chunk:
                        raise CommandError("the remote shell closed while a command was running")
                    rest += chunk
                return body, rest.split(b"\n", 1)[0].strip(), truncated

            async def read_stderr() -> bytes:
                body, _rest, _ = await _read_until(self._channel.stderr, err_marker, 1 << 20)
                return body

            out_task = asyncio.ensure_future(read_stdout())
            err_task = asyncio.ensure_future(read_stderr())
            try:
                done, _ = await asyncio.wait({out_task, err_task}, timeout=timeout,
                                             return_when=asyncio.FIRST_EXCEPTION)
                for task in done:
                    task.result()  # re-raise the first failure
                if len(done) < 2:
                    raise asyncio.TimeoutError
            finally:
                for task in (out_task, err_task):
                    task.cancel()
                await asyncio.gather(out_task, err_task, return_exceptions=True)
            stdout, word, truncated = out_task.result()
            return stdout, word, err_task.result(), truncated
        except asyncio.TimeoutError:
            self.close()
            raise CommandTimeout(f"command timed out after {seconds(timeout)}") from None
        except asyncio.CancelledError:
            self.close()
            raise
        except CommandError:
            self.close()
            raise
        except Exception as exc:  # noqa: BLE001 - asyncssh.ConnectionLost and friends are not OSErrors
            self.close()
            raise CommandError(f"remote shell failed: {getattr(exc, 'reason', None) or exc}") from None

    def close(self) -> None:
        self.broken = True
        with contextlib.suppress(Exception):
            self._channel.close()


class ShellPool:
    """A few persistent shells, so one slow command does not hold up every pane.

    OpenSSH allows 10 session channels per connection (MaxSessions); the pool uses at most
    `max_shells` of them and opens a shell only when every open one is busy.
    """

    def __init__(self, open_shell: Callable[[], Awaitable[PersistentShell]], max_shells: int = 3) -> None:
        self._open_shell = open_shell
        self._max = max_shells
        self._idle: list[PersistentShell] = []
        self._count = 0
        self._cond = asyncio.Condition()
        self._closed = False

    async def _acquire(self, timeout: float) -> PersistentShell:
        async with self._cond:
            while True:
                if self._closed:
                    raise CommandError("transport closed")
                while self._idle:
                    shell = self._idle.pop()
                    if not shell.broken:
                        return shell
                    self._count -= 1
                if self._count < self._max:
                    self._count += 1
                    break
                await asyncio.wait_for(self._cond.wait(), timeout)
        try:
            return await asyncio.wait_for(self._open_shell(), timeout)
        except BaseException:
            async with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    async def _release(self, shell: PersistentShell) -> None:
        async with self._cond:
            if shell.broken or self._closed:
                self._count -= 1
                shell.close()
            else:
                self._idle.append(shell)
            self._cond.notify()

    async def run(self, script: str, *, timeout: float) -> CommandResult:
        deadline = time.monotonic() + timeout
        try:
            shell = await self._acquire(timeout)
        except asyncio.TimeoutError:
            raise CommandTimeout(f"no shell free within {seconds(timeout)}") from None
        try:
            return await shell.run(script, timeout=max(0.05, deadline - time.monotonic()))
        finally:
            await self._release(shell)

    async def close(self) -> None:
        async with self._cond:
            self._closed = True
            for shell in self._idle:
                shell.close()
            self._idle.clear()
            self._cond.notify_all()
