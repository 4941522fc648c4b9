"""The router's own view of its workers (issue 37), read on the router's host during a swap.

SGLang's router (the Model Gateway, `python -m sglang_router.launch_router --pd-disaggregation …`)
answers `GET /workers` with every worker it routes to and its own health verdict:

    {"workers": [{"url": "http://10.0.0.1:30000", "worker_type": "prefill", "is_healthy": true, …},
                 {"url": "http://10.0.0.2:30000", "worker_type": "decode", "is_healthy": false, …}],
     "total": 2, "stats": {"prefill_count": 1, "decode_count": 1, "regular_count": 0}}

(docs.sglang.io advanced_features/sgl_model_gateway, "Worker Management APIs"). A router without
that endpoint is read by its `/health` alone (200, or 503 and why). The request runs on the router's
host, to its own loopback port, bounded there (the transport's `timeout -k`): the console needs no
route to it. Nothing here writes a fact: the swap's timeline records what the router said, when.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

ROUTER_PY = r"""
import sys, urllib.request, urllib.error
port, limit = int(sys.argv[1]), float(sys.argv[2])
def get(path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=limit) as r:
            return r.status, r.read(1 << 20).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(2000).decode("utf-8", "replace")
    except Exception as exc:
        return None, type(exc).__name__ + ": " + str(exc)[:200]
status, body = get("/workers")
if status == 200:
    print("workers " + " ".join(body.split()))
else:
    status, body = get("/health")
    print("health %s %s" % (status, " ".join(body.split())[:300]))
"""


@dataclass(frozen=True, slots=True)
class RouterWorker:
    url: str
    worker_type: str  # "prefill", "decode" or "regular", as the router says
    healthy: bool | None  # the router's is_healthy (None: it did not say)


@dataclass(frozen=True, slots=True)
class RouterView:
    workers: tuple[RouterWorker, ...] | None  # None: no /workers (read by /health alone)
    health: int | None = None  # /health's status when /workers is not there
    detail: str = ""  # /health's body, or why the router could not be asked
    error: str | None = None  # the request itself failed (no router answering, the host unreachable)

    def describe(self) -> str:
        """One line: "prefill http://…:30000 healthy · decode http://…:30001 UNHEALTHY"."""
        if self.error:
            return f"not answering: {self.error}"
        if self.workers is None:
            return f"/health {self.health if self.health is not None else 'no answer'}" + \
                (f": {self.detail}" if self.detail else "") + " (no /workers on this router)"
        if not self.workers:
            return "no workers"
        return " · ".join(f"{w.worker_type} {w.url} " + ("healthy" if w.healthy else "UNHEALTHY" if w.healthy is False
                                                        else "health not said") for w in self.workers)


def router_script(python: str, port: int, timeout_s: float = 6.0) -> str:
    return f"{shlex.quote(python)} -c {shlex.quote(ROUTER_PY)} {int(port)} {timeout_s:g} 2>&1"


def parse_router(text: str) -> RouterView:
    line = next((raw for raw in text.splitlines() if raw.startswith(("workers ", "health "))), None)
    if line is None:
        return RouterView(None, error=(text.strip().splitlines() or ["no answer"])[-1][:200])
    if line.startswith("health "):
        _, status, *rest = line.split(" ", 2) + [""]
        return RouterView(None, int(status) if status.isdigit() else None, (rest[0] if rest else "")[:200],
                          None if status.isdigit() else (rest[0] if rest else "no answer")[:200])
    try:
        data: Any = json.loads(line[len("workers "):])
    except ValueError:
        return RouterView(None, error="/workers did not answer JSON")
    rows = data.get("workers") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        return RouterView(None, error="/workers did not list workers")
    workers = tuple(RouterWorker(str(r.get("url", "?"))[:200], str(r.get("worker_type", "?"))[:20],
                                 r.get("is_healthy") if isinstance(r.get("is_healthy"), bool) else None)
                    for r in rows if isinstance(r, dict))
    return RouterView(workers)


async def read_router(transport: Any, port: int, *, python: str = "python3", timeout_s: float = 12.0) -> RouterView:
    """Ask the router on its own host; never raises (a failure is a view with its error)."""
    if transport is None:
        return RouterView(None, error="the router's host is not connected")
    try:
        result = await transport.run(router_script(python, port), timeout=timeout_s)
    except Exception as exc:  # the transport's errors: connect, timeout
        return RouterView(None, error=f"{type(exc).__name__}: {exc}"[:200])
    out = result.stdout
    return parse_router(out.decode("utf-8", "replace") if isinstance(out, bytes) else str(out))
