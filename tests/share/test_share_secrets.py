"""Tokens and the audit log stay private (issue 21, item 16): audit.jsonl is 0600; the browser's
token moves from the URL to a cookie on first load and is never in the page; a tab cap (item 11)."""

from __future__ import annotations

import shutil
import socket
import stat
import tempfile
from pathlib import Path
from types import SimpleNamespace

import aiohttp
import pytest

from console.core.state import HostState


def test_the_audit_log_is_created_0600_and_a_wider_one_is_narrowed(tmp_path: Path) -> None:
    from console.domain.swap.controller import SwapController

    for existing in (None, 0o644):
        path = tmp_path / f"a{existing}" / "gpuconsole" / "audit.jsonl"
        if existing is not None:
            path.parent.mkdir(parents=True)
            path.write_text("")
            path.chmod(existing)
        controller = SwapController.__new__(SwapController)
        controller.state, controller.host, controller.audit_file = HostState("h"), "h", path
        controller.runner = SimpleNamespace(notice=lambda *a: pytest.fail(f"notice {a}"))
        controller._clock = lambda: 1.0
        controller._audit("ana", "stop_old", "systemctl stop -- a.service", 0, "ok")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert "systemctl stop" in path.read_text()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_browser_token_moves_to_a_cookie_and_is_never_in_the_page() -> None:
    from console.ui.web import COOKIE, WebShare

    short = Path(tempfile.mkdtemp(prefix="gc-"))
    web = await WebShare(short / "core.sock", "127.0.0.1", _free_port(), "T0KEN-of-the-serve",
                         people={"ben-own-token": "ben"}).start()
    try:
        base = web.url.split("/?")[0]
        # unsafe: aiohttp keeps no cookie of an IP address unless told (browsers do)
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
            async with session.get(base + "/") as r:
                assert r.status == 403
            async with session.get(web.url + "&name=cy", allow_redirects=False) as r:
                assert r.status == 303 and "token" not in r.headers["Location"]
                cookie = r.cookies[COOKIE]
                assert cookie.value and cookie.value != "T0KEN-of-the-serve" and cookie["httponly"]
            async with session.get(web.url + "&name=cy") as r:  # a fresh address, followed, with the cookie
                body = await r.text()
                assert r.status == 200 and "token" not in str(r.url)
                assert "T0KEN-of-the-serve" not in body and cookie.value not in body and "/ws/tab" in body
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as session, session.get(web.url_with("ben-own-token")) as r:
            assert r.status == 200
        assert web.refused == 1
    finally:
        await web.close()
        shutil.rmtree(short, ignore_errors=True)


async def test_a_tab_over_the_cap_is_refused_with_a_line() -> None:
    from console.ui.web import WebShare

    short = Path(tempfile.mkdtemp(prefix="gc-"))
    web = await WebShare(short / "core.sock", "127.0.0.1", _free_port(), "tok", max_tabs=0).start()
    try:
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as session:
            async with session.get(web.url) as r:  # the first address: its session cookie
                assert r.status == 200
            async with session.get(web.public_url + "/ws/x") as r:
                assert r.status == 503 and "tabs are open" in await r.text()
    finally:
        await web.close()
        shutil.rmtree(short, ignore_errors=True)


async def test_a_tabs_attach_that_ignores_quit_is_killed() -> None:
    """Item 11: a closed tab's attach process must end (textual-serve's stop waits forever)."""
    import asyncio

    from console.ui.web import stop_tab

    process = await asyncio.create_subprocess_exec("sleep", "600")

    class Stuck:
        _process = process

        async def stop(self) -> None:
            await asyncio.Event().wait()  # never answers the quit

    await stop_tab(Stuck(), grace_s=0.5)
    assert process.returncode is not None
