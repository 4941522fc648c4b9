"""A served deployment was Unix sockets only: nobody could watch it, or approve its swap, from a
browser, as they can a host's (`serve --web`). `--deployment NAME --share --web [HOST:]PORT` serves it
to browsers with the host's own door (console/ui/web.py): a one-use address per person in a 0600
file (its path shown, never the address), moved to a session cookie on first load and refused after;
each tab's process is `attach --deployment=NAME` to the nodes' sockets as the person the address was
issued to (an invited person's tab with their token file), never a name typed in the address."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import stat
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from console.cli.deploy import run_deploy_cli
from console.cli.main import build_parser
from console.cli.options import is_deployment
from console.domain.deploy.swap import DeploymentSwap
from console.share.deployment import DeploymentShare
from console.ui import web as webmod
from tests.kit.deploy import FakeWatch, deployment


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.timeout(60)
def test_each_persons_browser_address_works_once_and_its_tab_attaches_to_the_deployment_as_them(
        tmp_path: Path) -> None:
    async def run() -> None:
        share = await DeploymentShare(FakeWatch(deployment()), _Swap(), directory=tmp_path, invite=("ben",)).start()
        web, files = await webmod.serve_deployment(share, "127.0.0.1", _free_port(), owner="ana")
        try:
            assert [person for person, _ in files] == ["", "ben"]
            for person, path in files:
                assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.parent == tmp_path
                url = path.read_text().strip() + "&name=mallory"
                async with aiohttp.ClientSession() as browser:
                    first = await browser.get(url, allow_redirects=False)
                    assert first.status == 303 and first.headers["Location"] == "/", person
                    cookie = first.cookies[webmod.COOKIE].value
                    page = await browser.get(web.public_url + "/", allow_redirects=False,
                                             cookies={webmod.COOKIE: cookie})
                    assert page.status == 200
                async with aiohttp.ClientSession() as other:
                    assert (await other.get(url, allow_redirects=False)).status == 403  # used once
            # whose tab it is: the serving person by their name, an invited one by theirs and their token
            assert web.tab_command("ana", None).endswith(" attach --deployment=big --name ana")
            ben = web.tab_command("ben", share.token_files["ben"])
            assert ben.endswith(f" attach --deployment=big --name ben --token-file {share.token_files['ben']}")
            assert "mallory" not in ben and web.people == {t: "ben" for t in share.tokens}
        finally:
            await web.close()
            await share.close()
        assert not [p for _, p in files if p.exists()]  # the addresses go with the share

    asyncio.run(run())


def test_a_tabs_command_is_the_clis_own_attach_of_a_deployment() -> None:
    command = webmod.deployment_attach_command("-rf", "ben", Path("/t/ben.token"))
    args = build_parser().parse_args(command.split(" ")[3:])  # after `python -m console`
    assert (args.command, args.deployment, args.name, args.token_file) == ("attach", "-rf", "ben", "/t/ben.token")


def test_web_without_a_shared_deployment_is_refused_with_why(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--deployment", "big", "--web", "8080"], ["--web", "8080"]):
        args = build_parser().parse_args(argv)
        assert is_deployment(args)  # not ignored by the host's console
        assert run_deploy_cli(args) == 2
        assert "--web goes with --deployment NAME --share" in capsys.readouterr().err


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def _browser_or_skip() -> None:
    missing = []
    if not Path(CHROMIUM).exists():
        missing.append("chromium (apt-get install chromium)")
    try:
        import playwright  # noqa: F401
    except ImportError:
        missing.append("playwright (pip install playwright)")
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail("the browser test must run in CI: missing " + ", ".join(missing))
        pytest.skip("no browser here: " + ", ".join(missing))


async def _until(predicate: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} never happened"
        await asyncio.sleep(0.1)


@pytest.mark.timeout(180)
def test_a_browser_tab_draws_the_deployment_and_joins_every_node_as_its_person() -> None:
    _browser_or_skip()
    from playwright.async_api import async_playwright

    d = deployment()
    d = replace(d, nodes=tuple(replace(n, profile=replace(n.profile, unit="new.service", compare_unit="old.service"))
                               for n in d.nodes))
    watch = FakeWatch(d, ready=False)

    async def run() -> None:
        # served in this user's runtime dir (the test's own), where a tab's `attach --deployment` looks
        share = await DeploymentShare(watch, DeploymentSwap(watch, who="ana"), invite=("ben",)).start()
        web, files = await webmod.serve_deployment(share, "127.0.0.1", _free_port(), owner="ana")
        before = {k: len(server.clients) for k, server in share.servers.items()}
        received: list[bytes] = []
        try:
            async with async_playwright() as pw:
                browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                try:
                    page = await browser.new_page(viewport={"width": 1400, "height": 900})
                    page.on("websocket", lambda ws: ws.on("framereceived", lambda data: received.append(
                        data if isinstance(data, bytes) else data.encode())))
                    await page.goto(dict(files)["ben"].read_text().strip())
                    # ben's tab: one more client on every node's server, as ben (his token file)
                    await _until(lambda: all(len(server.clients) == before[k] + 1
                                             for k, server in share.servers.items()), "the tab attached to every node")
                    assert all(server.clients[-1].name == "ben" for server in share.servers.values())
                    shown = lambda: b"".join(received).decode("utf-8", "replace")  # noqa: E731
                    await _until(lambda: "node 0" in shown() and "node 1" in shown(), "the deployment drawn in the tab")
                finally:
                    await browser.close()
            await _until(lambda: all(len(server.clients) == before[k] for k, server in share.servers.items()),
                         "the tab's attach gone with the tab")
        finally:
            await web.close()
            await share.close()

    asyncio.run(run())


class _Swap:
    who = "ana"
    deployment = deployment()
