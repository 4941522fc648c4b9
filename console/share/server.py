"""The core side of pairing: one host's state and runner, shared with every attached client.

`ShareServer(state, control)` listens on a Unix socket (mode 0600 in a 0700 directory) and, if
asked, on TCP (token required). Each client gets the state as it is now, then every event, encoded
once for all of them. Roles live here, in the core: the first to arrive drives, the others
observe; an observer's host-changing requests are refused here whatever its UI lets it press.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import hmac
import ipaddress
import json
import logging
import os
import re
import secrets
import socket
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import msgspec

from console.core.codec import to_builtins
from console.core.derive.swap_view import GateCheck
from console.core.state import (
    Client,
    Event,
    HostState,
    LogAppended,
    NoteChanged,
    Presence,
)
from console.domain.swap.controller import Preview
from console.share import protocol as p

log = logging.getLogger("gpuconsole.share")

MAX_CLIENT_BUFFER = 32 << 20  # a client this far behind is dropped, not buffered without end
# Connections that have not said hello yet: more are closed at once, so a flood never reaches the
# fd limit (10,644 EMFILE tracebacks in 30 s before; issue 21, item 10). One line says so.
# Each door has its own budget (issue 34, item 4): 64 idle TCP connections (no token needed to
# open one) had locked the operator's own Unix attach out. The Unix socket is 0600: only this user
# reaches it, so its budget is for mistakes, not strangers.
MAX_PENDING = 64
MAX_PENDING_UNIX = 64
# Asking to drive (issue 34, item 13): one person is announced to the driver at most once per
# this long (connect, ask, leave 200 times rang 201 bells in 10 s); asks in between are refused.
ASK_DRIVE_EVERY_S = 30.0
# All clients' unsent bytes together: 30 clients that never read held 896 MB (issue 21, item 11).
MAX_TOTAL_BUFFER = 256 << 20
_PANE = re.compile(r"^[a-z0-9_-]{1,32}$")


class ShareError(Exception):
    """Cannot share (the socket is in use, the directory is not ours): one line."""


def runtime_dir() -> Path:
    """Where the sockets live: `$XDG_RUNTIME_DIR/gpuconsole`, else `/tmp/gpuconsole-UID`; always a
    directory of ours with mode 0700 (checked, not assumed: /tmp is shared)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    path = Path(base) / "gpuconsole" if base and Path(base).is_dir() else Path(f"/tmp/gpuconsole-{os.getuid()}")
    path.mkdir(mode=0o700, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ShareError(f"{path} is not a directory of this user: refusing to put the socket there")
    if stat.S_IMODE(info.st_mode) != 0o700:
        path.chmod(0o700)
    return path


def socket_path_for(host: str) -> Path:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", host).strip("._") or "host"
    return runtime_dir() / f"{name}.sock"


@dataclass
class _Peer:
    id: int
    name: str
    via: str
    role: str = p.ROLE_OBSERVER
    view: str | None = None
    writer: asyncio.StreamWriter | None = None  # None: the console that serves (in-process)
    bucket: p.TokenBucket = field(default_factory=p.TokenBucket)
    # Who this is, from what a client cannot choose (issue 21, item 3; issue 34, item 2): `uid:N`
    # (SO_PEERCRED on the Unix socket, and the serve's own token: the person who runs serve),
    # `person:NAME` (an invite `serve --invite NAME` issued).
    identity: str = ""

    def client(self) -> Client:
        return Client(self.id, self.name, self.role, self.via, self.view, person=_person_label(self.identity))


def _person_label(identity: str) -> str:
    """The identity as others may see it (it is no secret): `uid 1000`, `invite bob`."""
    kind, _, value = identity.partition(":")
    return {"uid": f"uid {value}", "person": f"invite {value}"}.get(kind, identity)


class ShareServer:
    """Shares one host's `HostState`; `control` (the HostRunner) carries out what the driver asks."""

    def __init__(self, state: HostState, control: Any, *, token: str | None = None,
                 max_client_buffer: int = MAX_CLIENT_BUFFER, max_pending: int = MAX_PENDING,
                 max_pending_unix: int = MAX_PENDING_UNIX, max_total_buffer: int = MAX_TOTAL_BUFFER,
                 owner: str | None = None, clock: Any = time.monotonic, recorder: Any = None) -> None:
        self.state = state
        self.recorder = recorder  # the session's Recorder, if any: its counts are in the stats reply
        self.max_client_buffer = max_client_buffer
        self.max_pending = max_pending  # TCP
        self.max_pending_unix = max_pending_unix
        self.max_total_buffer = max_total_buffer
        self._pending = {"unix": 0, "tcp": 0}  # connections that have not said hello yet, per door
        self.turned_away = 0  # closed at once: over their door's budget
        self._flooded = {"unix": False, "tcp": False}
        self.control = control
        self.token = token or secrets.token_urlsafe(24)
        # The serve's own token is the person who runs serve: the same person as this uid on the
        # Unix socket (issue 34, item 2: ana asked on the socket and approved with the token).
        self.owner_identity = f"uid:{os.getuid()}"
        self.owner = p.clean_name(owner) if owner else _user_name()  # who issues the invites (the audit says)
        self.clock = clock
        self._asked_at: dict[str, float] = {}  # identity -> when its last ask to drive was announced
        self.people: dict[str, str] = {}  # per-person token -> the invited name (`serve --invite NAME`)
        # An invite is bound at first use to who presented it (`uid N`, by the kernel's word): another
        # uid presenting it later is refused, on either door (issue 34, item 2).
        self._bound: dict[str, str] = {}
        self._names: dict[str, str] = {}  # name -> identity, bound for the server's life: no name borrowed
        self.unix_path: Path | None = None
        self.tcp_address: tuple[str, int] | None = None
        self.refused = 0  # connections turned away (bad token, version, malformed hello)
        self.dropped = 0  # clients dropped for what they sent or for being too slow
        self.bytes_sent = 0
        self._peers: dict[int, _Peer] = {}
        self._asking: list[int] = []
        self._next_id = 1
        self._servers: list[asyncio.base_events.Server] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._unsubscribe = state.subscribe(self._on_event)

    # -- listening -------------------------------------------------------------------------
    async def start(self, *, unix_path: Path | None = None, tcp: tuple[str, int] | None = None) -> ShareServer:
        if unix_path is not None:
            await self._listen_unix(unix_path)
        if tcp is not None:
            server = await asyncio.start_server(lambda r, w: self._accept(r, w, "tcp"), tcp[0], tcp[1],
                                                limit=p.MAX_CLIENT_LINE + 2)
            self._servers.append(server)
            host, port = server.sockets[0].getsockname()[:2]
            self.tcp_address = (host, port)
        return self

    async def _listen_unix(self, path: Path) -> None:
        if _existing_socket(path) and await _answers(path):
            raise ShareError(f"{path} is in use: another gpuconsole serves this host (attach to it)")
        _remove_stale(path)  # left by a core that was killed
        old = os.umask(0o177)
        try:
            server = await asyncio.start_unix_server(lambda r, w: self._accept(r, w, "unix"), str(path),
                                                     limit=p.MAX_CLIENT_LINE + 2)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)  # noqa: ASYNC240 - a local chmod, no I/O wait
        self._servers.append(server)
        self.unix_path = path

    async def close(self) -> None:
        self._unsubscribe()
        for server in self._servers:
            server.close()
        for peer in list(self._peers.values()):
            if peer.writer is not None:
                peer.writer.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            # Bounded: a client task stuck in a write to a peer that never reads must not hold
            # the core's exit (a test's teardown hung on it once under load).
            _done, pending = await asyncio.wait(tasks, timeout=5)
            for task in _done:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    task.result()
            if pending:
                log.warning("share: %d client task(s) did not end within 5 s of close", len(pending))
        if self.unix_path is not None:
            _remove_stale(self.unix_path)

    @property
    def pending(self) -> int:
        """Connections that have not said hello yet, both doors together."""
        return sum(self._pending.values())

    # -- who is who -----------------------------------------------------------------------
    def invite(self, name: str) -> str:
        """A token of `name`'s own (one per invited person, issued by `serve`): who presents it
        is `name`, over TCP, the browser or the Unix socket alike; `name` is theirs alone."""
        name = p.clean_name(name)
        for token, who in self.people.items():
            if who == name:
                return token
        token = secrets.token_urlsafe(24)
        self.people[token] = name
        self._names.setdefault(name, f"person:{name}")
        return token

    def person_of(self, token: str) -> str | None:
        """The invited name whose token this is (constant time per comparison), else None."""
        found = None
        for known, name in self.people.items():
            if hmac.compare_digest(token.encode(), known.encode()):
                found = name
        return found

    def _identify(self, hello: p.Hello, via: str, writer: asyncio.StreamWriter | None) -> tuple[str, str] | str:
        """(identity, name) for a hello that passed the token check, or why it is refused.

        A person's token names them (the name they asked for is ignored). Otherwise on the Unix
        socket the peer's uid is the identity (one user on two connections is one person: they
        cannot approve their own request from a second `attach --name ben2`); over TCP the serve's
        own token is one identity however many hold it. A name bound to another identity is
        refused, so no one can answer as `ana` but ana."""
        person = self.person_of(hello.token) if hello.token else None
        if person is not None:
            origin = _origin(writer, via)
            bound = self._bound.setdefault(person, origin)
            if bound != origin:
                return (f"{person}'s invite was first used from {bound}, and is theirs alone "
                        f"(this connection is from {origin})")
            identity, name = f"person:{person}", person
        elif via == "unix":
            uid = _peer_uid(writer)
            identity, name = (f"uid:{uid}" if uid is not None else "unix"), p.clean_name(hello.name)
        else:  # the serve's own token: the person who runs serve, whatever name they type
            identity, name = self.owner_identity, p.clean_name(hello.name)
        owner = self._names.get(name)
        if owner is not None and owner != identity:
            return f"the name {name!r} is taken by another person here: attach with another --name"
        self._names[name] = identity
        return identity, name

    def same_person(self, name: str, peer: _Peer) -> bool:
        """Whether `name` (a request's requester) is the person `peer` is, by identity."""
        return self._names.get(name) == peer.identity

    # -- who is here -----------------------------------------------------------------------
    @property
    def clients(self) -> tuple[Client, ...]:
        return tuple(peer.client() for peer in self._peers.values())

    def _publish(self) -> None:
        self.state.apply(Presence(self.state.host, self.clients, tuple(self._asking)))

    def issued_by(self, peer: _Peer) -> str:
        """`peer`'s name as the audit writes it: an invited person with who issued the invite."""
        kind, _, _ = peer.identity.partition(":")
        return f"{peer.name} (invited by {self.owner})" if kind == "person" else peer.name

    def approvers(self, requester: str) -> tuple[list[str], list[str]]:
        """Who attached can approve `requester`'s request, and who cannot (the same person)."""
        can: list[str] = []
        cannot: list[str] = []
        owner = self._names.get(requester)
        for peer in self._peers.values():
            (cannot if owner is not None and peer.identity == owner else can).append(peer.name)
        return can, cannot

    def _join(self, name: str, via: str, writer: asyncio.StreamWriter | None, identity: str = "",
              observe: bool = False) -> _Peer:
        peer = _Peer(self._next_id, p.clean_name(name), via, writer=writer, identity=identity)
        self._next_id += 1
        if not observe and not any(q.role == p.ROLE_DRIVER for q in self._peers.values()):
            peer.role = p.ROLE_DRIVER
        self._peers[peer.id] = peer
        return peer

    def _leave(self, peer: _Peer) -> None:
        if self._peers.pop(peer.id, None) is None:
            return
        if peer.id in self._asking:
            self._asking.remove(peer.id)
        if peer.role == p.ROLE_DRIVER:
            # Somebody must be able to act: whoever asked first, else whoever came first.
            heir = next((self._peers[i] for i in self._asking if i in self._peers), None) or next(
                iter(self._peers.values()), None)
            if heir is not None:
                self._make_driver(heir)
        self._publish()

    def _make_driver(self, peer: _Peer) -> None:
        for other in self._peers.values():
            other.role = p.ROLE_OBSERVER
        peer.role = p.ROLE_DRIVER
        if peer.id in self._asking:
            self._asking.remove(peer.id)

    def local(self, name: str) -> LocalSeat:
        """A seat for the console that serves (`gpuconsole --share`): it arrived first, so it drives.
        It is this user, as a Unix client of the same uid is."""
        identity = f"uid:{os.getuid()}"
        name = p.clean_name(name)
        if self._names.get(name, identity) != identity:
            raise ShareError(f"the name {name!r} is taken by another person here")
        self._names[name] = identity
        peer = self._join(name, "local", None, identity)
        self._publish()
        return LocalSeat(self, peer)

    # -- fan-out ---------------------------------------------------------------------------
    def _on_event(self, event: Event) -> None:
        remote = [peer for peer in self._peers.values() if peer.writer is not None]
        if not remote:
            return
        line = p.event_frame(event)  # one frame, every client
        for peer in remote:
            self._send(peer, line)
        self._enforce_budget()

    def _send(self, peer: _Peer, data: bytes | bytearray) -> None:
        writer = peer.writer
        if writer is None or writer.is_closing():
            return
        writer.write(data)
        self.bytes_sent += len(data)
        if writer.transport.get_write_buffer_size() > self.max_client_buffer:
            self._drop(peer, f"too slow: it fell more than {self.max_client_buffer >> 10} KiB behind")

    def _enforce_budget(self) -> None:
        """The global budget, once per event (not per client): while all clients together hold
        more than `max_total_buffer` unsent, the one furthest behind goes (issue 21, item 11)."""
        while self.buffered() > self.max_total_buffer:
            worst = max((q for q in self._peers.values() if q.writer is not None and not q.writer.is_closing()),
                        key=lambda q: q.writer.transport.get_write_buffer_size(),  # type: ignore[union-attr]
                        default=None)
            if worst is None:
                return
            self._drop(worst, f"too slow: all clients together fell more than "
                              f"{self.max_total_buffer / (1 << 20):g} MiB behind, and it the most")

    def buffered(self) -> int:
        """Bytes written to clients and not yet sent, all clients together."""
        return sum(q.writer.transport.get_write_buffer_size() for q in self._peers.values()
                   if q.writer is not None and not q.writer.is_closing())

    def _drop(self, peer: _Peer, why: str) -> None:
        log.warning("dropped client %d (%s, %s): %s", peer.id, peer.name, peer.via, why)
        self.dropped += 1
        if peer.writer is not None:
            peer.writer.transport.abort()
        self._leave(peer)

    def snapshot(self) -> Iterator[Event]:
        """The state as it is now: the whole of it (`HostState.snapshot()`: readings, bench series
        and marks, the swap's plan, approvals and audit, presence, note, notices), then the log
        lines in chunks, so that no line of the protocol outgrows what a client accepts. A fresh
        mirror that applies these equals the core's state (issue 20)."""
        state, host = self.state, self.state.host
        snap = state.snapshot()
        lines = snap.log_lines
        yield replace(snap, log_lines=(), log_lines_total=snap.log_lines_total - len(lines))
        for i in range(0, len(lines), p.LOG_CHUNK):
            yield LogAppended(host, tuple(lines[i:i + p.LOG_CHUNK]))

    def stats(self) -> dict[str, Any]:
        """What the core holds and has done, read-only (the `stats` request; benchmarks/soak.py):
        `events` the state has applied (each one also sent to every attached client, in order with
        this reply), `log_lines_total` it was given, the state's sizes (`HostState.sizes()`), the
        recording's events and bytes, the clients and what the fan-out did."""
        state = self.state
        out: dict[str, Any] = {"events": state.version, "log_lines_total": state.log_lines_total,
                               "sizes": state.sizes(), "clients": len(self._peers), "dropped": self.dropped,
                               "refused": self.refused, "bytes_sent": self.bytes_sent,
                               "subscriber_errors": state.subscriber_errors, "derive_errors": state.derive_errors}
        rec = self.recorder
        if rec is not None:
            size = 0
            for path in rec.paths:
                with contextlib.suppress(OSError):
                    size += path.stat().st_size
            out["recording"] = {"events": rec.events_written, "snapshots": rec.snapshots_written,
                                "files": len(rec.paths), "bytes": size, "error": rec.error}
        return out

    # -- one client ------------------------------------------------------------------------
    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, via: str) -> None:
        cap = self.max_pending_unix if via == "unix" else self.max_pending
        if self._pending[via] >= cap:
            self.turned_away += 1
            if not self._flooded[via]:  # one line per flood, not one per connection
                self._flooded[via] = True
                log.warning("%d %s connections have not said hello: closing new ones until they do or time out",
                            self._pending[via], via.upper() if via == "tcp" else "Unix")
            writer.transport.abort()
            return
        task = asyncio.ensure_future(self._client(reader, writer, via))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, via: str) -> None:
        where = _peer_name(writer, via)
        peer: _Peer | None = None
        self._pending[via] += 1
        try:
            try:
                hello = await self._hello(reader, writer, via, where)
            finally:
                self._pending[via] -= 1
                cap = self.max_pending_unix if via == "unix" else self.max_pending
                if self._flooded[via] and self._pending[via] < cap // 2:
                    self._flooded[via] = False
                    log.warning("the flood of connections is over (%d turned away)", self.turned_away)
            if hello is None:
                return
            who = self._identify(hello, via, writer)
            if isinstance(who, str):
                self.refused += 1
                log.warning("refused %s: %s", where, who)
                writer.write(p.encode_core(p.Refused(who)))
                with contextlib.suppress(ConnectionError):
                    await writer.drain()
                return
            identity, name = who
            peer = self._join(name, via, writer, identity, observe=hello.observe)
            self._send(peer, p.encode_core(p.Welcome(p.VERSION, peer.id, peer.role, self.state.host)))
            for event in self.snapshot():  # no await between here and the fan-out: nothing is missed
                self._send(peer, p.event_frame(event))
            log.info("client %d attached: %s via %s (%s)", peer.id, peer.name, via, where)
            self._publish()
            await self._requests(peer, reader)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            if peer is not None and peer.id in self._peers:
                log.info("client %d left: %s", peer.id, peer.name)
                self._leave(peer)
            writer.close()

    async def _hello(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, via: str,
                     where: str) -> p.Hello | None:
        def refuse(why: str) -> None:
            self.refused += 1
            log.warning("refused %s: %s", where, why)

        try:
            line = await asyncio.wait_for(reader.readline(), p.HELLO_TIMEOUT_S)
        except asyncio.TimeoutError:
            refuse("no hello in time")
            return None
        except ValueError:
            refuse("hello too long")
            return None
        if not line:  # connected and left (a second serve checking whether this one is alive)
            return None
        try:
            msg = p.decode_client(line)
        except p.ProtocolError as exc:
            refuse(f"not a hello: {exc}")
            return None
        if not isinstance(msg, p.Hello):
            refuse("first message is not a hello")
            return None
        # Constant time, and the same answer (silence) for a missing and a wrong token; a person's
        # own token (`serve --invite`) is as good as the serve's.
        if via != "unix" and not hmac.compare_digest(msg.token.encode(), self.token.encode()) \
                and self.person_of(msg.token) is None:
            refuse("wrong or missing token")
            return None
        if msg.version != p.VERSION:
            refuse(f"protocol version {msg.version}")
            writer.write(p.encode_core(p.Refused(
                f"this core speaks pairing protocol version {p.VERSION}, the client {msg.version}: "
                f"use the same gpuconsole version on both sides")))
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            return None
        return msg

    async def _requests(self, peer: _Peer, reader: asyncio.StreamReader) -> None:
        while peer.id in self._peers:
            try:
                line = await reader.readline()
            except ValueError:
                self._drop(peer, f"message over {p.MAX_CLIENT_LINE} bytes")
                return
            if not line:
                return
            if not peer.bucket.take():
                self._drop(peer, f"more than {p.RATE_PER_S:.0f} messages a second")
                return
            try:
                msg = p.decode_client(line)
            except p.ProtocolError as exc:
                bad_id = p.bad_request_id(line)
                if bad_id is not None:  # one of ours with a bad value: said, not dropped
                    self._send(peer, p.encode_core(p.Reply(bad_id, error=f"not a valid request: {exc}")))
                    continue
                self._drop(peer, f"malformed message: {exc}")
                return
            if isinstance(msg, p.Hello):
                self._drop(peer, "a second hello")
                return
            reply = self.handle(peer, msg)
            self._send(peer, p.encode_core(reply))

    # -- requests --------------------------------------------------------------------------
    def handle(self, peer: _Peer, msg: p.Request) -> p.Reply:
        """One request from `peer`, checked against its role; the reply says why not."""
        kind = p.REQUEST_KIND[type(msg)]
        if kind in p.DRIVER_ONLY and peer.role != p.ROLE_DRIVER:
            driver = next((q.name for q in self._peers.values() if q.role == p.ROLE_DRIVER), None)
            log.info("refused %s from observer %d (%s)", kind, peer.id, peer.name)
            return p.Reply(msg.id, error=f"refused by the core: {peer.name} observes"
                                          + (f" ({driver} drives); ask to drive first" if driver else ""))
        try:
            return self._carry_out(peer, msg)
        except Exception as exc:  # a failing action is said to the asker, and the core goes on
            log.exception("request %s failed", kind)
            return p.Reply(msg.id, error=f"{kind} failed: {exc}")

    def _swap(self, peer: _Peer, msg: Any) -> p.Reply:
        """The swap's requests, in the name of who is attached (the core knows who asks; a client
        cannot claim to be someone else)."""
        control = self.control
        if control is None or not hasattr(control, "swap_preview"):
            return p.Reply(msg.id, error="nothing can be asked of this host")
        if isinstance(msg, p.SwapPreview):
            why, preview = control.swap_preview(msg.key)
            return p.Reply(msg.id, error=why) if preview is None else p.Reply(msg.id, said=encode_preview(preview))
        if isinstance(msg, p.SwapConfirm):
            return p.Reply(msg.id, error=control.swap_confirm(msg.preview, peer.name))
        if isinstance(msg, p.SwapOverride):
            return p.Reply(msg.id, error=control.swap_override(msg.check, msg.typed, peer.name))
        # The two-person rule by identity, not by name (issue 21, item 3): the requester on another
        # connection, under another name, is still the requester.
        req = self.state.swap.approvals.get(msg.request) if hasattr(self.state, "swap") else None
        if req is not None and msg.decision in ("approve", "deny") and self.same_person(req.requested_by, peer):
            return p.Reply(msg.id, error="another person must approve (the two-person rule): "
                                         f"{req.requested_by} asked, and that is you")
        if req is not None and msg.decision == "withdraw" and not self.same_person(req.requested_by, peer):
            return p.Reply(msg.id, error=f"only {req.requested_by}, who asked, can withdraw it")
        # The audit names who issued an invite: "bob (invited by ana)".
        if msg.decision == "approve":
            return p.Reply(msg.id, error=control.swap_approve(msg.request, self.issued_by(peer)))
        if msg.decision == "deny":
            return p.Reply(msg.id, error=control.swap.deny(msg.request, self.issued_by(peer)))
        return p.Reply(msg.id, error=control.swap_withdraw(msg.request, peer.name))

    def _carry_out(self, peer: _Peer, msg: p.Request) -> p.Reply:
        control = self.control
        host_actions = (p.Verify, p.Swap, p.Pick, p.Bench, p.StopBench)
        if isinstance(msg, host_actions) and control is None:
            return p.Reply(msg.id, error="nothing can be asked of this host")
        if isinstance(msg, p.Stats):
            return p.Reply(msg.id, said=json.dumps(self.stats(), sort_keys=True))
        if isinstance(msg, p.Verify):
            return p.Reply(msg.id, error=control.verify())
        if isinstance(msg, p.Swap):
            # Which side of the diff is old is each view's own choice (`s` in its pane): the core's
            # sources are not flipped for a client, nor is any event made (issue 20).
            return p.Reply(msg.id, error="the diff's sides are each view's own: s flips them in your pane")
        if isinstance(msg, p.Pick):
            control.pick_units(msg.new, msg.old)
            return p.Reply(msg.id)
        if isinstance(msg, p.Bench):
            plan = [tuple(run) for run in msg.plan] if msg.plan else None
            return p.Reply(msg.id, error=control.start_bench(msg.kind, plan))
        if isinstance(msg, p.StopBench):
            return p.Reply(msg.id, said=control.stop_bench())
        if isinstance(msg, (p.SwapPreview, p.SwapConfirm, p.SwapOverride, p.SwapDecide)):
            return self._swap(peer, msg)
        if isinstance(msg, p.SetNote):
            self.state.apply(NoteChanged(self.state.host, p.clean_text(msg.text, 200), peer.name, time.time()))
            return p.Reply(msg.id)
        if isinstance(msg, p.View):
            pane = msg.pane if msg.pane is not None and _PANE.match(msg.pane) else None
            if pane != peer.view:
                peer.view = pane
                self._publish()
            return p.Reply(msg.id)
        if isinstance(msg, p.AskDrive):
            if peer.role == p.ROLE_DRIVER:
                return p.Reply(msg.id, said="you already drive")
            if not any(q.role == p.ROLE_DRIVER for q in self._peers.values()):
                self._make_driver(peer)
            elif peer.id not in self._asking:
                now = self.clock()
                last = self._asked_at.get(peer.identity)
                if last is not None and now - last < ASK_DRIVE_EVERY_S:
                    return p.Reply(msg.id, error=f"you asked to drive {now - last:.0f} s ago; the driver was "
                                                 f"told then (one ask per {ASK_DRIVE_EVERY_S:.0f} s)")
                self._asked_at[peer.identity] = now
                self._asking.append(peer.id)
            self._publish()
            return p.Reply(msg.id)
        if isinstance(msg, (p.HandOver, p.Accept)):
            if peer.role != p.ROLE_DRIVER:
                return p.Reply(msg.id, error="refused by the core: only the driver hands over")
            target_id = msg.to if isinstance(msg, p.HandOver) else msg.client
            target = self._peers.get(target_id)
            if target is None:
                return p.Reply(msg.id, error=f"no client {target_id} is attached")
            if isinstance(msg, p.Accept) and target_id not in self._asking:
                return p.Reply(msg.id, error=f"{target.name} has not asked to drive")
            self._make_driver(target)
            log.info("%s (%d) hands over to %s (%d)", peer.name, peer.id, target.name, target.id)
            self._publish()
            return p.Reply(msg.id)
        raise AssertionError(f"unhandled request {type(msg).__name__}")


