"""The pairing surface tried as an attacker and a new user would (issue 34, items 3, 11, 12, 13;
issue 35, items 2, 3): a token file that is not one, a browser address used twice, a name typed in
an address, a flood of asks to drive, and the two-person rule said before anyone is offered a
dialog the core would refuse."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import stat
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual.app import App

from console.core.state import Client, HostState, Presence, same_person, who_can_approve
from console.share import protocol as p
from console.share.server import ShareServer
from console.core.derive.swap_view import ApprovalChanged, SwapSetup
from tests.kit.cli import gpuconsole
from tests.kit.clocks import Clock
from tests.kit.figures import record
from tests.kit.hosts import wait_for


@pytest.fixture
async def core() -> AsyncIterator[tuple[ShareServer, Path, Clock]]:
    clock = Clock(1000.0)
    short = Path(tempfile.mkdtemp(prefix="gc-"))
    server = await ShareServer(HostState("h"), None, owner="ana", clock=clock).start(
        unix_path=short / "core.sock", tcp=("127.0.0.1", 0))
    try:
        yield server, short / "core.sock", clock
    finally:
        await server.close()
        shutil.rmtree(short, ignore_errors=True)


async def _hello(sock: Path, name: str, token: str = "") -> tuple[asyncio.StreamReader, asyncio.StreamWriter, dict]:
    reader, writer = await asyncio.open_unix_connection(str(sock))
    writer.write(json.dumps({"t": "hello", "version": p.VERSION, "name": name, "token": token}).encode() + b"\n")
    welcome = json.loads(await asyncio.wait_for(reader.readline(), 10))
    return reader, writer, welcome


async def _reply(reader: asyncio.StreamReader, rid: int) -> dict[str, Any]:
    while True:
        msg = json.loads(await asyncio.wait_for(reader.readline(), 10))
        if msg.get("t") == "reply" and msg.get("id") == rid:
            return msg


# -- issue 34, item 13: connect, ask to drive, leave, 200 times --------------------------------------
async def test_two_hundred_asks_to_drive_from_one_person_reach_the_driver_once(core) -> None:
    server, sock, clock = core
    announced: list[int] = []
    seen: set[int] = set()

    def on_event(event: Any) -> None:
        if isinstance(event, Presence):
            new = set(event.asking) - seen
            announced.extend(new)  # what the driver's console rings a bell for
            seen.clear()
            seen.update(event.asking)

    server.state.subscribe(on_event)
    _, driver, welcome = await _hello(sock, "ana")
    assert welcome["role"] == "driver"
    refusals = 0
    for _ in range(200):
        reader, writer, _ = await _hello(sock, "mallory")
        writer.write(json.dumps({"t": "ask_drive", "id": 1}).encode() + b"\n")
        reply = await _reply(reader, 1)
        refusals += bool(reply["error"])
        writer.close()
        clock.t += 0.05  # 200 in 10 s
    await wait_for(lambda: len(server.clients) == 1, 10)
    record("connect, ask to drive, leave (one person, 10 s)", tried=200, announced=len(announced))
    assert len(announced) == 1 and refusals == 199
    # the same person later: told again
    clock.t += 60
    reader, writer, _ = await _hello(sock, "mallory")
    writer.write(json.dumps({"t": "ask_drive", "id": 1}).encode() + b"\n")
    assert (await _reply(reader, 1))["error"] is None
    await wait_for(lambda: len(announced) == 2, 10)
    writer.close()
    driver.close()


async def test_a_second_ask_is_answered_with_why_it_was_not_passed_on(core) -> None:
    server, sock, clock = core
    _, driver, _ = await _hello(sock, "ana")
    reader, writer, _ = await _hello(sock, "ben")
    for rid in (1, 2):
        writer.write(json.dumps({"t": "ask_drive", "id": rid}).encode() + b"\n")
    assert (await _reply(reader, 1))["error"] is None
    second = await _reply(reader, 2)
    assert second["error"] is None  # still asking: the first ask stands
    writer.close()
    await wait_for(lambda: len(server.clients) == 1, 10)
    reader, writer, _ = await _hello(sock, "ben")
    writer.write(json.dumps({"t": "ask_drive", "id": 3}).encode() + b"\n")
    again = await _reply(reader, 3)
    assert "you asked to drive 0 s ago; the driver was told then" in (again["error"] or "")
    writer.close()
    driver.close()


# -- issue 34, item 11: attach --token-file reads without bound ---------------------------------------
@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "world-readable", "huge", "directory"])
def test_a_token_file_that_is_not_one_is_refused_in_one_line(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "token"
    if kind == "dev-zero":
        path = Path("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path, 0o600)  # nobody writes: reading it hung forever
    elif kind == "world-readable":
        path.write_text("s3cr3t-token\n")
        path.chmod(0o644)
    elif kind == "huge":
        path.write_bytes(b"a" * (1 << 20))
        path.chmod(0o600)
    else:
        path.mkdir()
    out = gpuconsole("attach", str(tmp_path / "none.sock"), "--token-file", str(path), timeout=30)
    assert out.returncode == 2, out.stderr
    line = out.stderr.strip()
    assert line.count("\n") == 0 and line.startswith(f"gpuconsole: --token-file {path}: "), line
    assert {"dev-zero": "not a regular file", "fifo": "not a regular file",
            "world-readable": "readable by others (mode 0644); chmod 600 it",
            "huge": "longer than 4096 bytes", "directory": "not a regular file"}[kind] in line
    assert "s3cr3t" not in out.stderr + out.stdout


def test_a_good_token_file_is_read() -> None:
    from console.cli.share import read_token_file

    fd, name = tempfile.mkstemp()
    os.write(fd, b"  tok-en_1  \n")
    os.close(fd)
    try:
        assert stat.S_IMODE(os.stat(name).st_mode) == 0o600
        assert read_token_file(name) == "tok-en_1"
    finally:
        os.unlink(name)


# -- issue 34, items 3 and 12: the browser's address ------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_first_browser_address_works_once_and_its_tab_is_who_it_was_issued_to(core) -> None:
    import aiohttp

    from console.ui import web as webmod

    server, sock, _ = core
    bob = server.invite("bob")
    web = await webmod.WebShare(sock, "127.0.0.1", _free_port(), server.token, owner="ana",
                                people={bob: "bob"}).start()
    try:
        url = web.url + "&name=mallory"
        async with aiohttp.ClientSession() as first:
            response = await first.get(url, allow_redirects=False)
            assert response.status == 303 and response.headers["Location"] == "/"  # no name carried on
            cookie = response.cookies[webmod.COOKIE].value
            assert cookie not in url and server.token not in url  # the address holds a ticket, not the token
            page = await first.get(web.public_url + "/", allow_redirects=False, cookies={webmod.COOKIE: cookie})
            assert page.status == 200
        reuses = 0
        for _ in range(5):  # the same address again, from anywhere: refused
            async with aiohttp.ClientSession() as other:
                again = await other.get(url, allow_redirects=False)
                reuses += again.status != 403
        record("first browser URL reused after it moved to the cookie", tried=5, accepted=reuses)
        assert reuses == 0
        # the serve's token itself is no browser address either
        async with aiohttp.ClientSession() as other:
            assert (await other.get(f"{web.public_url}/?token={server.token}", allow_redirects=False)).status == 403
    finally:
        await web.close()
    # whose tab it is: the serve's person by the owner's name, an invited person by theirs; never the
    # typed name; always joining as an observer
    command = webmod.attach_command(sock, web.owner)
    assert " --name ana --observe" in command and "mallory" not in command
    assert web.owner == "ana"


async def test_a_tab_joins_as_an_observer_even_when_nobody_drives(core) -> None:
    from console.share.client import attach

    server, sock, _ = core
    tab = await attach(sock, name="ana", observe=True)
    pump = asyncio.ensure_future(tab.pump())
    try:
        assert tab.role == "observer"
        assert [(c.name, c.role) for c in server.clients] == [("ana", "observer")]
        reply = await tab.request(p.AskDrive)
        assert reply.error is None
        assert [(c.name, c.role) for c in server.clients] == [("ana", "driver")]
    finally:
        await tab.close()
        pump.cancel()


# -- issue 34, item 2: an invite never reaches the operator's terminal -------------------------------
def test_serve_prints_where_an_invite_is_and_who_issued_it_never_the_invite(tmp_path: Path) -> None:
    from tests.kit.cli import Lines, popen

    short = Path(tempfile.mkdtemp(prefix="gcd-"))
    serve = popen("--demo", "--no-record", "serve", "--socket", str(short / "core.sock"), "--invite", "bob",
                  "--listen", "0", tmp=short)
    out = Lines(serve.stdout)
    err = Lines(serve.stderr)
    try:
        out.wait_for("  bob: invite issued by")
        token_file = short / "core.sock.bob.token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        invite = token_file.read_text().strip()
        line = next(x for x in out.lines if x.startswith("  bob:"))
        assert f"in {token_file} (0600; hand the file to bob" in line
        assert f"gpuconsole attach {short / 'core.sock'} --token-file {token_file}" in line
    finally:
        serve.terminate()
        serve.wait(15)
    shown = out.text() + err.text()
    assert invite not in shown and "GPUCONSOLE_TOKEN=" not in shown
    assert not token_file.exists()  # removed with the serve
    shutil.rmtree(short, ignore_errors=True)


def test_serve_with_an_invite_does_not_say_the_socket_is_this_users_only(tmp_path: Path) -> None:
    """"(no token: the Unix socket is this user's only)" was printed under bob's invite line: bob
    attaches to that socket with his token."""
    from tests.kit.cli import Lines, popen

    short = Path(tempfile.mkdtemp(prefix="gcd-"))
    serve = popen("--demo", "--no-record", "serve", "--socket", str(short / "core.sock"), "--invite", "bob", tmp=short)
    out = Lines(serve.stdout)
    try:
        out.wait_for("  bob: invite issued by")
        alone = popen("--demo", "--no-record", "serve", "--socket", str(short / "alone.sock"), tmp=short)
        try:
            alone_out = Lines(alone.stdout)
            alone_out.wait_for("  (no token: the Unix socket is this user's only)")
        finally:
            alone.terminate()
            alone.wait(15)
    finally:
        serve.terminate()
        serve.wait(15)
    assert "this user's only" not in out.text(), out.text()
    shutil.rmtree(short, ignore_errors=True)


def test_serve_help_names_the_demo_scenario_and_invite_rejects_a_bad_name() -> None:
    out = gpuconsole("serve", "--help")
    assert "--demo-scenario" in out.stdout and "--invite NAME" in out.stdout
    bad = gpuconsole("--demo", "serve", "--invite", "[b]ob")
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "--invite" in bad.stderr
    help_top = gpuconsole("--help")
    assert "--invite NAME" in help_top.stdout


# -- issue 35, item 2: who can approve, said up front; no dialog the core will refuse -----------------
PRESENCE = Presence("h", (Client(1, "ana", "driver", "unix", person="uid 1000"),
                          Client(2, "ana2", "observer", "unix", person="uid 1000"),
                          Client(3, "bob", "observer", "tcp", person="invite bob")))


def test_who_can_approve_is_by_person_not_by_name() -> None:
    assert same_person(PRESENCE, "ana", 2) and not same_person(PRESENCE, "ana", 3)
    assert who_can_approve(PRESENCE, "ana") == (
        "bob can approve; ana2 cannot (ana on another connection: the same person)")
    alone = Presence("h", PRESENCE.clients[:2])
    assert who_can_approve(alone, "ana").startswith("nobody attached can approve; ana2 cannot")
    assert "--share --invite NAME" in who_can_approve(alone, "ana")


class Control:
    def __init__(self, client_id: int) -> None:
        self.client_id = client_id
        self.calls: list[tuple[str, ...]] = []

    def swap_approve(self, request_id: str, who: str) -> str | None:
        self.calls.append(("approve", request_id, who))
        return None


class Host(App[None]):
    def __init__(self, screen: Any) -> None:
        super().__init__()
        self._first = screen

    def on_mount(self) -> None:
        self.push_screen(self._first)


def _state(presence: Presence) -> HostState:
    state = HostState("h", label="h")
    state.apply(SwapSetup("h", "old.service", "new.service", None, "/m"))
    state.apply(presence)
    state.apply(ApprovalChanged("h", "r1", "stop_old", ("timeout -k 5 120 systemctl stop -- old.service",),
                                "ana", 5.0))
    return state


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
async def test_the_requester_on_another_connection_is_told_who_can_approve_not_offered_a_dialog(size) -> None:
    from console.ui.panes.swap import ApproveScreen, SwapScreen

    control = Control(2)  # ana2: ana's uid, another terminal
    app = Host(SwapScreen(_state(PRESENCE), control, "ana2"))
    async with app.run_test(size=size) as pilot:
        await wait_for(lambda: any("waiting for another person" in n.message for n in app._notifications), 30)
        assert not isinstance(app.screen, ApproveScreen)
        said = [n.message for n in app._notifications]
        assert any("waiting for another person: bob can approve; ana2 cannot" in m for m in said), said
        await pilot.press("a")
        await pilot.pause()
        assert not isinstance(app.screen, ApproveScreen) and control.calls == []


async def test_the_drivers_own_a_says_who_can_approve() -> None:
    from console.ui.panes.swap import SwapScreen

    app = Host(SwapScreen(_state(PRESENCE), Control(1), "ana"))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.5)
        await pilot.press("a")
        await pilot.pause()
        said = [n.message for n in app._notifications]
        assert any(m.startswith("your request waits for another person: bob can approve") for m in said), said
        assert not any("nothing waits for your approval" in m for m in said)


async def test_the_invited_person_is_offered_the_dialog_and_approves() -> None:
    from console.ui.panes.swap import ApproveScreen, SwapScreen

    control = Control(3)
    app = Host(SwapScreen(_state(PRESENCE), control, "bob"))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: isinstance(app.screen, ApproveScreen), 30)
        await pilot.press("enter")
        await pilot.pause()
        assert control.calls == [("approve", "r1", "bob")]


def test_the_presence_names_each_clients_person_through_the_codec() -> None:
    from console.core import codec

    assert codec.decode_event(codec.encode_event(PRESENCE)) == PRESENCE
