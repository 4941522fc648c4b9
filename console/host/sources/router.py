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

from console.config import router_log_place
from console.host.parsers import split_sections
from console.host.parsers.router import RouterReading, parse_router_log, parse_worker_list
from console.host.sources.base import PolledSource
from console.host.transport.base import Transport
from console.host.transport.bounded import bounded
from console.sanitize import clean_line

LOG_TAIL_BYTES = 4 << 20  # the router log's recent part searched for moves (a seek, then one grep)
MOVE_LINES = "(Added|Removed) worker"
MAX_MOVES = 200
RECORD_LINES = 100_000  # journald's or Docker's recent lines of the router searched for moves
POLL_TIMEOUT_S = 20.0


def router_script(url: str, log: str | None, marker: str) -> str:
    parts = [f"echo {marker}workers",
             bounded(["curl", "-s", "--max-time", "5", "--", url.rstrip("/") + "/list_workers"], 8) + " 2>/dev/null",
             "echo"]
    place = router_log_place(log) if log else None
    if place is not None and place[0] != "file":
        # journald's or Docker's record of the router's output, its lines as the router wrote them (`-o
        # cat`: the message alone); the reader's exit status follows its lines, through the same grep
        kind, name = place
        argv = (["journalctl", "--no-pager", "-o", "cat", "-n", str(RECORD_LINES), "-u", name] if kind == "journal"
                else ["docker", "logs", "--tail", str(RECORD_LINES), name])
        parts += [f"echo {marker}log",
                  f"{{ {bounded(argv, 10)} 2>&1; echo \"{marker}rc $?\"; }}"
                  f" | grep -a -E -e {shlex.quote(MOVE_LINES)} -e {shlex.quote('^' + marker + 'rc ')}"
                  f" | tail -n {MAX_MOVES + 1}"]
    elif log:
        # Only its add/remove lines, from the file's recent part: a busy router logs every request,
        # and a move must not scroll out of what is read within seconds.
        q = shlex.quote(log)
        parts += [f"echo {marker}log",
                  f"if [ -r {q} ]; then {bounded(['tail', '-c', str(LOG_TAIL_BYTES), '--', log], 10)} 2>/dev/null"
                  f" | grep -a -E -e {shlex.quote(MOVE_LINES)} | tail -n {MAX_MOVES}; echo {marker}rc; echo 0;"
                  f" else echo {marker}rc; echo 1; fi"]
    return "; ".join(parts) + "; true"


class RouterWatcher:
    """`url`: the profile's router_url; `log`: where the router keeps its log on the host (a file,
    journal:UNIT.service or docker:CONTAINER: console/config.py's router_log_place)."""

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
        text, rc = s.get("log", ""), s.get("rc", "").strip()
        if router_log_place(self.log)[0] != "file":
            lines = text.splitlines()
            ends = [line for line in lines if line.startswith(f"{marker}rc ")]
            rc = ends[-1].split(" ", 1)[1].strip() if ends else ""
            text = "\n".join(line for line in lines if not line.startswith(f"{marker}rc "))
        if rc != "0":
            return RouterReading(self.url, workers, (), self.log, clean_line(f"{self.log}: {self._unread(rc)}"))
        return RouterReading(self.url, workers, parse_router_log(text), self.log)

    def _unread(self, rc: str) -> str:
        kind, name = router_log_place(self.log or "")
        status = f"exit {rc}" if rc.isdigit() else "no exit status"
        if kind == "journal":
            return f"journalctl -u {name} failed ({status}: no journal access, or no such unit)"
        if kind == "docker":
            return f"docker logs {name} failed ({status}: no such container, or no access to Docker)"
        return "cannot be read (not there, or no permission)"


def router_source(watcher: RouterWatcher, interval_s: float = 5.0) -> PolledSource[RouterReading]:
    return PolledSource("router", watcher.poll, interval_s, max_backoff_s=60.0)


__all__ = ["RouterWatcher", "router_script", "router_source"]
