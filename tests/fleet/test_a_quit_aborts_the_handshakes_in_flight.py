"""Quitting a fleet aborts the SSH handshakes still in flight at once (issue 36: 23 of 100 hosts were
still in their handshake at `q`, and the quit waited its 5 s bound for them). Against a host that
accepts the TCP connection and never answers, so each handshake would last its whole connect
timeout: the abort alone closes every socket (counted on the host's side), the connect attempt
ends, and nothing connects again."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from console.config import HostProfile
from console.core.runner import HostRunner
from console.core.state import HostState
from console.domain.fleet.hosts import Fleet
from console.host.session import HostSession
from console.host.transport.errors import ConnectError
from console.host.transport.ssh import SshOptions, SshTransport
from tests.kit.hosts import wait_for

NEVER_S = 600.0  # the connect timeout: far past any wait of these tests


class SilentHost:
    """Accepts every TCP connection and never says a word; counts them, and those the client closed."""

    def __init__(self) -> None:
        self.accepted = 0
        self.closed = 0
        self.server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            while await reader.read(4096):
                pass
        except OSError:
            pass
        self.closed += 1
        writer.close()

    @property
    def open(self) -> int:
        return self.accepted - self.closed

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()


def _transport(port: int, tmp_path: Path) -> SshTransport:
    return SshTransport(SshOptions("127.0.0.1", port=port, user="nobody", known_hosts=str(tmp_path / "known_hosts"),
                                   ssh_config=(), connect_timeout_s=NEVER_S))


async def test_an_abort_ends_a_handshake_in_flight_and_closes_its_socket(tmp_path: Path) -> None:
    host = SilentHost()
    port = await host.start()
    transport = _transport(port, tmp_path)
    connecting = asyncio.ensure_future(transport.connect())
    try:
        await wait_for(lambda: host.accepted == 1, timeout=60, interval=0.02)
        transport.abort()  # the fleet's quit: nothing else is cancelled or awaited
        await wait_for(lambda: host.open == 0, timeout=60, interval=0.02)
        result = await asyncio.wait_for(asyncio.gather(connecting, return_exceptions=True), 60)
        assert isinstance(result[0], ConnectError), result
        assert transport.state.status != "connected"
        # A connect asked after the abort opens no socket at all.
        again = await asyncio.gather(transport.connect(), return_exceptions=True)
        assert isinstance(again[0], ConnectError)
        assert host.accepted == 1
    finally:
        connecting.cancel()
        with contextlib.suppress(BaseException):
            await connecting
        await transport.close()
        await host.stop()


async def test_a_runner_whose_handshake_is_aborted_stops_without_retrying(tmp_path: Path) -> None:
    host = SilentHost()
    port = await host.start()
    transport = _transport(port, tmp_path)
    profile = HostProfile(name="silent", host="127.0.0.1", port=port)
    runner = HostRunner(HostSession(profile, transport), HostState("silent"))
    starting = asyncio.ensure_future(runner.start())
    try:
        await wait_for(lambda: host.accepted == 1, timeout=60, interval=0.02)
        transport.abort()
        await asyncio.wait_for(starting, 60)  # returns: it does not sleep in a backoff to try again
        await wait_for(lambda: host.open == 0, timeout=60, interval=0.02)
        assert host.accepted == 1
        assert not runner._tasks  # no source was started
    finally:
        starting.cancel()
        with contextlib.suppress(BaseException):
            await starting
        await runner.close()
        await host.stop()


async def test_a_fleet_quit_during_the_handshakes_closes_every_socket(tmp_path: Path) -> None:
    host = SilentHost()
    port = await host.start()
    hosts = 6
    profiles = [HostProfile(name=f"h{i}", host="127.0.0.1", port=port, user="nobody",
                            known_hosts=str(tmp_path / "known_hosts"), connect_timeout_s=NEVER_S)
                for i in range(hosts)]
    fleet = Fleet(profiles, max_connecting=3)  # 3 in their handshake, 3 queued for a slot
    try:
        await fleet.start()
        await wait_for(lambda: host.accepted == 3, timeout=60, interval=0.02)
        await asyncio.wait_for(fleet.close(), 60)  # returns: no wall-clock bound asserted
        await wait_for(lambda: host.open == 0, timeout=60, interval=0.02)
        assert host.accepted == 3  # the queued hosts never opened a socket
        assert all(h.task is not None and h.task.done() for h in fleet.hosts.values())
        assert not any(s.connection is not None and s.connection.status == "connected" for s in fleet.states)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(fleet.close(), 60)
        await host.stop()


async def test_a_fleets_close_aborts_every_handshake_before_anything_is_awaited(tmp_path: Path) -> None:
    """`q` closes the sockets in the call that starts the close, not when the loop (late under load)
    reaches the close's task: the coroutine `close()` returns has not run when they close."""
    host = SilentHost()
    port = await host.start()
    profiles = [HostProfile(name=f"h{i}", host="127.0.0.1", port=port, user="nobody",
                            known_hosts=str(tmp_path / "known_hosts"), connect_timeout_s=NEVER_S)
                for i in range(4)]
    fleet = Fleet(profiles, max_connecting=4)
    closing = None
    try:
        await fleet.start()
        await wait_for(lambda: host.accepted == 4, timeout=60, interval=0.02)
        closing = fleet.close()  # not awaited yet
        await wait_for(lambda: host.open == 0, timeout=60, interval=0.02)
        await asyncio.wait_for(closing, 60)
        assert host.accepted == 4
    finally:
        if closing is not None:
            closing.close()  # a coroutine never awaited (the test failed before it): no warning
        with contextlib.suppress(Exception):
            await asyncio.wait_for(fleet.close(), 60)
        await host.stop()


async def test_a_connection_that_comes_after_its_wait_was_cancelled_is_closed() -> None:
    """A handshake cancelled as it ends can still hand back its connection (Python 3.11's
    `wait_for` returns a result that lands with the cancel): nobody takes it, so it is closed
    rather than left open (3 of 100 hosts' connections outlived a fleet's quit)."""
    from console.host.transport.hosttime import wait_for_host

    closed: list[object] = []

    class Connection:
        def abort(self) -> None:
            closed.append(self)

    started = asyncio.Event()

    async def handshake_that_ends_anyway() -> Connection:
        started.set()
        try:
            await asyncio.sleep(NEVER_S)
        except asyncio.CancelledError:
            pass  # finished in spite of the cancel
        return Connection()

    waiting = asyncio.ensure_future(wait_for_host(handshake_that_ends_anyway(), NEVER_S,
                                                  discard=lambda conn: conn.abort()))
    await asyncio.wait_for(started.wait(), 60)
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(waiting, 60)
    await wait_for(lambda: len(closed) == 1, timeout=60, interval=0.02)
