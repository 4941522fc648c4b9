"""The ports the real daemons' servers listen on (tests/real/ports.py): the containers share this machine's
network, and under `pytest -n 3` the other modules' connections come and go many times a second. A port
(and the next, which a beside plan gives the new server) must be one that no outgoing connection, no
other test process and nothing already there can hold when the server binds it, a minute later."""

from __future__ import annotations

import random
import socket
import subprocess
import sys

import pytest

from tests.real import ports
from tests.real.docker_host import CHECKOUT
from tests.real.ports import free_port, kernels_range


def test_a_port_and_the_next_two_lie_outside_the_ports_the_kernel_gives_connections() -> None:
    # The kernel takes a connection's own port from this range (connect() the even ones first) and
    # holds it 60 s after the close: a server binding one then crash-loops (Address already in use).
    low, high = kernels_range()
    first = free_port(3)
    for port in range(first, first + 3):
        assert not low <= port <= high, (port, low, high)
        assert 1024 <= port < 65536 and port not in ports.DEFAULTS


def test_a_port_a_connection_holds_is_never_given(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = ports.pool()
    with socket.socket() as listener, socket.socket() as client:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        taken = next(p for p in pool[len(pool) // 2:] if ports.bindable(p) and ports.bindable(p + 1))
        client.bind(("127.0.0.1", taken))
        client.connect(listener.getsockname())
        # The search starts at the port the connection holds (and at the one before: its block of two
        # would hold it as the next).
        monkeypatch.setattr(random, "randrange", lambda n: pool.index(taken) - 1)
        first = free_port(2)
    assert taken not in (first, first + 1), (taken, first)


def test_a_port_another_test_process_holds_is_never_given() -> None:
    mine = free_port()
    pool = ports.pool()
    other = (f"import random; from tests.real import ports; random.randrange = lambda n: {pool.index(mine)}; "
             "print(ports.free_port())")
    run = subprocess.run([sys.executable, "-c", other], capture_output=True, text=True, timeout=60, check=True,
                         cwd=CHECKOUT)
    assert int(run.stdout) != mine


def test_the_simulators_ports_are_never_the_ones_these_servers_choose_from() -> None:
    """The simulator checks a port with a plain bind; a port chosen here but not yet bound by its
    server passes that check, so the two pools must not meet (a simulated SGLang's /health was once
    answered by another module's server on its port, its own having failed to bind)."""
    from console.demo.hostsim.ports import server_ports

    real = ports.pool()
    held: list[socket.socket] = []
    try:
        picks = [server_ports(2, held=held) for _ in range(50)]
    finally:
        for s in held:
            s.close()
    assert max(picks) + 1 < min(real), (max(picks), min(real))
