"""The client side of pairing: a mirror of the core's HostState fed by the socket, and a
`RemoteControl` that sends what this view asks to the core (which may refuse it).

`attach(address, name, token)` returns a `ShareClient` once the core has welcomed it and its
first event (the host, which decides which panes exist) is applied; the rest of the snapshot and
every later event arrive through `pump()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from console.core import codec
from console.core.state import ConnectionChanged, HostInfo, HostState, Notice, ReadingChanged
from console.host.transport.base import ConnectionState
from console.share import protocol as p
from console.share.server import decode_preview

CORE_GONE = "the core (gpuconsole serve) is gone"


class AttachError(Exception):
    """Cannot attach: no core there, refused, wrong token (one line for the operator). `final`:
    waiting will not help (refused: the token or the version)."""

    def __init__(self, message: str, *, final: bool = False) -> None:
        super().__init__(message)
        self.final = final


def default_name() -> str:
    with contextlib.suppress(Exception):
        return p.clean_name(getpass.getuser())
    return "anonymous"


def parse_address(address: str) -> tuple[str, Any]:
    """`unix:/path`, `/path`, `./path` → ("unix", path); `tcp:HOST:PORT`, `HOST:PORT` → ("tcp", (host, port))."""
    if address.startswith("unix:"):
        return "unix", address[5:]
    if address.startswith(("/", "./", "~")) or address.endswith(".sock"):
        return "unix", os.path.expanduser(address)
    rest = address[4:] if address.startswith("tcp:") else address
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise AttachError(f"{address!r} is neither a socket path nor HOST:PORT")
    return "tcp", (host.strip("[]"), int(port))


def find_socket(directory: Path) -> Path:
    """The one core serving on this machine (for `attach` with no address)."""
    sockets = sorted(directory.glob("*.sock")) if directory.is_dir() else []
    if not sockets:
        raise AttachError(f"no gpuconsole serve is running here (no socket in {directory})")
    if len(sockets) > 1:
        raise AttachError("several cores serve here; name one: " + ", ".join(str(s) for s in sockets))
    return sockets[0]


class ShareClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, welcome: p.Welcome,
                 state: HostState) -> None:
        self.reader, self.writer = reader, writer
        self.client_id = welcome.client
        self.role = welcome.role
        self.state = state
        self.lost: str | None = None
        self.on_lost: Callable[[str], None] | None = None
        self.on_event_applied: Callable[[Any], None] | None = None  # benchmarks: when an event landed
        self._pending: dict[int, asyncio.Future[p.Reply]] = {}
        self._ids = 0
        self.events = 0

    async def pump(self) -> None:
        """Apply the core's events until it goes; then say so in the state (the header shows it)."""
        why = CORE_GONE
        try:
            while True:
                line = await self.reader.readline()
                if not line:
                    break
                self._line(line)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except (ValueError, p.ProtocolError, codec.DecodeError) as exc:
            why = f"the core sent something this client cannot read: {exc}"
        finally:
            self._gone(why)

    def _line(self, line: bytes) -> None:
        msg = p.decode_core(line)
        if isinstance(msg, p.EventLine):
            event = codec.decode_event(bytes(msg.e))
            if isinstance(event, ReadingChanged) and event.source == "gpu" and event.reading.data is not None:
                self.state.gpus.seed(event.reading.data)  # the core's history, not one from attach on
            self.state.apply(event)
            self.events += 1
            if self.on_event_applied is not None:
                self.on_event_applied(event)
        elif isinstance(msg, p.Reply):
            future = self._pending.pop(msg.id, None)
            if future is not None and not future.done():
                future.set_result(msg)
        elif isinstance(msg, p.Refused):
            raise p.ProtocolError(msg.reason)

    def _gone(self, why: str) -> None:
        if self.lost is not None:
            return
        self.lost = why
        for future in self._pending.values():
            if not future.done():
                future.set_result(p.Reply(0, error=why))
        self._pending.clear()
        host = self.state.host
        self.state.apply(ConnectionChanged(host, ConnectionState(host, "failed", time.time(), why)))
        if self.on_lost is not None:
            self.on_lost(why)

    # -- requests --------------------------------------------------------------------------
    def send(self, msg_type: type[Any], **fields: Any) -> asyncio.Future[p.Reply]:
        self._ids += 1
        future: asyncio.Future[p.Reply] = asyncio.get_running_loop().create_future()
        if self.lost is not None:
            future.set_result(p.Reply(self._ids, error=self.lost))
            return future
        self._pending[self._ids] = future
        self.writer.write(p.encode_client(msg_type(id=self._ids, **fields)))
        return future

    async def request(self, msg_type: type[Any], timeout_s: float = 10.0, **fields: Any) -> p.Reply:
        return await asyncio.wait_for(self.send(msg_type, **fields), timeout_s)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()