def encode_preview(preview: Any) -> str:
    """A swap preview (its exact commands, the gate) for a Reply's `said`."""
    return json.dumps(to_builtins(preview))


def decode_preview(text: str) -> Any:
    """`encode_preview`'s text back into the Preview the confirmation dialog shows."""
    data = json.loads(text)
    gate = tuple(msgspec.convert(g, GateCheck) for g in data.get("gate") or ())
    return Preview(str(data["id"]), str(data["key"]), str(data["title"]), tuple(map(str, data["lines"])),
                   bool(data["needs_approval"]), gate)


class LocalSeat:
    """The console that serves, as a participant: the same role checks as a remote client, no
    socket. Implements `HostControl` (console/core/control.py) in full."""

    def __init__(self, server: ShareServer, peer: _Peer) -> None:
        self.server = server
        self.peer = peer
        self.client_id = peer.id
        self._ids = 0

    def _ask(self, msg_type: type[Any], **fields: Any) -> p.Reply:
        self._ids += 1
        return self.server.handle(self.peer, msg_type(id=self._ids, **fields))

    def verify(self) -> str | None:
        return self._ask(p.Verify).error

    def pick_units(self, new: str, old: str | None) -> None:
        self._ask(p.Pick, new=new, old=old)

    def start_bench(self, kind: str, plan: list[tuple[int, int, int, int]] | None = None) -> str | None:
        return self._ask(p.Bench, kind=kind, plan=[list(x) for x in plan] if plan else None).error

    def stop_bench(self) -> str | None:
        reply = self._ask(p.StopBench)
        return reply.error or reply.said

    def set_note(self, text: str) -> str | None:
        return self._ask(p.SetNote, text=text[:400]).error

    def hand_over(self, to: int) -> str | None:
        return self._ask(p.HandOver, to=to).error

    def ask_drive(self) -> str | None:
        reply = self._ask(p.AskDrive)
        return reply.error or reply.said

    def accept(self, client: int) -> str | None:
        return self._ask(p.Accept, client=client).error

    def set_view(self, pane: str | None) -> None:
        self._ask(p.View, pane=pane)

    # the swap (issue 13): the same role checks as a remote client; `who` is this seat's name
    @property
    def who(self) -> str:
        return self.peer.name

    def swap_preview(self, key: str) -> tuple[str | None, Any]:
        reply = self._ask(p.SwapPreview, key=key)
        return (reply.error, None) if reply.error or not reply.said else (None, decode_preview(reply.said))

    async def swap_preview_async(self, key: str) -> tuple[str | None, Any]:
        return self.swap_preview(key)

    def swap_confirm(self, preview_id: str, who: str | None = None) -> str | None:
        return self._ask(p.SwapConfirm, preview=preview_id).error

    def swap_override(self, check: str, typed: str, who: str | None = None) -> str | None:
        return self._ask(p.SwapOverride, check=check, typed=typed[:400]).error

    def swap_approve(self, request_id: str, who: str) -> str | None:
        return self._ask(p.SwapDecide, request=request_id, decision="approve").error

    def swap_withdraw(self, request_id: str, who: str) -> str | None:
        return self._ask(p.SwapDecide, request=request_id, decision="withdraw").error


