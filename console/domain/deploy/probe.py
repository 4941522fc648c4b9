"""One bounded command per node: what the deployment needs to know that no host source reads.

    clock      `date '+%Y-%m-%d %H:%M:%S.%N %z'`: the node's wall clock and zone, against the
               console's own clock at the moment of the call (the middle of the round trip)
    version    the SGLang the node's server interpreter has (`importlib.metadata.version("sglang")`,
               what `pip show sglang` prints)
    resolves   what --dist-init-addr's host resolves to *on that node* (`getaddrinfo`, as torch's
               rendezvous resolves it), whether that address is one of the node's own (a bind
               test), and a TCP connect to HOST:PORT from the node (timeout bounded): `open`,
               `refused` (the host answered, nothing listens yet: normal before the start), or an
               error (timeout, no route: the nodes cannot meet)

The probe runs on the host through the transport, whose `run` wraps it in the host's
`timeout -k` (console/host/transport/shell.py): a hung resolver or connect is killed on the host.
Every value reaching the shell is quoted; the Python program takes them as argv, never as code.
"""

from __future__ import annotations

import calendar
import shlex
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

PROBE_PY = r"""
import socket, sys
host, port, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
server = sys.argv[4] if len(sys.argv) > 4 else ""
if server:
    import urllib.request
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/health" % int(server), timeout=limit) as r:
            print("health", r.status)
    except Exception as exc:
        print("health", getattr(exc, "code", None) or "none")
try:
    import importlib.metadata as md
    print("version", md.version("sglang"))
except Exception as exc:
    print("version-error", type(exc).__name__)
if host:
    try:
        addr = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except Exception as exc:
        print("resolve-error", str(exc)[:200])
    else:
        print("resolves", addr)
        try:
            s = socket.socket(); s.bind((addr, 0)); s.close(); print("local yes")
        except OSError:
            print("local no")
        try:
            socket.create_connection((addr, int(port)), timeout=limit).close()
            print("tcp open")
        except ConnectionRefusedError:
            print("tcp refused")
        except Exception as exc:
            print("tcp-error", (type(exc).__name__ + ": " + str(exc))[:200])
"""


@dataclass(frozen=True, slots=True)
class NodeProbe:
    """What one node said, at the console's `at_s`. None: not known (the line did not come)."""

    at_s: float
    clock_skew_s: float | None = None  # node clock minus console clock, zone taken out
    utc_offset_s: int | None = None  # the node's zone (`date +%z`)
    sglang_version: str | None = None
    version_error: str | None = None
    resolves_to: str | None = None  # --dist-init-addr's host as this node resolves it
    resolve_error: str | None = None
    address_is_local: bool | None = None  # that address is one of this node's own
    tcp: str | None = None  # "open", "refused" or "error: …"
    health: int | None = None  # the node's server port's /health status on the node's loopback (None: no answer)
    error: str | None = None  # the probe itself failed (unreachable, timed out)


def split_addr(addr: str | None) -> tuple[str, int] | None:
    """HOST:PORT (the form --dist-init-addr takes) or None when it is not one."""
    host, _, port = (addr or "").rpartition(":")
    host = host.strip("[]")
    if not host or host.startswith("-") or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host, int(port)


def probe_script(python: str, dist_addr: str | None, connect_timeout_s: float = 3.0,
                 server_port: int | None = None) -> str:
    """The shell script of one probe (quoted: nothing in it is read as an option or as code)."""
    host, port = split_addr(dist_addr) or ("", 0)
    server = str(int(server_port)) if server_port else ""
    return (f"date '+clock %Y-%m-%d %H:%M:%S.%N %z'; "
            f"{shlex.quote(python)} -c {shlex.quote(PROBE_PY)} {shlex.quote(host)} {port} "
            f"{connect_timeout_s:g} {shlex.quote(server)} 2>&1")


def _naive_epoch(stamp: str) -> float | None:
    for fmt in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S"):
        try:
            dt = datetime.strptime(stamp[:26], fmt)
        except ValueError:
            continue
        return calendar.timegm(dt.timetuple()) + dt.microsecond / 1e6
    return None


def _zone(text: str) -> int | None:
    if len(text) != 5 or text[0] not in "+-" or not text[1:].isdigit():
        return None
    sign = -1 if text[0] == "-" else 1
    return sign * (int(text[1:3]) * 3600 + int(text[3:5]) * 60)


def parse_probe(text: str, console_mid_s: float) -> NodeProbe:
    """The probe's output, with the console's clock at the middle of the round trip."""
    found: dict[str, Any] = {}
    for raw in text.splitlines():
        key, _, value = raw.strip().partition(" ")
        value = value.strip()
        if key == "clock":
            stamp, _, zone = value.rpartition(" ")
            naive, tz = _naive_epoch(stamp), _zone(zone)
            if naive is not None and tz is not None:
                found["utc_offset_s"] = tz
                found["clock_skew_s"] = round(naive - tz - console_mid_s, 3)
        elif key == "version" and value:
            found["sglang_version"] = value[:40]
        elif key == "version-error":
            found["version_error"] = value[:80] or "unknown"
        elif key == "resolves":
            found["resolves_to"] = value[:80]
        elif key == "resolve-error":
            found["resolve_error"] = value[:200]
        elif key == "local":
            found["address_is_local"] = value == "yes"
        elif key == "tcp":
            found["tcp"] = value[:20]
        elif key == "health":
            found["health"] = int(value) if value.isdigit() else None
        elif key == "tcp-error":
            found["tcp"] = f"error: {value[:200]}"
    return NodeProbe(at_s=console_mid_s, **found)


async def probe_node(transport: Any, python: str, dist_addr: str | None, *, timeout_s: float = 10.0,
                     clock: Any = time.time, server_port: int | None = None) -> NodeProbe:
    """Run the probe on one node; never raises (an unreachable node is a probe with its error)."""
    t0 = clock()
    try:
        result = await transport.run(probe_script(python, dist_addr, server_port=server_port), timeout=timeout_s)
    except Exception as exc:  # the transport's own errors: connect, auth, host key, timeout
        return NodeProbe(at_s=clock(), error=f"{type(exc).__name__}: {exc}"[:300])
    t1 = clock()
    out = getattr(result, "stdout", b"")
    text = out.decode("utf-8", "replace") if isinstance(out, bytes) else str(out)
    return parse_probe(text, (t0 + t1) / 2)
