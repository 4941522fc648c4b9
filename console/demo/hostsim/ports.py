"""Ports for the simulated host's servers (SGLang, the router), chosen as a real host's are.

SGLang listens on 30000 by default and the beside path puts the new server on the next port: both
below Linux's ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`, 32768-60999 by default),
where the kernel never hands a port to an outgoing connection. A port taken with `bind(0)` is in
that range, and so is the one after it: under a loaded suite an SSH client's connection could hold
it as its local port when the simulated server binds it ("Address already in use", checked on this
kernel: a connected or TIME_WAIT client socket blocks a listener's bind, SO_REUSEADDR or not), and
the beside server failed to boot. So the simulator takes a run of free ports below the range, and
holds them for its life: a socket bound to each (SO_REUSEPORT, never listening: no connection reaches
it and the kernel lists it nowhere in /proc/net/tcp) keeps another simulator on this machine, which
checks a port with a plain bind, from choosing the same one before its server binds it; the simulated
SGLang binds with SO_REUSEPORT too (console/demo/hostsim/fake_sglang/launch_server.py), same user.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10_000
# The 10,000 ports just below the kernel's range are the real-daemon tests' (tests/real/ports.py: their
# servers' ports, locked across processes while chosen but not yet bound): the simulator stays below them.
LEFT_FOR_OTHERS = 10_000


def ephemeral_low() -> int:
    """The first port the kernel hands to outgoing connections (32768 when unreadable)."""
    try:
        return int(RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def bindable(port: int, address: str = "127.0.0.1") -> bool:
    """A plain bind of `address`:`port` succeeds now (no SO_REUSEADDR: a listener, a connection or a
    TIME_WAIT on it, or a port held by a simulator, fails it)."""
    with socket.socket() as s:
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True


def _hold(port: int) -> socket.socket | None:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        return None
    return s


def server_ports(count: int = 1, *, rng: random.Random | None = None,
                 held: list[socket.socket] | None = None) -> int:
    """The first of `count` consecutive ports, each free on 127.0.0.1 and 0.0.0.0 now and below the
    ephemeral range (so no connection takes one later) and the real-daemon tests' ports; a port from
    bind(0) if the range leaves no room. `held`: the holding sockets are appended to it (close them when the servers are gone)."""
    high = ephemeral_low() - LEFT_FOR_OTHERS - count
    pick = rng or random.SystemRandom()
    if high > LOWEST:
        for _ in range(200):
            first = pick.randrange(LOWEST, high)
            if not all(bindable(first + i) and bindable(first + i, "0.0.0.0") for i in range(count)):
                continue
            if held is None:
                return first
            got = [_hold(first + i) for i in range(count)]
            if all(got):
                held.extend(s for s in got if s is not None)
                return first
            for s in got:
                if s is not None:
                    s.close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


__all__ = ["bindable", "ephemeral_low", "server_ports"]
