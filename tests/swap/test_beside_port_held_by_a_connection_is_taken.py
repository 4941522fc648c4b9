"""The beside server's port is taken when a connection holds it as its local port, not only when
something listens on it: the kernel hands a connection an ephemeral port, and a listener's bind to
that port then fails with "Address already in use" whatever SO_REUSEADDR says. The check read only
LISTEN rows and called such a port free; the new server then died at its bind (the clean-clone CI
run's beside failures: the simulator's beside port, the old port + 1, sat in the ephemeral range).
Real sockets, the real kernel table read by the check's own command, the real bind."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from console.demo.hostsim.ports import ephemeral_low, server_ports
from console.domain.swap import port_free
from console.host.parsers.proc_net import parse_sockets
from tests.kit.downtime import kernel_port_rows


def _binds(port: int, address: str = "127.0.0.1") -> bool:
    """Would a server (SO_REUSEADDR, as uvicorn sets it) bind `address`:`port` now?"""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
            s.listen(1)
        except OSError:
            return False
    return True


@pytest.fixture
def connection() -> Iterator[int]:
    """A live loopback connection; its client's local (ephemeral) port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    try:
        yield client.getsockname()[1]
    finally:
        for s in (client, accepted, server):
            s.close()


@pytest.mark.parametrize("bind", ["127.0.0.1", "0.0.0.0"])
async def test_a_connections_local_port_is_taken_for_the_beside_server(connection: int, bind: str) -> None:
    port = connection
    assert not _binds(port, bind)  # the kernel refuses the bind: what the new server would meet
    why = port_free.port_verdict(port, await kernel_port_rows(port), bind)
    assert why is not None and "a connection holds 127.0.0.1:" in why and f":{port}" in why, why
    assert "listens" not in why


async def test_a_connection_to_the_port_is_not_one_that_holds_it(connection: int) -> None:
    """The check's grep finds the port in the remote column too; only the local one holds it: the
    client's row (local: its ephemeral port, remote: the port) leaves the port free once the server
    that listened there is gone and its own end is closed."""
    port = connection
    text = await kernel_port_rows(port)
    client = next(x for x in parse_sockets(text) if x.port == port)
    header = "  sl  local_address rem_address   st tx_queue rx_queue\n"
    remote_only = f"   0: 0100007F:7531 0100007F:{port:04X} 01 00000000:00000000\n"
    assert client.state == "01"
    assert port_free.port_verdict(port, header + remote_only, "127.0.0.1") is None
    assert port_free.port_verdict(30001, header + remote_only, "127.0.0.1") is not None  # 0x7531 = 30001


def test_the_simulators_server_ports_are_below_the_ephemeral_range_and_held_for_its_servers() -> None:
    held: list[socket.socket] = []
    first = server_ports(2, held=held)
    try:
        assert first + 1 < ephemeral_low() and len(held) == 2
        assert not _binds(first) and not _binds(first + 1, "0.0.0.0")  # another simulator's check: taken
        other: list[socket.socket] = []
        assert server_ports(2, held=other) not in (first - 1, first, first + 1)
        held.extend(other)
        with socket.socket() as server:  # the simulated SGLang's bind (SO_REUSEPORT, as the holder)
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            server.bind(("127.0.0.1", first + 1))
            server.listen(1)
            with socket.create_connection(("127.0.0.1", first + 1)):
                pass
    finally:
        for s in held:
            s.close()
    assert _binds(first) and _binds(first + 1)