def _existing_socket(path: Path) -> bool:
    if not (path.exists() or path.is_symlink()):
        return False
    if not stat.S_ISSOCK(path.lstat().st_mode):
        raise ShareError(f"{path} exists and is not a socket")
    return True


def _remove_stale(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


async def _answers(path: Path) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(path)), 1)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    return True


def _peer_uid(writer: asyncio.StreamWriter | None) -> int | None:
    """The uid of the process at the other end of a Unix socket (SO_PEERCRED: the kernel's word,
    not the client's)."""
    sock = writer.get_extra_info("socket") if writer is not None else None
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    except (OSError, AttributeError):
        return None
    return int.from_bytes(creds[4:8], "little")


def _user_name() -> str:
    with contextlib.suppress(Exception):
        return p.clean_name(getpass.getuser())
    return "anonymous"


def _origin(writer: asyncio.StreamWriter | None, via: str) -> str:
    """Who is at the other end, by what the kernel says, whatever the door: `uid N` (SO_PEERCRED on
    the Unix socket; the owner of the client's loopback socket in /proc/net/tcp), else `tcp HOST`."""
    uid = _peer_uid(writer) if via == "unix" else _tcp_peer_uid(writer)
    if uid is not None:
        return f"uid {uid}"
    peer = writer.get_extra_info("peername") if writer is not None and via != "unix" else None
    return f"tcp {peer[0]}" if peer else via


