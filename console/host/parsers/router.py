"""The router in front of SGLang (sgl-router / SGLang Model Gateway, issue 24's beside path) as the
host keeps it: its own worker list (`curl ROUTER/list_workers`: {"urls": [...]}) and its log's
add/remove-worker lines ("2026-12-03T21:04:20 INFO sgl_model_gateway: Added worker http://…",
"… Removed worker http://…"), as frozen data. Pure: text in, data out; bad lines are skipped
(one odd line must not hide the others), a worker list that is not one is None (unknown).

The line shapes are the simulated router's (console/demo/hostsim/fake_sglang/router.py), which the
real-daemon beside tests run; a stamp with a space instead of the "T", a fraction of a second, and
a colon after "worker" are read too. A stamp is the router's local time (as the server's own)."""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass

from console.sanitize import clean_line

MAX_URL_CHARS = 300
_MOVE = re.compile(r"^(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d(?:\.\d{1,9})?)(?:Z|[+-]\d\d:?\d\d)?\s.*?"
                   r"\b(Added|Removed) worker:? (https?://[^\s\"']+)")


@dataclass(frozen=True, slots=True)
class RouterMove:
    """One line of the router's log: a worker added or removed, at the router's own time."""

    at_s: float  # the line's stamp (the router's clock, whole seconds in the simulated router)
    verb: str  # "added" or "removed"
    url: str  # the worker's URL as the router wrote it (cleaned)


@dataclass(frozen=True, slots=True)
class RouterReading:
    """What the host says of the router, read by console/host/sources/router.py."""

    url: str  # the router (the profile's router_url)
    # `curl -s ROUTER/list_workers`: the workers the router sends traffic to now; None: unknown
    # (no answer, or not a worker list)
    workers: tuple[str, ...] | None = None
    # The router's log's add/remove-worker lines (the tail of the profile's router_log), oldest
    # first; empty when no log is named or it has none
    moves: tuple[RouterMove, ...] = ()
    log: str | None = None  # the record read: a file, journal:UNIT or docker:NAME (None: not named in the profile)
    log_error: str | None = None  # why the log could not be read, in one line


def _stamp(day: str, clock: str) -> float | None:
    whole, _, frac = clock.partition(".")
    try:
        at = dt.datetime.fromisoformat(f"{day} {whole}").timestamp()
    except ValueError:
        return None
    return at + (int(frac.ljust(9, "0")) / 1e9 if frac else 0.0)


def parse_router_log(text: str) -> tuple[RouterMove, ...]:
    """The add/remove-worker lines of the router's log, in its order."""
    out = []
    for line in text.splitlines():
        m = _MOVE.match(line.strip())
        if m is None:
            continue
        at = _stamp(m.group(1), m.group(2))
        url = clean_line(m.group(4)).rstrip(".,;")[:MAX_URL_CHARS]
        if at is not None and url:
            out.append(RouterMove(at, m.group(3).lower(), url))
    return tuple(out)


def parse_worker_list(text: str) -> tuple[str, ...] | None:
    """`GET /list_workers` ({"urls": [...]}); None when the answer is not such a list."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    urls = data.get("urls") if isinstance(data, dict) else None
    if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
        return None
    return tuple(clean_line(u)[:MAX_URL_CHARS] for u in urls)


def url_port(url: str) -> int | None:
    """The port of a worker's URL ("http://127.0.0.1:30001" → 30001); None when it names none."""
    m = re.match(r"^https?://[^/:\s]+:(\d{1,5})(?:/|$)", url)
    return int(m.group(1)) if m else None


__all__ = ["RouterMove", "RouterReading", "parse_router_log", "parse_worker_list", "url_port"]
