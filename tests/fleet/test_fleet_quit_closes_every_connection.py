"""Quitting a fleet (issue 36): every host's connection is closed, a handshake still in flight
leaves nothing open behind it, and no command of ours is left running on any host."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace

from console.domain.fleet.hosts import Fleet
from console.demo.hostsim.multihost import MultiHostServer
from console.host.transport.ssh import SshOptions, SshTransport
from tests.kit.hosts import wait_for


def _nothing_left(server: MultiHostServer) -> bool:
    return all(not host.open_connections and not host._children for host in server.hosts)


async def test_quitting_a_fleet_closes_every_hosts_connection_and_leaves_nothing_on_the_hosts() -> None:
    server = MultiHostServer(8)
    profiles = await server.start()
    # Two handshakes at a time: at quit some hosts read, others are still connecting or queued.
    fleet = Fleet([replace(p, connect_timeout_s=30) for p in profiles], max_connecting=2)
    try:
        await fleet.start()
        await wait_for(lambda: sum(s.data("gpu") is not None for s in fleet.states) >= 2, timeout=120, interval=0.05)
        assert any(host.open_connections for host in server.hosts)
        await asyncio.wait_for(fleet.close(), 120)  # returns: no wall-clock bound asserted
        await wait_for(lambda: _nothing_left(server), timeout=60, interval=0.1)
        # ...and nothing reconnects afterwards.
        await asyncio.sleep(1.0)  # not a wait: a settle before a negative check (no host reconnected)
        assert _nothing_left(server)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(fleet.close(), 60)
        await server.stop()


async def test_a_host_closed_while_its_handshake_is_in_flight_is_left_with_no_connection() -> None:
    server = MultiHostServer(1)
    (profile,) = await server.start()
    host = server.hosts[0]
    transport = SshTransport(SshOptions(profile.host, port=profile.port, user=profile.user,
                                        identity=profile.identity, known_hosts=profile.known_hosts,
                                        ssh_config=(), connect_timeout_s=30))
    # The handshake is held at its very end, as a slow host's is when the operator quits.
    handshake_done, release = asyncio.Event(), asyncio.Event()
    open_connection = transport._open_connection

    async def held(**kwargs: object) -> object:
        conn = await open_connection(**kwargs)  # type: ignore[arg-type]
        handshake_done.set()
        await release.wait()
        return conn

    transport._open_connection = held  # type: ignore[method-assign]
    connecting = asyncio.ensure_future(transport.connect())
    try:
        await asyncio.wait_for(handshake_done.wait(), 60)
        assert host.open_connections
        await asyncio.wait_for(transport.close(), 60)  # the console quits
        release.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(connecting, 60)
        await wait_for(lambda: not host.open_connections, timeout=30, interval=0.05)
        assert transport.state.status != "connected"
    finally:
        release.set()
        connecting.cancel()
        with contextlib.suppress(BaseException):
            await connecting
        await transport.close()
        await server.stop()