def _tcp_hex(address: tuple[Any, ...]) -> str | None:
    """An (ip, port) as /proc/net/tcp{,6} writes it (little-endian words), or None."""
    try:
        ip = ipaddress.ip_address(address[0])
    except ValueError:
        return None
    raw = ip.packed
    words = "".join(raw[i:i + 4][::-1].hex().upper() for i in range(0, len(raw), 4))
    return f"{words}:{int(address[1]):04X}"


def _tcp_peer_uid(writer: asyncio.StreamWriter | None) -> int | None:
    """The uid owning the other end of a loopback TCP connection (the kernel's table; a client
    on another machine has no entry here): None when it cannot be told."""
    if writer is None:
        return None
    peer, ours = writer.get_extra_info("peername"), writer.get_extra_info("sockname")
    if not peer or not ours:
        return None
    local, remote = _tcp_hex(peer), _tcp_hex(ours)
    if local is None or remote is None:
        return None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if cols[1] == local and cols[2] == remote:
                    return int(cols[7])
    return None


def _peer_name(writer: asyncio.StreamWriter, via: str) -> str:
    if via == "unix":
        sock = writer.get_extra_info("socket")
        with contextlib.suppress(OSError, AttributeError):
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            pid = int.from_bytes(creds[:4], "little")
            return f"unix pid {pid}"
        return "unix"
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if peer else via


__all__ = ["ShareServer", "ShareError", "LocalSeat", "runtime_dir", "socket_path_for"]
