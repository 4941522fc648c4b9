"""Loopback ports for the real daemons' servers that nothing else on this machine takes meanwhile.

The tests' containers share this machine's network (`--network host`), so a server's port in a container
is this machine's. A port the kernel handed out to `bind(("127.0.0.1", 0))` and let go is free only for
that moment: the kernel gives ports of the same range (`/proc/sys/net/ipv4/ip_local_port_range`) to every
outgoing connection, and Linux's `connect()` takes the even ones first where `bind(0)` takes the odd: so
"the next port" after one it handed out is the very kind an outgoing connection takes. A connection's
port stays held while it is open and for 60 s after it closes (TIME_WAIT), and a server that binds it then
exits with "Address already in use", even with SO_REUSEADDR; under systemd (Restart=on-failure) it
crash-loops, `activating (auto-restart)`. Under `pytest -n 3` the other modules' consoles, routers and
curls open loopback connections many times a second: the clean-clone CI run of session 10 lost the beside
swap on the real systemd that way.

So the ports here come from below the kernel's range (which it never gives out on its own), each checked
free by a plain bind on 127.0.0.1 and on 0.0.0.0 (one held by a listener, a connection or a TIME_WAIT
fails it), and held for the rest of this test process by a lock on a file that every test process of this
machine takes (the other xdist workers, another checkout's run) before it uses a port.
"""

from __future__ import annotations

import fcntl
import os
import random
from pathlib import Path

from console.demo.hostsim import ports as sim_ports
from tests.real.daemons import CACHE

# Beside the daemon roots' locks (not under TMPDIR: each test has its own)
LOCKS = CACHE / "ports"
POOL_SIZE = 10_000  # ports below the kernel's range to choose from
DEFAULTS = range(29_000, 31_000)  # SGLang's 30000, its router's 30001/30080, torch's 29500: never chosen
_held: dict[int, int] = {}  # port -> the descriptor of its lock file, open until this process ends


def kernels_range() -> tuple[int, int]:
    """The ports the kernel gives out on its own (Linux's default 32768-60999 where it cannot be read)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def pool() -> list[int]:
    """Ports the kernel never hands out (below its range, or above it where the range starts low), less
    the servers' defaults that a test or a program may bind by name."""
    low, high = kernels_range()
    below = low - 1024 >= POOL_SIZE
    ports = range(low - POOL_SIZE, low) if below else range(high + 1, min(65536, high + 1 + POOL_SIZE))
    return [p for p in ports if p not in DEFAULTS]


def bindable(port: int) -> bool:
    """Nothing on this machine holds PORT: no listener, no connection, no TIME_WAIT (no SO_REUSEADDR here)."""
    return all(sim_ports.bindable(port, address) for address in ("127.0.0.1", "0.0.0.0"))


def _lock(port: int) -> int | None:
    LOCKS.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCKS / f"{port}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def free_port(count: int = 1) -> int:
    """The first of COUNT consecutive free ports, held for this test process (a server in a container
    may outlive the test that started it); raises when the pool has none."""
    ports = pool()
    allowed = set(ports)
    start = random.randrange(len(ports))
    for i in range(len(ports)):
        first = ports[(start + i) % len(ports)]
        block = range(first, first + count)
        if any(p in _held or p not in allowed for p in block):
            continue
        fds: dict[int, int] = {}
        for port in block:
            fd = _lock(port)
            if fd is None or not bindable(port):
                if fd is not None:
                    os.close(fd)
                break
            fds[port] = fd
        else:
            _held.update(fds)
            return first
        for fd in fds.values():
            os.close(fd)
    raise AssertionError(f"no {count} free ports in a row in {ports[0]}-{ports[-1]}")
