"""Tests talk only to loopback: every attempt to resolve or reach another address is refused and
recorded, and the test that made it fails at teardown with the host's name (tests/conftest.py).

A demo's Hub lookup once asked huggingface.co from the suite (DNS failed in CI, unseen: the error
sat in a task nobody retrieved). The wrappers sit on the `socket` module's functions and on
`socket.socket`'s methods, so asyncio (`loop.getaddrinfo` runs `socket.getaddrinfo` in its executor,
`sock_connect` calls `sock.connect`), `asyncio.to_thread` and plain threads are all covered. Child
processes (the demo's simulator process, sshd) are not: they are our own code on loopback too, and
their callers here are.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import threading
from dataclasses import dataclass
from typing import Any

ALLOWED_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


@dataclass(frozen=True, slots=True)
class Violation:
    host: str
    call: str
    thread: str
    test: str | None  # the test running when it happened (None: between tests)


_lock = threading.Lock()
_violations: list[Violation] = []
_current: list[str | None] = [None]
_originals: dict[str, Any] = {}


def is_local(host: object) -> bool:
    """Loopback, this host's wildcard (a listener's bind: no traffic leaves), or an AF_UNIX path."""
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    if host in ("", "0.0.0.0", "::") or host.lower().rstrip(".") in ALLOWED_NAMES:
        return True
    try:
        addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(addr, "ipv4_mapped", None)
    return bool(addr.is_loopback or (mapped is not None and mapped.is_loopback))


def _refuse(host: object, call: str) -> None:
    v = Violation(str(host), call, threading.current_thread().name, _current[0])
    with _lock:
        _violations.append(v)


def _getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    flags = kwargs.get("flags", args[4] if len(args) > 4 else 0)
    numeric = isinstance(flags, int) and bool(flags & socket.AI_NUMERICHOST)  # parses only: no lookup
    if not numeric and not is_local(host):
        _refuse(host, "getaddrinfo")
        raise socket.gaierror(socket.EAI_NONAME, f"tests may reach loopback only (tests/kit/netguard.py): {host}")
    return _originals["getaddrinfo"](host, *args, **kwargs)


def _gethostbyname(host: Any) -> Any:
    if not is_local(host):
        _refuse(host, "gethostbyname")
        raise socket.gaierror(socket.EAI_NONAME, f"tests may reach loopback only (tests/kit/netguard.py): {host}")
    return _originals["gethostbyname"](host)


def _create_connection(address: Any, *args: Any, **kwargs: Any) -> Any:
    host = address[0] if isinstance(address, tuple) and address else address
    if not is_local(host):
        _refuse(host, "create_connection")
        raise OSError(errno.ENETUNREACH, f"tests may reach loopback only (tests/kit/netguard.py): {host}")
    return _originals["create_connection"](address, *args, **kwargs)


def _check_address(sock: socket.socket, address: Any, call: str) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return  # AF_UNIX, netlink: never the network
    host = address[0] if isinstance(address, tuple) and address else address
    if not is_local(host):
        _refuse(host, call)
        raise OSError(errno.ENETUNREACH, f"tests may reach loopback only (tests/kit/netguard.py): {host}")


def _connect(self: socket.socket, address: Any) -> Any:
    _check_address(self, address, "connect")
    return _originals["connect"](self, address)


def _connect_ex(self: socket.socket, address: Any) -> Any:
    _check_address(self, address, "connect_ex")
    return _originals["connect_ex"](self, address)


def install() -> None:
    """Wrap the socket functions once per process (idempotent)."""
    if _originals:
        return
    _originals.update(getaddrinfo=socket.getaddrinfo, gethostbyname=socket.gethostbyname,
                      create_connection=socket.create_connection, connect=socket.socket.connect,
                      connect_ex=socket.socket.connect_ex)
    socket.getaddrinfo = _getaddrinfo  # type: ignore[assignment]
    socket.gethostbyname = _gethostbyname  # type: ignore[assignment]
    socket.create_connection = _create_connection  # type: ignore[assignment]
    socket.socket.connect = _connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _connect_ex  # type: ignore[method-assign]


def begin(test: str | None) -> None:
    _current[0] = test


def take(test: str | None = None, *, all_tests: bool = False) -> list[Violation]:
    """The violations recorded for `test` (or every one), removed from the record."""
    with _lock:
        mine = [v for v in _violations if all_tests or v.test == test]
        _violations[:] = [v for v in _violations if v not in mine]
    return mine


def describe(violations: list[Violation]) -> str:
    seen: dict[tuple[str, str], str] = {}
    for v in violations:
        seen.setdefault((v.host, v.call), v.thread)
    return "; ".join(f"{host} ({call}, thread {thread})" for (host, call), thread in seen.items())
