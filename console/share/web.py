"""The browser side of pairing: textual-serve, with every tab an `attach` client of this core.

textual-serve starts one process per browser tab; here that process is `gpuconsole attach` to
the core's Unix socket, so each tab is one more client of the one core (one SSH connection, one
set of pollers), not one more console. The page and its websocket need the serve's token (in the
URL, compared in constant time); without it: 403, logged, nothing of the app sent.
"""

from __future__ import annotations

import hmac
import logging
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import aiohttp_jinja2
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server

log = logging.getLogger("gpuconsole.share")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")


def attach_command(socket_path: Path, name: str) -> str:
    """The command a tab runs: this Python, this package, the core's socket (an absolute path,
    never read as an option), the tab's name (checked and quoted)."""
    if not _NAME.match(name):
        name = "web"
    return " ".join(shlex.quote(part) for part in (
        sys.executable, "-m", "console", "attach", f"unix:{socket_path.resolve()}", "--name", name))


class WebShare(Server):
    def __init__(self, socket_path: Path, host: str, port: int, token: str) -> None:
        super().__init__(attach_command(socket_path, "web"), host=host, port=port, title="gpuconsole")
        self.socket_path = socket_path
        self.token = token
        self.refused = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """The page's address with the token: printed once by `serve`."""
        return f"{self.public_url}/?token={self.token}"

    def _allowed(self, request: web.Request, given: str) -> bool:
        if hmac.compare_digest(given.encode(), self.token.encode()):
            return True
        self.refused += 1
        log.warning("refused web client %s: wrong or missing token", request.remote)
        return False

    async def _make_app(self) -> web.Application:
        app = web.Application()
        aiohttp_jinja2.setup(app, loader=__import__("jinja2").FileSystemLoader(self.templates_path))
        app.add_routes([
            web.get("/", self.handle_index, name="index"),
            web.get("/ws/{token}/{name}", self.handle_websocket, name="websocket"),
            web.static("/static", self.statics_path, show_index=False, name="static"),
        ])
        return app

    async def handle_index(self, request: web.Request) -> web.StreamResponse:  # type: ignore[override]
        if not self._allowed(request, request.query.get("token", "")):
            raise web.HTTPForbidden(text="gpuconsole: wrong or missing token\n")
        name = request.query.get("name", "web")
        name = name if _NAME.match(name) else "web"
        router = request.app.router
        ws_path = router["websocket"].url_for(token=self.token, name=name)
        context = {
            "font_size": 16,
            "app_websocket_url": "ws:" + f"{self.public_url}{ws_path}".split(":", 1)[1],
            "config": {"static": {"url": f"{self.public_url}{router['static'].url_for(filename='/')}".rstrip("/")
                                  + "/"}},
            "application": {"name": "gpuconsole"},
        }
        return aiohttp_jinja2.render_template("app_index.html", request, context)

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        if not self._allowed(request, request.match_info.get("token", "")):
            raise web.HTTPForbidden(text="gpuconsole: wrong or missing token\n")
        command = attach_command(self.socket_path, request.match_info.get("name", "web"))
        websocket = web.WebSocketResponse(heartbeat=15)
        width = _int(request.query.get("width"), 80)
        height = _int(request.query.get("height"), 24)
        service: AppService | None = None
        try:
            await websocket.prepare(request)
            service = AppService(command, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                                 close=websocket.close, download_manager=self.download_manager, debug=False)
            await service.start(width, height)
            await self._process_messages(websocket, service)
        except Exception as exc:  # noqa: BLE001 - one tab failing is logged; the core goes on
            log.warning("web tab ended: %s", exc)
        finally:
            if service is not None:
                await service.stop()
        return websocket

    async def start(self) -> WebShare:
        self._runner = web.AppRunner(await self._make_app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def _int(value: Any, default: int) -> int:
    try:
        return max(10, min(1000, int(value)))
    except (TypeError, ValueError):
        return default
