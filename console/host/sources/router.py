"""The router source (issue 24's beside path, issue 33's "one writer of the swap's facts"): what the
router in front of SGLang says on the host, in one round-trip over the one SSH connection — its
worker list (`curl -s ROUTER/list_workers`) and the tail of its log (the profile's `router_log`: its
add/remove-worker lines, at the router's own time). The swap's observer works the router's moves
out from these (console/core/derive/swap_observer.py), for the console's own swap, a console that
ended mid-swap and a host-side operator's alike.

Polled only when the profile names a router (`router_url`); every command is bounded by `timeout`
on the host, every value quoted."""

from __future__ import annotations

import secrets
import shlex

from console.host.parsers import split_sections
from console.host.parsers.router import RouterReading, parse_router_log, parse_worker_list
from console.host.sources.base import PolledSource
from console.host.transport.base import Transport
from console.host.transport.bounded import bounded
from console.sanitize import clean_line

LOG_TAIL_BYTES = 4 << 20  # the router log's recent part searched for moves (a seek, then one grep)
MOVE_LINES = "(Added|Removed) worker"
MAX_MOVES = 200
POLL_TIMEOUT_S = 20.0


def router_script(url: str, log: str | None, marker: str) -> str:
    parts = [f"echo {marker}workers",
             bounded(["curl", "-s", "--max-time", "5", "--", url.rstrip("/") + "/list_workers"], 8) + " 2>/dev/null",
             "echo"]
    if log:
        # Only its add/remove lines, from the file's recent part: a busy router logs every request,
        # and a move must not scroll out of what is read within seconds.
        q = shlex.quote(log)
        parts += [f"echo {marker}log",
                  f"if [ -r {q} ]; then {bounded(['tail', '-c', str(LOG_TAIL_BYTES), '--', log], 10)} 2>/dev/null"
                  f" | grep -a -E -e {shlex.quote(MOVE_LINES)} | tail -n {MAX_MOVES}; echo {marker}rc; echo 0;"
                  f" else echo {marker}rc; echo 1; fi"]
    return "; ".join(parts) + "; true"


class RouterWatcher:
    """`url`: the profile's router_url; `log`: the file on the host the router writes its log to."""

    def __init__(self, transport: Transport, url: str, log: str | None = None) -> None:
        self.transport = transport
        self.url = url
        self.log = log

    async def poll(self) -> RouterReading:
        marker = f"@@r{secrets.token_hex(8)}"  # host text (the log) cannot fake a section
        result = await self.transport.run(router_script(self.url, self.log, marker), timeout=POLL_TIMEOUT_S)
        s = split_sections(result.text, marker)
        workers = parse_worker_list(s.get("workers", "").strip())
        if self.log is None:
            return RouterReading(self.url, workers)
        if s.get("rc", "").strip() != "0":
            return RouterReading(self.url, workers, (), self.log,
                                 clean_line(f"{self.log}: cannot be read (not there, or no permission)"))
        return RouterReading(self.url, workers, parse_router_log(s.get("log", "")), self.log)


def router_source(watcher: RouterWatcher, interval_s: float = 5.0) -> PolledSource[RouterReading]:
    return PolledSource("router", watcher.poll, interval_s, max_backoff_s=60.0)


__all__ = ["RouterWatcher", "router_script", "router_source"]
