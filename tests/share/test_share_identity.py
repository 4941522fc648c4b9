"""Identity in pairing comes from what a client cannot choose (issue 21, item 3): the peer's uid on
the Unix socket (SO_PEERCRED), a per-person token `serve` issued, or the serve's own token. One
person on two connections is one person; a name bound to one identity cannot be taken by another;
approvals and withdrawals compare identities, not names. Also every driver-only request refused
for an observer (item 15) and a bad value answered, not dropped (item 6)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from console.core.state import HostState
from console.share import protocol as p
from console.share.server import ShareServer
from console.core.derive.swap_view import ApprovalChanged
from tests.kit.figures import record


class FakeControl:
    """Records what the core carried out, in whose name."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args: Any) -> None:
            self.calls.append((name, *map(str, args)))
            return None

        return call

    def swap_preview(self, key: str) -> tuple[str | None, Any]:
        self.calls.append(("swap_preview", key))
        return "no preview here", None


class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.ids = reader, writer, 0
        self.welcome: dict[str, Any] = {}

    async def hello(self, name: str, token: str = "") -> dict[str, Any]:
        self.writer.write(json.dumps({"t": "hello", "version": p.VERSION, "name": name, "token": token}).encode()
                          + b"\n")
        line = await asyncio.wait_for(self.reader.readline(), 10)
        self.welcome = json.loads(line) if line else {}
        return self.welcome

    async def ask(self, t: str, **fields: Any) -> dict[str, Any] | None:
        """One request; its reply, or None when the core dropped the connection."""
        self.ids += 1
        self.writer.write(json.dumps({"t": t, "id": self.ids, **fields}).encode() + b"\n")
        while True:
            line = await asyncio.wait_for(self.reader.readline(), 10)
            if not line:
                return None
            msg = json.loads(line)
            if msg.get("t") == "reply" and msg.get("id") == self.ids:
                return msg


@pytest.fixture
async def core() -> AsyncIterator[tuple[ShareServer, FakeControl, Path]]:
    state = HostState("h")
    control = FakeControl()
    short = Path(tempfile.mkdtemp(prefix="gc-"))
    server = await ShareServer(state, control).start(unix_path=short / "core.sock", tcp=("127.0.0.1", 0))
    try:
        yield server, control, short / "core.sock"
    finally:
        await server.close()
        shutil.rmtree(short, ignore_errors=True)


async def _unix(sock: Path, name: str, token: str = "") -> Conn:
    conn = Conn(*await asyncio.open_unix_connection(str(sock)))
    await conn.hello(name, token)
    return conn


async def _tcp(server: ShareServer, name: str, token: str) -> Conn:
    assert server.tcp_address is not None
    conn = Conn(*await asyncio.open_connection(*server.tcp_address))
    await conn.hello(name, token)
    return conn


def _request(server: ShareServer, by: str, rid: str = "r1") -> None:
    server.state.apply(ApprovalChanged("h", rid, "stop_old", ("systemctl stop -- a.service",), by, 1.0))


async def test_the_driver_on_a_second_connection_under_another_name_cannot_approve_her_own_request(core) -> None:
    server, control, sock = core
    ana = await _unix(sock, "ana")
    ben2 = await _unix(sock, "ben2")  # the same user (uid): the same person
    assert ana.welcome["role"] == "driver" and ben2.welcome["t"] == "welcome"
    _request(server, "ana")
    for decision in ("approve", "deny"):
        reply = await ben2.ask("swap_decide", request="r1", decision=decision)
        assert reply is not None and "two-person rule" in (reply["error"] or ""), reply
    assert not [c for c in control.calls if c[0] in ("swap_approve", "swap_deny")]
    # the same person may withdraw from either connection
    reply = await ben2.ask("swap_decide", request="r1", decision="withdraw")
    assert reply is not None and reply["error"] is None and control.calls[-1][0] == "swap_withdraw"
    record("identity: second connection of the requester approves/denies", tried=2,
           borrowed=len([c for c in control.calls if c[0] in ("swap_approve", "swap_deny")]))


