"""The browser side of pairing: textual-serve, with every tab an `attach` client of this core.

textual-serve starts one process per browser tab; here that process is `gpuconsole attach` to
the core's Unix socket, so each tab is one more client of the one core (one SSH connection, one
set of pollers), not one more console. The page and its websocket need the serve's token or a
person's own (`serve --invite NAME`), compared in constant time; without it: 403, logged, nothing
of the app sent. The first URL carries a one-use ticket, not the token: on first load it becomes a
session cookie (HttpOnly, SameSite=Strict) and the browser is sent on to the address without it, so
it stays out of the address bar, history and the page; nothing logs it (issue 21, item 16), and the
same URL is refused after (issue 34, item 12). A tab is who its ticket was issued to, never the
`?name=` it carries (issue 34, item 3): the serve's own is the person who runs serve; a person's
tab attaches as that person (their token goes to the tab's attach in a 0600 file, never on a
command line). A tab joins as an observer: the first tab no longer became the driver (issue 35,
item 4).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import re
import secrets
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp_jinja2
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server

from console.share.server import _user_name

log = logging.getLogger("gpuconsole.share")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")


COOKIE = "gpuconsole_token"
MAX_TABS = 16  # each tab is a process: 40 tabs were 92 processes and 1.5 GB (issue 21, item 11)


def attach_command(socket_path: Path, name: str, token_file: Path | None = None) -> str:
    """The command a tab runs: this Python, this package, the core's socket (an absolute path,
    never read as an option), the tab's name (checked and quoted), a person's token file; as an
    observer (it asks to drive when its person means to)."""
    if not _NAME.match(name):
        name = "web"
    extra = ("--token-file", str(token_file)) if token_file is not None else ()
    return " ".join(shlex.quote(part) for part in (
        sys.executable, "-m", "console", "attach", f"unix:{socket_path.resolve()}", "--name", name, "--observe",
        *extra))


def deployment_attach_command(deployment: str, name: str, token_file: Path | None = None) -> str:
    """The command a tab of a served deployment runs: `attach --deployment=NAME` (every node's Unix
    socket, named by the manifest in this user's runtime dir; the name joined to its option so it is
    never read as one), the tab's person (checked and quoted), a person's token file."""
    if not _NAME.match(name):
        name = "web"
    extra = ("--token-file", str(token_file)) if token_file is not None else ()
    return " ".join(shlex.quote(part) for part in (
        sys.executable, "-m", "console", "attach", f"--deployment={deployment}", "--name", name, *extra))


class WebShare(Server):
    """`tab_command(person, token_file)`: what a tab runs when it is not `attach` to `socket_path`
    (a served deployment's tab: deployment_attach_command)."""

    def __init__(self, socket_path: Path | None, host: str, port: int, token: str, *,
                 people: dict[str, str] | None = None, token_files: dict[str, Path] | None = None,
                 max_tabs: int = MAX_TABS, owner: str | None = None,
                 tab_command: Callable[[str, Path | None], str] | None = None) -> None:
        if tab_command is None:
            if socket_path is None:
                raise ValueError("a tab attaches to a core's socket or runs its tab_command")
            tab_command = lambda name, token_file: attach_command(socket_path, name, token_file)  # noqa: E731
        self.tab_command = tab_command
        super().__init__(tab_command("web", None), host=host, port=port, title="gpuconsole")

        self.socket_path = socket_path
        self.token = token
        self.owner = owner or _user_name()  # who runs serve: the name of a tab of the serve's own
        if not _NAME.match(self.owner):
            self.owner = "owner"
        self.people = people if people is not None else {}  # a person's token -> their name
        self._tickets: dict[str, str] = {}  # one-use ticket -> '' (the serve's person) or an invited name
        self._sessions: dict[str, str] = {}  # a browser's session cookie -> the same
        self.token_files = token_files or {}  # name -> the 0600 file holding their token
        self.max_tabs = max_tabs
        self.tabs = 0
        self.refused = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """A first address for the person who runs serve (a fresh one-use ticket each time)."""
        return self.url_for("")

    def url_for(self, person: str) -> str:
        """A first address for one person ('' the serve's own, else an invited name): a one-use
        ticket that becomes a session cookie on first load."""
        ticket = secrets.token_urlsafe(24)
        self._tickets[ticket] = person
        return f"{self.public_url}/?token={ticket}"

    def url_with(self, token: str) -> str:
        """A first address for whoever holds `token` (the serve's or a person's)."""
        person = "" if hmac.compare_digest(token.encode(), self.token.encode()) else self.people.get(token)
        if person is None:
            raise ValueError("not a token of this serve")
        return self.url_for(person)

    @staticmethod
    def _find(table: dict[str, str], given: str) -> str | None:
        found = None
        for key, person in table.items():  # constant time per comparison
            if hmac.compare_digest(given.encode(), key.encode()):
                found = person
        return found

    def _refuse(self, request: web.Request, why: str) -> web.HTTPForbidden:
        self.refused += 1
        log.warning("refused web client %s: %s", request.remote, why)
        return web.HTTPForbidden(text=f"gpuconsole: {why}\n")

    async def _make_app(self) -> web.Application:
        app = web.Application()
        aiohttp_jinja2.setup(app, loader=__import__("jinja2").FileSystemLoader(self.templates_path))
        app.add_routes([
            web.get("/", self.handle_index, name="index"),
            web.get("/ws/{name}", self.handle_websocket, name="websocket"),
            web.static("/static", self.statics_path, show_index=False, name="static"),
        ])
        return app

    async def handle_index(self, request: web.Request) -> web.StreamResponse:  # type: ignore[override]
        in_url = request.query.get("token", "")
        if in_url:  # a one-use ticket: into a session cookie, and on to the address without it
            person = self._find(self._tickets, in_url)
            if person is None:
                raise self._refuse(request, "this address was used already or is wrong: ask for a new one")
            del self._tickets[in_url]
            session = secrets.token_urlsafe(24)
            self._sessions[session] = person
            response = web.HTTPSeeOther("/")
            response.set_cookie(COOKIE, session, httponly=True, samesite="Strict", path="/")
            raise response
        if self._find(self._sessions, request.cookies.get(COOKIE, "")) is None:
            raise self._refuse(request, "wrong or missing token")
        router = request.app.router
        ws_path = router["websocket"].url_for(name="tab")
        context = {
            "font_size": 16,
            "app_websocket_url": "ws:" + f"{self.public_url}{ws_path}".split(":", 1)[1],
            "config": {"static": {"url": f"{self.public_url}{router['static'].url_for(filename='/')}".rstrip("/")
                                  + "/"}},
            "application": {"name": "gpuconsole"},
        }
        return aiohttp_jinja2.render_template("app_index.html", request, context)

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        person = self._find(self._sessions, request.cookies.get(COOKIE, ""))
        if person is None:
            raise self._refuse(request, "wrong or missing token")
        if self.tabs >= self.max_tabs:
            self.refused += 1
            log.warning("refused web client %s: %d tabs open (the cap)", request.remote, self.tabs)
            raise web.HTTPServiceUnavailable(text=f"gpuconsole: {self.tabs} tabs are open (at most {self.max_tabs})\n")
        # Who the tab is comes from its session, never from a name in the address.
        command = self.tab_command(person or self.owner, self.token_files.get(person) if person else None)
        websocket = web.WebSocketResponse(heartbeat=15)
        width = _int(request.query.get("width"), 80)
        height = _int(request.query.get("height"), 24)
        service: AppService | None = None
        self.tabs += 1
        try:
            await websocket.prepare(request)
            service = AppService(command, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                                 close=websocket.close, download_manager=self.download_manager, debug=False)
            await service.start(width, height)
            await self._process_messages(websocket, service)
        except Exception as exc:  # noqa: BLE001 - one tab failing is logged; the core goes on
            log.warning("web tab ended: %s", exc)
        finally:
            self.tabs -= 1
            if service is not None:
                await stop_tab(service)
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


async def serve_deployment(shared: Any, host: str, port: int, owner: str) -> tuple[WebShare, list[tuple[str, Path]]]:
    """A served deployment (console/share/deployment.py's DeploymentShare, started) to browsers: each
    tab's process is `attach --deployment` to the nodes' sockets as the person its one-use address
    was issued to (an invited person's tab with their token file). Returns the door and, for the
    serving person ('') and each invited one, the 0600 file holding their first address."""
    name = shared.watch.deployment.name
    web = await WebShare(None, host, port, secrets.token_urlsafe(24), people=dict(shared.tokens),
                         token_files=dict(shared.token_files), owner=owner,
                         tab_command=lambda person, token_file: deployment_attach_command(name, person, token_file)
                         ).start()
    files = [("", shared.url_file("", web.url))]
    files += [(person, shared.url_file(person, web.url_for(person))) for person in shared.token_files]
    return web, files


async def stop_tab(service: Any, grace_s: float = 5.0) -> None:
    """A tab's attach process ends when its websocket does: asked to quit, then killed after
    `grace_s` (textual-serve waits for it forever; a tab closed uncleanly left its attach running
    at 60-80 % of a core and its name in the roster; issue 21, item 11)."""
    try:
        await asyncio.wait_for(asyncio.shield(service.stop()), grace_s)
    except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - whatever went wrong, the process goes
        process = getattr(service, "_process", None)
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(process.wait(), grace_s)
        log.warning("web tab's attach did not quit in %.0f s: killed", grace_s)


def _int(value: Any, default: int) -> int:
    try:
        return max(10, min(1000, int(value)))
    except (TypeError, ValueError):
        return default
