"""A simulated SGLang router in prefill/decode mode: stdlib only.

    python -m console.demo.hostsim.fake_sglang.pd_router --pd-disaggregation \
        --prefill http://127.0.0.1:30000 8998 --decode http://127.0.0.1:30001 --host 0.0.0.0 --port 8000

The command line is the real router's (`--prefill URL [BOOTSTRAP_PORT]`, repeatable; `--decode URL`;
docs/advanced_features/pd_disaggregation.md), and so are the first lines it logs (smg::server's,
tests/data/sglang_multinode_real.json). A request goes to a prefill and a decode worker together,
as the real router sends it; the decode worker's answer streams back. /health answers 200 when
every worker's /health does, else 503 naming the first that does not. `GET /workers` lists the
workers in the Model Gateway's shape (docs.sglang.io advanced_features/sgl_model_gateway, "Worker
Management APIs": `{"workers": [{"url", "worker_type", "is_healthy", …}], "total", "stats"}`), each
worker's health asked when the list is asked. It listens on 127.0.0.1 only, whatever --host says.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

from console.demo.hostsim.fake_sglang.httpd import SimHttpd
from console.demo.hostsim.fake_sglang.router import Router, handler_for


def log(msg: str) -> None:
    sys.stdout.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')}  INFO smg::server: src/server.rs: {msg}\n")
    sys.stdout.flush()


class PdRouter(Router):
    def __init__(self, prefill: list[tuple[str, int | None]], decode: list[str]) -> None:
        super().__init__(decode, 30.0)
        self.prefill = prefill
        self.prefill_rr = itertools.count()

    def log(self, msg: str) -> None:
        log(msg)

    def unhealthy(self) -> str | None:
        for url in [u for u, _ in self.prefill] + self.urls:
            if not self.healthy(url):
                return url
        return None

    def pick(self) -> str | None:
        """The decode worker for a request; its prefill partner is sent the same request alongside."""
        target = super().pick()
        if target is not None and self.prefill:
            url, _ = self.prefill[next(self.prefill_rr) % len(self.prefill)]
            threading.Thread(target=self._prefill, args=(url,), daemon=True).start()
        return target

    def workers(self) -> dict[str, object]:
        """`GET /workers` as the Model Gateway answers it."""
        rows: list[dict[str, object]] = []
        for kind, url, bootstrap in ([("prefill", u, b) for u, b in self.prefill]
                                     + [("decode", u, None) for u in self.urls]):
            row: dict[str, object] = {"id": url, "url": url, "model_id": "unknown", "priority": 50, "cost": 1.0,
                                      "worker_type": kind, "is_healthy": self.healthy(url), "load": 0,
                                      "connection_mode": "Http"}
            if kind == "prefill":
                row["bootstrap_port"] = bootstrap
            rows.append(row)
        return {"workers": rows, "total": len(rows),
                "stats": {"prefill_count": len(self.prefill), "decode_count": len(self.urls), "regular_count": 0}}

    def _prefill(self, url: str) -> None:
        u = urllib.parse.urlsplit(url)
        try:
            c = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port or 80, timeout=30)
            c.request("GET", "/health")
            c.getresponse().read()
            c.close()
        except OSError:
            pass


def pd_handler(router: PdRouter) -> type[BaseHTTPRequestHandler]:
    base = handler_for(router)

    class Handler(base):  # type: ignore[misc,valid-type]
        def do_GET(self) -> None:  # noqa: N802
            if self.path.split("?")[0] == "/health":
                bad = router.unhealthy()
                return self.text(200, "OK") if bad is None else self.text(503, f"worker {bad} is not healthy")
            if self.path.split("?")[0] == "/workers":
                return self.text(200, json.dumps(router.workers()), "application/json")
            return super().do_GET()

    return Handler


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="sglang_router.launch_router")
    p.add_argument("--pd-disaggregation", action="store_true")
    p.add_argument("--prefill", nargs="+", action="append", default=[])
    p.add_argument("--decode", nargs=1, action="append", default=[])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--policy", default="cache_aware")
    args = p.parse_args(argv)
    if not args.pd_disaggregation:
        p.error("this simulated router plays --pd-disaggregation only (console/demo/hostsim/fake_sglang/router.py "
                "plays the regular mode)")
    prefill: list[tuple[str, int | None]] = []
    for item in args.prefill:
        if len(item) > 2:
            p.error(f"--prefill takes URL [BOOTSTRAP_PORT], got {' '.join(item)}")
        port: int | None = None
        if len(item) == 2 and item[1].lower() != "none":
            if not item[1].isdigit():
                p.error(f"Invalid bootstrap port: {item[1]}. Must be a number or 'none'")
            port = int(item[1])
        prefill.append((item[0], port))
    args.prefill_urls = prefill
    args.decode_urls = [d[0] for d in args.decode]
    return args


def main(argv: list[str]) -> int:
    args = parse(argv)
    router = PdRouter(args.prefill_urls, args.decode_urls)
    pre = ", ".join(f'("{u}", {"Some(" + str(b) + ")" if b is not None else "None"})' for u, b in args.prefill_urls)
    dec = ", ".join(f'"{u}"' for u in args.decode_urls)
    mode = f"PrefillDecode {{ prefill_urls: [{pre}], decode_urls: [{dec}], prefill_policy: None, decode_policy: None }}"
    log(f"Starting router on {args.host}:{args.port} | mode: {mode} | policy: {args.policy} | max_payload: 512MB")

    httpd = SimHttpd(("127.0.0.1", args.port), pd_handler(router))
    log(f"Router ready | workers: {json.dumps([u for u, _ in args.prefill_urls] + args.decode_urls)}")
    log(f"Starting server on {args.host}:{args.port}")
    httpd.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