async def test_a_person_token_names_its_holder_and_counts_as_another_person(core) -> None:
    server, control, sock = core
    ana = await _unix(sock, "ana")  # noqa: F841 - held: a dropped connection leaves
    token = server.invite("ben")
    ben = await _tcp(server, "mallory", token)  # asks to be called mallory: the token says ben
    assert ben.welcome["t"] == "welcome"
    assert [c.name for c in server.clients] == ["ana", "ben"]
    _request(server, "ana")
    reply = await ben.ask("swap_decide", request="r1", decision="approve")
    assert reply is not None and reply["error"] is None
    assert control.calls[-1] == ("swap_approve", "r1", f"ben (invited by {server.owner})")  # the audit's name
    # ben cannot withdraw ana's request
    reply = await ben.ask("swap_decide", request="r1", decision="withdraw")
    assert reply is not None and "only ana" in (reply["error"] or "")
    # the same token on the Unix socket is ben too (a browser tab's attach runs as the serve's user)
    ben_tab = await _unix(sock, "web", token)
    assert ben_tab.welcome["t"] == "welcome" and [c.name for c in server.clients][-1] == "ben"


async def test_a_name_bound_to_one_identity_is_refused_to_another(core) -> None:
    server, control, sock = core
    ana = await _unix(sock, "ana")  # noqa: F841 - held: a dropped connection leaves
    ben_token = server.invite("ben")
    ben_tab = await _unix(sock, "x", ben_token)  # ben's name is bound to ben's invite
    await ben_tab.writer.drain()
    ben_tab.writer.close()
    await _wait_gone(server, "ben")
    eve2 = await _tcp(server, "ben", server.token)  # the serve's person typing "ben"
    assert eve2.welcome["t"] == "refused" and "taken" in eve2.welcome["reason"]
    eve = eve2
    ben = await _tcp(server, "x", ben_token)
    assert ben.welcome["t"] == "welcome"
    # a withdrawal is by identity: eve (token) cannot withdraw ben's request even named alike
    _request(server, "ben", "r2")
    eve3 = await _tcp(server, "eve", server.token)
    reply = await eve3.ask("swap_decide", request="r2", decision="withdraw")
    assert reply is not None and "only ben" in (reply["error"] or "")
    assert not [c for c in control.calls if c[0] == "swap_withdraw"]
    record("identity: another identity takes a bound name or withdraws", tried=3,
           borrowed=int(eve.welcome["t"] == "welcome") + int(eve2.welcome["t"] == "welcome"))


async def _wait_gone(server: ShareServer, name: str) -> None:
    from tests.kit.hosts import wait_for

    await wait_for(lambda: name not in [c.name for c in server.clients], 10)


# -- issue 34, item 2: one person approving their own request through another door --------------
async def test_the_serve_token_over_tcp_is_the_serving_user_and_cannot_approve_her_own_request(core) -> None:
    """ana asks on the Unix socket, then approves over TCP with the serve's own token: the token is
    the person who runs serve, the same person as her uid."""
    server, control, sock = core
    ana = await _unix(sock, "ana")
    assert ana.welcome["role"] == "driver"
    _request(server, "ana")
    door2 = await _tcp(server, "approver", server.token)
    assert door2.welcome["t"] == "welcome"
    for decision in ("approve", "deny"):
        reply = await door2.ask("swap_decide", request="r1", decision=decision)
        assert reply is not None and "two-person rule" in (reply["error"] or ""), reply
    assert not [c for c in control.calls if c[0] in ("swap_approve", "swap_deny")]
    # and the presence says these two connections are one person
    persons = {c.name: c.person for c in server.clients}
    assert persons["ana"] == persons["approver"] == f"uid {os.getuid()}"
    assert server.approvers("ana") == ([], ["ana", "approver"])


