"""The simulated host's Hugging Face Hub, on loopback: the `model_info` endpoint that
`HfApi.model_info(files_metadata=True)` asks, answering the file list (sizes, LFS sha256) of the
download the simulator plays.

A demo never asks huggingface.co: the real Hub knows nothing of the simulated files (its sizes
would contradict them), and a demo or a test must work offline. The demo's profile points the
console's Hub lookup here (`HostProfile.hub_endpoint`), so the download pane's "true total" comes
through the same code path as on a real host, and says it came from this simulated Hub.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any
from urllib.parse import unquote, urlsplit

MAX_REQUEST_BYTES = 16 << 10


class FakeHub:
    """`await hub.start()`; `hub.url` is the endpoint; `hub.repos[repo_id] = siblings`."""

    def __init__(self) -> None:
        self.repos: dict[str, list[dict[str, Any]]] = {}
        self.requests = 0
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=MAX_REQUEST_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    def answer(self, target: str) -> tuple[int, dict[str, Any], dict[str, str]]:
        """(status, JSON body, extra headers) for a request target, as the Hub answers it."""
        path = unquote(urlsplit(target).path)
        prefix = "/api/models/"
        if path.startswith(prefix):
            rest = path[len(prefix):]
            repo, _, revision = rest.partition("/revision/")
            siblings = self.repos.get(repo.rstrip("/"))
            if siblings is not None:
                return 200, {"id": repo, "sha": "simulated", "revision": revision or "main",
                             "siblings": siblings}, {}
        # huggingface_hub reads the error code from this header (RepositoryNotFoundError)
        return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            parts = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
            self.requests += 1
            if len(parts) != 3 or parts[0] not in ("GET", "HEAD"):
                status, body, extra = 405, {"error": "method not allowed"}, {}
            else:
                status, body, extra = self.answer(parts[1])
            data = json.dumps(body).encode()
            reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed"}[status]
            headers = {"Content-Type": "application/json", "Content-Length": str(len(data)),
                       "Connection": "close", **extra}
            writer.write((f"HTTP/1.1 {status} {reason}\r\n"
                          + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode("latin-1"))
            if parts[0] != "HEAD":
                writer.write(data)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError, ConnectionError):
            pass  # a client that went away, or sent too much: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
