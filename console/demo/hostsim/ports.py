"""Ports for the simulated host's servers (SGLang, the router), chosen as a real host's are.

SGLang listens on 30000 by default and the beside path puts the new server on the next port: both
below Linux's ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`, 32768-60999 by default),
where the kernel never hands a port to an outgoing connection. A port taken with `bind(0)` is in
that range, and so is the one after it: under a loaded suite an SSH client's connection could hold
it as its local port when the simulated server binds it ("Address already in use", checked on this
kernel: a connected or TIME_WAIT client socket blocks a listener's bind, SO_REUSEADDR or not), and
the beside server failed to boot. So the simulator takes a run of free ports below the range.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10_000


def ephemeral_low() -> int:
    """The first port the kernel hands to outgoing connections (32768 when unreadable)."""
    try:
        return int(RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def server_ports(count: int = 1, *, rng: random.Random | None = None) -> int:
    """The first of `count` consecutive ports, each free on 127.0.0.1 now and below the ephemeral
    range (so no connection takes one later); a port from bind(0) if the range leaves no room."""
    high = ephemeral_low() - count
    pick = rng or random.SystemRandom()
    if high > LOWEST:
        for _ in range(200):
            first = pick.randrange(LOWEST, high)
            if all(_free(first + i) for i in range(count)):
                return first
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


__all__ = ["ephemeral_low", "server_ports"]
