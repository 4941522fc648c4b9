"""The host's TCP listeners as the kernel lists them: `/proc/net/tcp` and `/proc/net/tcp6`
(`cat /proc/net/tcp /proc/net/tcp6`; what `ss -tln` reads, without needing iproute2).

Each row: `sl local_address rem_address st …`, the local address in hex as the kernel stores it
(IPv4 one 32-bit word, IPv6 four, each in the host's byte order: little-endian on x86 and ARM), the
port in big-endian hex, state `0A` for LISTEN. Rows that do not have that shape are skipped, never
guessed at; a text with no table header at all is a ParseError (the check did not run).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from console.host.parsers import ParseError

LISTEN = "0A"
# Sockets that hold their local port against a new listener's bind, whatever SO_REUSEADDR says: a
# connection's ephemeral port (established, opening or closing; checked on Linux 6.x: bind() fails
# with "Address already in use"). TIME_WAIT (06) and CLOSE (07) are left out: whether a TIME_WAIT
# socket blocks depends on its owner's SO_REUSEADDR, which the table does not show (a server's own
# accepted connections leave TIME_WAITs that do not block its restart).
HOLDING = frozenset({"01", "02", "03", "04", "05", "08", "09", "0B"})


@dataclass(frozen=True, slots=True)
class Listener:
    address: str  # "127.0.0.2", "0.0.0.0", "::", "::ffff:127.0.0.1"
    port: int
    state: str = LISTEN  # the kernel's state, two hex digits ("0A" LISTEN, "01" ESTABLISHED, ...)


def _address(hex_addr: str) -> str | None:
    try:
        raw = bytes.fromhex(hex_addr)
    except ValueError:
        return None
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    if len(raw) == 16:
        words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
        return str(ipaddress.IPv6Address(words))
    return None


def parse_listeners(text: str) -> tuple[Listener, ...]:
    """Every TCP socket in LISTEN state in the tables (IPv4 and IPv6 together)."""
    return tuple(s for s in parse_sockets(text) if s.state == LISTEN)


def parse_sockets(text: str) -> tuple[Listener, ...]:
    """Every TCP socket in the tables with its local address, port and state (IPv4 and IPv6)."""
    if "local_address" not in text:
        raise ParseError("no /proc/net/tcp table in the answer")
    out: list[Listener] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4 or not fields[0].endswith(":") or len(fields[3]) != 2:
            continue
        addr, sep, port_hex = fields[1].partition(":")
        if not sep or len(port_hex) != 4:
            continue
        address = _address(addr)
        try:
            port = int(port_hex, 16)
        except ValueError:
            continue
        if address is not None:
            out.append(Listener(address, port, fields[3].upper()))
    return tuple(out)


def conflicts(listener: Listener, bind: str, port: int) -> bool:
    """Would a server binding `bind`:`port` fail (or share the port) because of this listener?
    A wildcard on either side (0.0.0.0, ::) takes every address; a name that is not an address
    (`localhost`, a hostname) may resolve to any of them: counted as taken whenever the port is."""
    if listener.port != port:
        return False
    try:
        want = ipaddress.ip_address(bind.strip("[]"))
        have = ipaddress.ip_address(listener.address)
    except ValueError:
        return True
    if want.is_unspecified or have.is_unspecified:
        return True
    mapped_have = have.ipv4_mapped if isinstance(have, ipaddress.IPv6Address) else None
    mapped_want = want.ipv4_mapped if isinstance(want, ipaddress.IPv6Address) else None
    return (mapped_want or want) == (mapped_have or have)


__all__ = ["HOLDING", "LISTEN", "Listener", "conflicts", "parse_listeners", "parse_sockets"]
