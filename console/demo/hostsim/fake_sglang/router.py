"""A simulated SGLang router (sgl-router / SGLang Model Gateway) with its worker API: stdlib only.

    python -m console.demo.hostsim.fake_sglang.router --port P --worker-urls http://127.0.0.1:A ...

The worker API is the router's documented one (sgl-router README, see tests/data/PROVENANCE.md):
    POST /add_worker?url=U      waits for U's /health, then "Successfully added worker: U"
    POST /remove_worker?url=U   "Successfully removed worker: U" (in-flight requests finish)
    GET  /list_workers          {"urls": [...]}
Every other request is proxied to a worker, round robin, streaming the answer as it comes.
GPUSIM_ROUTER_REFUSE=1 (or the file $GPUSIM_ROOT/.sim/router-refuse) plays a router that
refuses new workers.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from console.demo.hostsim.fake_sglang.httpd import SimHttpd


class Router:
    def __init__(self, urls: list[str], startup_timeout_s: float) -> None:
        self.urls = list(urls)
        self.lock = threading.Lock()
        self.rr = itertools.count()
        self.startup_timeout_s = startup_timeout_s

    def log(self, msg: str) -> None:
        sys.stdout.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} INFO sgl_model_gateway: {msg}\n")
        sys.stdout.flush()

    def refusing(self) -> bool:
        root = os.environ.get("GPUSIM_ROOT")
        return os.environ.get("GPUSIM_ROUTER_REFUSE") == "1" or bool(root and (Path(root) / ".sim" /
                                                                                  "router-refuse").exists())

    def healthy(self, url: str) -> bool:
        u = urllib.parse.urlsplit(url)
        try:
            c = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port or 80, timeout=3)
            c.request("GET", "/health")
            ok = c.getresponse().status == 200
            c.close()
            return ok
        except OSError:
            return False

    def add(self, url: str) -> tuple[int, str]:
        if not url.startswith("http://"):
            return 400, f"Invalid worker URL: {url}"
        if self.refusing():
            return 400, f"Failed to add worker: {url}: the router refused it (simulated)"
        deadline = time.time() + self.startup_timeout_s
        while not self.healthy(url):
            if time.time() > deadline:
                return 400, f"Failed to add worker: {url}: health check did not pass within " \
                            f"{self.startup_timeout_s:.0f}s"
            time.sleep(0.2)
        with self.lock:
            if url not in self.urls:
                self.urls.append(url)
        self.log(f"Added worker {url}")
        return 200, f"Successfully added worker: {url}"

    def remove(self, url: str) -> tuple[int, str]:
        with self.lock:
            if url not in self.urls:
                return 400, f"Worker {url} not found"
            self.urls.remove(url)
        self.log(f"Removed worker {url}")
        return 200, f"Successfully removed worker: {url}"

    def pick(self) -> str | None:
        with self.lock:
            if not self.urls:
                return None
            return self.urls[next(self.rr) % len(self.urls)]


def handler_for(router: Router) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *args: object) -> None:
            router.log(f'{self.client_address[0]} "{self.requestline}" {args[1] if len(args) > 1 else ""}')

        def text(self, code: int, body: str, ctype: str = "text/plain") -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            path = self.path.split("?")[0]
            if path == "/health":
                return self.text(200, "OK")
            if path == "/list_workers":
                with router.lock:
                    return self.text(200, json.dumps({"urls": list(router.urls)}), "application/json")
            return self.proxy(b"")

        def do_POST(self) -> None:  # noqa: N802
            split = urllib.parse.urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if split.path in ("/add_worker", "/remove_worker"):
                url = (urllib.parse.parse_qs(split.query).get("url") or [""])[0]
                code, msg = router.add(url) if split.path == "/add_worker" else router.remove(url)
                return self.text(code, msg)
            return self.proxy(body)

        def proxy(self, body: bytes) -> None:
            target = router.pick()
            if target is None:
                return self.text(503, "No available workers")
            u = urllib.parse.urlsplit(target)
            try:
                c = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port or 80, timeout=600)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                headers["Content-Length"] = str(len(body))
                c.request(self.command, self.path, body=body, headers=headers)
                r = c.getresponse()
            except OSError as exc:
                return self.text(502, f"worker {target}: {exc}")
            self.send_response(r.status)
            self.send_header("Content-Type", r.getheader("Content-Type") or "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                while True:
                    piece = r.read1(65536) if hasattr(r, "read1") else r.read(65536)
                    if not piece:
                        break
                    self.wfile.write(f"{len(piece):X}\r\n".encode() + piece + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                c.close()

    return Handler


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="sglang_router.launch_router")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30080)
    p.add_argument("--worker-urls", nargs="*", default=[])
    p.add_argument("--worker-startup-timeout-secs", type=float, default=30.0)
    args = p.parse_args(argv)
    router = Router(args.worker_urls, args.worker_startup_timeout_secs)

    httpd = SimHttpd(("127.0.0.1", args.port), handler_for(router))  # loopback only, whatever --host says
    router.log(f"Starting router on 127.0.0.1:{args.port} | workers: {args.worker_urls}")
    httpd.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
