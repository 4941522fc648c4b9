"""The deployment screen with `--share --web`: besides the nodes' sockets it opens the browser door, says
where each person's first address is (a 0600 file's path, never the address), and closes the door and
removes the addresses with the share."""

from __future__ import annotations

import asyncio
import socket
import stat
from dataclasses import replace
from typing import Any

import aiohttp
import pytest
from textual.app import App

from console.domain.deploy.swap import DeploymentSwap
from console.share.deployment import manifest_path
from console.ui.deploy_screen import DeploymentScreen
from tests.kit.deploy import FakeWatch, deployment


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.timeout(90)
def test_the_shared_screen_opens_the_browser_door_and_says_where_each_address_is() -> None:
    d = deployment()
    d = replace(d, nodes=tuple(replace(n, profile=replace(n.profile, unit="new.service", compare_unit="old.service"))
                               for n in d.nodes))
    watch = FakeWatch(d, ready=False)  # its view derived from the nodes (the screen draws it)
    port = _free_port()
    screen = DeploymentScreen(watch, DeploymentSwap(watch, who="ana"), share=True, invite=("ben",),
                              web=("127.0.0.1", port))
    said: list[str] = []

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(screen)

        def notify(self, message: str, **kwargs: Any) -> None:  # type: ignore[override]
            said.append(message)
            super().notify(message, **kwargs)

    async def until(predicate: Any, what: str) -> None:
        for _ in range(1500):
            if predicate():
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"{what} never happened: {said}")

    async def run() -> None:
        async with Host().run_test(size=(160, 50)):
            await until(lambda: screen.web is not None and len([m for m in said if "browser address" in m]) == 2,
                        "the browser door and its two addresses")
            yours = manifest_path("big").with_name("deploy-big.url")
            bens = manifest_path("big").with_name("deploy-big.ben.url")
            for path in (yours, bens):
                assert stat.S_IMODE(path.stat().st_mode) == 0o600
                assert any(str(path) in m for m in said)
                assert not any(path.read_text().strip() in m for m in said)  # the address itself never shown
            async with aiohttp.ClientSession() as browser:
                first = await browser.get(yours.read_text().strip(), allow_redirects=False)
                assert first.status == 303
            await screen.close_share()
            assert not yours.exists() and not bens.exists() and screen.web is None
            async with aiohttp.ClientSession() as browser:
                with pytest.raises(aiohttp.ClientConnectionError):
                    await browser.get(f"http://127.0.0.1:{port}/", allow_redirects=False)

    asyncio.run(run())
