"""Is the beside server's port free on the host? The kernel's TCP tables read in one bounded command
(`port_check`) and judged for the address the server binds (`port_verdict`): a listener on any
address the bind would cover, or a connection holding the port as its local one, takes it."""

from __future__ import annotations

import re

from console.domain.analysis import host_replies
from console.domain.swap import actions as act
from console.host.parsers import ParseError
from console.host.parsers.proc_net import HOLDING, LISTEN, conflicts, parse_sockets

clean = host_replies.clean_reply


def port_check(port: int) -> str:
    """Every TCP listener on the host, on every address, as the kernel lists them (/proc/net/tcp and
    tcp6: a listener on 127.0.0.2 or [::1] only is seen too, which a connect to 127.0.0.1 missed:
    issue 34, item 10), bounded by `timeout -k` like every remote command; `port` is judged by
    port_verdict."""
    # Only the header and the rows naming the port (a busy host lists thousands of connections).
    return act.bounded(["grep", "-h", "-i", "-e", "local_address", "-e", f":{int(port):04X} ", "--",
                        "/proc/net/tcp", "/proc/net/tcp6"], 8) + '; echo "listeners_exit=$?"'


def port_verdict(port: int, text: str, bind: str = "127.0.0.1") -> str | None:
    """None when nothing listens where a server binding `bind`:`port` would (a wildcard on either
    side takes every address) and no connection holds it there as its local port; else why the beside
    server cannot have it (one line)."""

    if re.search(r"listeners_exit=(124|137)\b", text):
        return f"port {port} could not be checked on the host (the check timed out)"
    try:
        sockets = parse_sockets(text)
    except ParseError:
        return f"port {port} could not be checked on the host (no listener table in the answer)"

    def where(state: frozenset[str]) -> str:
        taken = sorted({s.address for s in sockets if s.state in state and conflicts(s, bind, port)})
        return ", ".join(f"[{a}]:{port}" if ":" in a else f"{a}:{port}" for a in taken[:4])

    if listening := where(frozenset({LISTEN})):
        return (f"port {port} is taken on the host (something listens on {listening}; "
                f"the server binds {clean(bind, 80)})")
    if held := where(HOLDING):  # a connection's local port: the server's bind fails all the same
        return (f"port {port} is taken on the host (a connection holds {held} as its local port, so the "
                f"server's bind would fail; the server binds {clean(bind, 80)})")
    return None


__all__ = ["port_check", "port_verdict"]