async def attach(address: str | Path, *, name: str | None = None, token: str = "",
                 timeout_s: float = 10.0, observe: bool = False) -> ShareClient:
    kind, where = parse_address(str(address))
    try:
        if kind == "unix":
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(str(where), limit=p.MAX_CORE_LINE), timeout_s)
        else:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(where[0], where[1], limit=p.MAX_CORE_LINE), timeout_s)
    except FileNotFoundError:
        raise AttachError(f"no gpuconsole serve at {where} (no such socket)") from None
    except (OSError, asyncio.TimeoutError) as exc:
        raise AttachError(f"cannot reach the core at {address}: {exc.strerror or exc or 'timed out'}") from None
    writer.write(p.encode_client(p.Hello(p.VERSION, name or default_name(), token, observe)))
    try:
        first = await asyncio.wait_for(reader.readline(), timeout_s)
        welcome = p.decode_core(first) if first else None
    except (OSError, asyncio.TimeoutError, ValueError, p.ProtocolError) as exc:
        writer.close()
        raise AttachError(f"the core at {address} did not welcome this client: {exc}") from None
    if welcome is None:
        writer.close()
        raise AttachError(f"refused by the core at {address}: wrong or missing token"
                          + ("" if kind == "tcp" else " (or it is closing)"), final=kind == "tcp")
    if isinstance(welcome, p.Refused):
        writer.close()
        raise AttachError(f"refused by the core: {welcome.reason}", final=True)
    if not isinstance(welcome, p.Welcome):
        writer.close()
        raise AttachError("the core's first message is not a welcome")
    state = HostState(welcome.host or "?")
    client = ShareClient(reader, writer, welcome, state)
    try:  # the host first: it decides which panes the app builds
        line = await asyncio.wait_for(reader.readline(), timeout_s)
        client._line(line)
    except (OSError, asyncio.TimeoutError, ValueError, p.ProtocolError, codec.DecodeError) as exc:
        writer.close()
        raise AttachError(f"the core's snapshot did not arrive: {exc}") from None
    if not isinstance(state.info, HostInfo) or state.info.host != state.host:
        writer.close()
        raise AttachError("the core's snapshot did not start with the host")
    return client


class RemoteControl:
    """`HostControl` for an attached view: each request goes to the core; its answer comes back
    as a notice in this view (the core refuses an observer's benchmark, not this UI)."""

    _TITLES = {"verify": "verify", "swap": "service", "pick": "service", "bench": "benchmark",
               "stop_bench": "benchmark", "note": "note", "hand_over": "driver", "ask_drive": "driver",
               "accept": "driver", "view": "view", "swap_preview": "swap", "swap_confirm": "swap",
               "swap_override": "swap", "swap_decide": "swap"}

    def __init__(self, client: ShareClient) -> None:
        self.client = client
        self.client_id = client.client_id

    def _fire(self, msg_type: type[Any], **fields: Any) -> None:
        future = self.client.send(msg_type, **fields)
        title = self._TITLES[p.REQUEST_KIND[msg_type]]
        future.add_done_callback(lambda f: self._answered(title, f))

    def _answered(self, title: str, future: asyncio.Future[p.Reply]) -> None:
        if future.cancelled():
            return
        reply = future.result()
        text = reply.error or reply.said
        if text:  # said in this view only: the mirror is ours; the core's state is not touched
            self.client.state.apply(Notice(self.client.state.host, title, text,
                                           "warning" if reply.error else "information", time.time()))

    def verify(self) -> str | None:
        self._fire(p.Verify)
        return None

    def pick_units(self, new: str, old: str | None) -> None:
        self._fire(p.Pick, new=new, old=old)

    def start_bench(self, kind: str, plan: list[tuple[int, int, int, int]] | None = None) -> str | None:
        self._fire(p.Bench, kind=kind, plan=[list(x) for x in plan] if plan else None)
        return None

    def stop_bench(self) -> str | None:
        self._fire(p.StopBench)
        return None

    def set_note(self, text: str) -> str | None:
        self._fire(p.SetNote, text=text[:400])
        return None

    def hand_over(self, to: int) -> str | None:
        self._fire(p.HandOver, to=to)
        return None

    def ask_drive(self) -> str | None:
        self._fire(p.AskDrive)
        return None

    def accept(self, client: int) -> str | None:
        self._fire(p.Accept, client=client)
        return None

    def set_view(self, pane: str | None) -> None:
        self._fire(p.View, pane=pane)

    @property
    def who(self) -> str | None:
        """This person's name as the core knows it (from the presence it publishes)."""
        presence = getattr(self.client.state, "presence", None)
        return next((c.name for c in (presence.clients if presence else ()) if c.id == self.client_id), None)

    # the swap (issue 13): the core previews (the exact commands come from it) and acts in the name
    # of this attached person; answers come back as notices, the plan through the mirrored state.
    async def swap_preview_async(self, key: str) -> tuple[str | None, Any]:
        try:
            reply = await self.client.request(p.SwapPreview, key=key)
        except (asyncio.TimeoutError, ConnectionError, OSError) as exc:
            return f"the core did not answer: {exc or type(exc).__name__}", None
        return (reply.error, None) if reply.error or not reply.said else (None, decode_preview(reply.said))

    def swap_preview(self, key: str) -> tuple[str | None, Any]:
        return "ask the core with swap_preview_async", None

    def swap_confirm(self, preview_id: str, who: str | None = None) -> str | None:
        self._fire(p.SwapConfirm, preview=preview_id)
        return None

    def swap_override(self, check: str, typed: str, who: str | None = None) -> str | None:
        self._fire(p.SwapOverride, check=check, typed=typed[:400])
        return None

    def swap_approve(self, request_id: str, who: str) -> str | None:
        self._fire(p.SwapDecide, request=request_id, decision="approve")
        return None

    def swap_withdraw(self, request_id: str, who: str) -> str | None:
        self._fire(p.SwapDecide, request=request_id, decision="withdraw")
        return None
