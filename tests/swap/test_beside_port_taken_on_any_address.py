"""The beside server's port is taken when anything listens on an address the server would bind, not
only 127.0.0.1 (issue 34, item 10): a connect to 127.0.0.1 called a port free that a listener on
127.0.0.2 held, and a server binding 0.0.0.0 then failed to start. Real sockets, the real kernel
table, read by the check's own command through the local transport."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from console.domain.swap import port_free
from console.host.parsers.proc_net import Listener, conflicts
from tests.kit.downtime import kernel_port_rows
from tests.kit.figures import record

ROW = "beside: a port held on another address (127.0.0.2, ::1) than the one checked"


@pytest.fixture
def held_port() -> Iterator[tuple[int, socket.socket]]:
    """A port that something listens on at 127.0.0.2 only."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.2", 0))
    s.listen(1)
    try:
        yield s.getsockname()[1], s
    finally:
        s.close()


@pytest.mark.parametrize("bind", ["0.0.0.0", "::", "127.0.0.2", "localhost", "gpu-host.internal"])
async def test_a_listener_on_127_0_0_2_takes_the_port_for_a_server_binding_there_or_everywhere(
        held_port: tuple[int, socket.socket], bind: str) -> None:
    port, _ = held_port
    why = port_free.port_verdict(port, await kernel_port_rows(port), bind)
    assert why is not None and f"127.0.0.2:{port}" in why and "is taken on the host" in why, why
    record(ROW, tried=1, failed=0)


async def test_a_listener_on_another_specific_address_leaves_127_0_0_1_free(
        held_port: tuple[int, socket.socket]) -> None:
    port, _ = held_port
    assert port_free.port_verdict(port, await kernel_port_rows(port), "127.0.0.1") is None  # Linux binds both


async def test_an_ipv6_loopback_listener_is_seen() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    try:
        s.bind(("::1", 0))
    except OSError:
        s.close()
        pytest.skip("no ::1 on this machine")
    s.listen(1)
    try:
        port = s.getsockname()[1]
        text = await kernel_port_rows(port)
        assert "[::1]" in (port_free.port_verdict(port, text, "::1") or "")
        assert port_free.port_verdict(port, text, "0.0.0.0") is not None
        record(ROW, tried=1, failed=0)
    finally:
        s.close()


async def test_a_closed_port_is_free_and_an_unreadable_table_is_not_called_free() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    assert port_free.port_verdict(port, await kernel_port_rows(port), "0.0.0.0") is None
    assert "could not be checked" in (port_free.port_verdict(port, "grep: /proc/net/tcp: denied\nlisteners_exit=2",
                                                            "0.0.0.0") or "")


@pytest.mark.parametrize(("listener", "bind", "taken"), [
    ("0.0.0.0", "127.0.0.1", True), ("::", "127.0.0.1", True), ("::ffff:127.0.0.1", "127.0.0.1", True),
    ("127.0.0.1", "::ffff:127.0.0.1", True), ("127.0.0.2", "127.0.0.1", False), ("::1", "127.0.0.1", False),
    ("10.0.0.5", "[::]", True)])
def test_which_addresses_collide(listener: str, bind: str, taken: bool) -> None:
    assert conflicts(Listener(listener, 30001), bind, 30001) is taken
    assert not conflicts(Listener(listener, 30002), bind, 30001)