async def test_an_invite_is_bound_at_first_use_to_who_used_it(core, monkeypatch: pytest.MonkeyPatch) -> None:
    """bob used his invite first (uid 1001, by the kernel's word); the operator's uid presenting it
    later, on the socket or over TCP, is refused: it is bob's alone."""
    from console.share import server as srv

    server, control, sock = core
    token = server.invite("bob")
    monkeypatch.setattr(srv, "_peer_uid", lambda writer: 1001)
    monkeypatch.setattr(srv, "_tcp_peer_uid", lambda writer: 1001)
    bob = await _unix(sock, "bob", token)
    assert bob.welcome["t"] == "welcome"
    monkeypatch.setattr(srv, "_peer_uid", lambda writer: os.getuid())
    monkeypatch.setattr(srv, "_tcp_peer_uid", lambda writer: os.getuid())
    for door in ("unix", "tcp"):
        again = await (_unix(sock, "bob", token) if door == "unix" else _tcp(server, "bob", token))
        assert again.welcome["t"] == "refused", door
        assert "bob's invite was first used from uid 1001" in again.welcome["reason"]
    assert [c.name for c in server.clients] == ["bob"]


async def test_the_loopback_tcp_peer_uid_is_read_from_the_kernel(core) -> None:
    from console.share import server as srv

    server, control, sock = core
    seen: list[int | None] = []
    original = srv._tcp_peer_uid

    def spy(writer: Any) -> int | None:
        seen.append(original(writer))
        return seen[-1]

    srv._tcp_peer_uid = spy  # type: ignore[assignment]
    try:
        conn = await _tcp(server, "x", server.invite("cy"))
    finally:
        srv._tcp_peer_uid = original  # type: ignore[assignment]
    assert conn.welcome["t"] == "welcome" and seen == [os.getuid()]


async def test_the_local_seat_is_the_serving_user(core) -> None:
    server, control, sock = core
    seat = server.local("ana")
    other = await _unix(sock, "ben2")  # this user again, in another terminal
    _request(server, "ana")
    reply = await other.ask("swap_decide", request="r1", decision="approve")
    assert reply is not None and "two-person rule" in (reply["error"] or "")
    assert seat.peer.identity == f"uid:{os.getuid()}"


# -- item 15: every driver-only request from an observer is refused ---------------------------------
REQUESTS: dict[str, dict[str, Any]] = {
    "verify": {}, "swap": {}, "pick": {"new": "a.service"}, "bench": {"kind": "quick"}, "stop_bench": {},
    "swap_preview": {"key": "stop_old"}, "swap_confirm": {"preview": "p1"},
    "swap_override": {"check": "sha256", "typed": "sha256"},
}


def test_the_test_covers_every_driver_only_request() -> None:
    assert set(REQUESTS) == set(p.DRIVER_ONLY)


@pytest.mark.parametrize("kind", sorted(REQUESTS))
async def test_every_driver_only_request_from_an_observer_is_refused_and_not_carried_out(core, kind: str) -> None:
    server, control, sock = core
    ana = await _unix(sock, "ana")  # noqa: F841 - held: a dropped connection leaves
    ben = await _tcp(server, "ben", server.invite("ben"))
    assert ben.welcome["role"] == "observer"
    before = list(control.calls)
    reply = await ben.ask(kind, **REQUESTS[kind])
    assert reply is not None and "refused by the core: ben observes" in (reply["error"] or ""), reply
    assert control.calls == before


@pytest.mark.parametrize("check", ["sha256", "fit2", "download", "gpu_0"])
async def test_overriding_a_check_whose_name_has_digits_reaches_the_core(core, check: str) -> None:
    """Item 6: `sha256` matched no pattern and the driver was dropped as malformed."""
    server, control, sock = core
    ana = await _unix(sock, "ana")
    reply = await ana.ask("swap_override", check=check, typed=check)
    assert reply is not None, "the driver was disconnected"
    assert control.calls[-1] == ("swap_override", check, check, "ana")


@pytest.mark.parametrize("fields", [
    {"t": "swap_override", "check": "Bad Name!", "typed": "x"},
    {"t": "swap_override", "check": "x" * 100, "typed": "x"},
    {"t": "swap_decide", "request": "r1", "decision": "maybe"},
    {"t": "bench", "kind": "forever"},
    {"t": "swap_preview", "key": "../etc"},
])
async def test_a_bad_value_in_a_known_request_gets_an_error_reply_not_a_drop(core, fields: dict[str, Any]) -> None:
    server, control, sock = core
    ana = await _unix(sock, "ana")
    t = fields.pop("t")
    reply = await ana.ask(t, **fields)
    assert reply is not None and reply["error"], "dropped instead of answered"
    assert reply["error"].startswith("not a valid request: ") and control.calls == []
    # and the connection is still good
    reply = await ana.ask("note", text="still here")
    assert reply is not None and reply["error"] is None


# -- items 10 and 11: floods of connections, clients that never read ---------------------------------
async def test_a_flood_of_silent_connections_is_capped_and_said_once(core, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    server, control, sock = core
    server.max_pending_unix = 8
    caplog.set_level(logging.WARNING, logger="gpuconsole.share")
    flood = [await asyncio.open_unix_connection(str(sock)) for _ in range(60)]
    from tests.kit.hosts import wait_for

    await wait_for(lambda: server.turned_away >= 52, 10)
    assert server.pending <= 8
    # the ones turned away were closed by the core (EOF), not left holding an fd
    closed = 0
    for reader, _ in flood[8:]:
        closed += (await asyncio.wait_for(reader.read(), 5)) == b""
    assert closed == 52
    said = [r for r in caplog.records if "have not said hello" in r.getMessage()]
    record("pre-hello connection flood (cap 8)", tried=60, escaped=0, log_lines=len(said), held=server.pending)
    assert len(said) == 1
    for _, writer in flood:
        writer.close()
    await wait_for(lambda: server.pending == 0, 10)
    good = await _unix(sock, "good")  # the core still welcomes a real client
    assert good.welcome["t"] == "welcome"


async def test_a_flood_of_idle_tcp_connections_never_locks_the_operator_out_of_the_unix_socket(core) -> None:
    """Issue 34, item 4: 64 idle TCP connections (no token needed to open one) filled the one
    pre-hello budget, and the operator's Unix attach was told "wrong or missing token"."""
    from console.share.client import attach
    from tests.kit.hosts import wait_for

    server, control, sock = core
    assert server.tcp_address is not None
    flood = [await asyncio.open_connection(*server.tcp_address) for _ in range(server.max_pending + 8)]
    await wait_for(lambda: server.turned_away >= 8, 10)
    client = await attach(sock, name="ana")  # the local socket always gets in
    try:
        assert client.role == "driver"
        assert [c.name for c in server.clients] == ["ana"]
    finally:
        await client.close()
        for _, writer in flood:
            writer.close()
    record("idle TCP flood against the Unix attach", tried=len(flood), locked_out=0)


async def test_clients_that_never_read_are_dropped_at_the_global_budget(core) -> None:
    from console.core.state import NoteChanged
    from tests.kit.hosts import wait_for

    server, control, sock = core
    server.max_total_buffer = 4 << 20
    server.max_client_buffer = 64 << 20  # only the global budget applies here
    slow = []
    for i in range(6):
        reader, writer = await asyncio.open_unix_connection(str(sock))
        writer.transport.pause_reading()  # never reads: the core's buffer to it grows
        writer.write(json.dumps({"t": "hello", "version": p.VERSION, "name": f"slow{i}"}).encode() + b"\n")
        slow.append((reader, writer))
    await wait_for(lambda: len(server.clients) == 6, 10)
    blob = "x" * 300_000
    peak = 0
    for n in range(200):
        server.state.apply(NoteChanged("h", blob + str(n), "core", float(n)))
        peak = max(peak, server.buffered())
        assert server.buffered() <= server.max_total_buffer + 2 * len(blob)
        await asyncio.sleep(0)
    record("6 clients that never read, 60 MB of events, budget 4 MiB", tried=200, dropped=server.dropped,
           memory_mib=peak >> 20)
    assert server.dropped >= 1
    for _, writer in slow:
        writer.close()
