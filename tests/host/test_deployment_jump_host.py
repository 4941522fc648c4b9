"""A deployment node reached through a jump host (issue 37): two OpenSSH sshd on 127.0.0.1, node 1
reached through node 0's sshd as ProxyJump (the profile's `jump`), its probe and its watch working
through the hop; with the jump host down the same node is unreachable and the screen says the jump
host refused; a jump host that will not open the hop says so too."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import Static

from console.config import ConfigError, load_config
from console.demo.sshd import Sshd, start_sshd
from console.domain.deploy.watch import DeploymentWatch
from console.host.transport.errors import HostKeyUnknown
from console.host.transport.ssh import SshOptions, SshTransport
from console.ui.deploy_screen import DeploymentScreen
from tests.kit.hosts import require_sshd

pytestmark = pytest.mark.sshd


def pair(tmp_path: Path, jump_config: str = "") -> tuple[Sshd, Sshd, Path]:
    """Two sshd: the jump host (node 0) and node 1, one client key, one known_hosts naming both."""
    require_sshd()
    jump = start_sshd(tmp_path / "jump", extra_config=jump_config)
    inner = tmp_path / "node1"
    inner.mkdir(mode=0o700)
    for name in ("client_key", "client_key.pub"):
        shutil.copy(jump.directory / name, inner / name)
    node = start_sshd(inner)
    known = tmp_path / "known_hosts"
    known.write_text(jump.known_hosts.read_text() + node.known_hosts.read_text())
    return jump, node, known


def config(tmp_path: Path, jump: Sshd, node: Sshd, known: Path) -> Path:
    common = f'user = "{jump.user}"\nidentity = "{jump.client_key}"\nknown_hosts = "{known}"\nconnect_timeout_s = 5\n'
    path = tmp_path / "config.toml"
    path.write_text(f"""
[profiles.bastion]
host = "127.0.0.1"
port = {jump.port}
{common}
[profiles.inner]
host = "127.0.0.1"
port = {node.port}
jump = "{jump.user}@127.0.0.1:{jump.port}"
{common}
[deployments.big]
kind = "multinode"
nodes = [{{ profile = "bastion", node_rank = 0 }}, {{ profile = "inner", node_rank = 1 }}]
""")
    return path


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[tuple[Sshd, Sshd, Path]]:
    jump, node, known = pair(tmp_path)
    try:
        yield jump, node, known
    finally:
        for s in (jump, node):
            if s.process.poll() is None:
                s.stop()


async def until(predicate: object, timeout: float, what: str, show: object = None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what} never happened: {show() if show else ''}"  # type: ignore[operator]
        await asyncio.sleep(0.1)


def test_the_jump_option_is_one_hop_and_never_an_option(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    for bad in ("-oProxyCommand=sh", "a b", "a,b", "host:port"):
        path.write_text(f'[profiles.x]\nhost = "10.0.0.2"\njump = "{bad}"\n')
        with pytest.raises(ConfigError, match="one jump host as \\[user@\\]host\\[:port\\]"):
            load_config(path)
    path.write_text('[profiles.x]\nhost = "10.0.0.2"\njump = "ana@bastion.example:2222"\n')
    assert load_config(path).profiles["x"].jump == "ana@bastion.example:2222"


@pytest.mark.timeout(120)
def test_a_node_behind_a_jump_host_is_probed_and_watched_through_it(hosts: tuple[Sshd, Sshd, Path],
                                                                      tmp_path: Path) -> None:
    jump, node, known = hosts
    deployment = load_config(config(tmp_path, jump, node, known)).deployment("big")

    async def run() -> None:
        watch = DeploymentWatch(deployment)
        try:
            await watch.start()
            show = lambda: [(n.label, n.connection) for n in watch.view().nodes]  # noqa: E731
            await until(lambda: all(n.reachable for n in watch.view().nodes), 60, "both nodes connected", show)
            probes = await watch.probe_all()
            assert probes["node1"].error is None and probes["node1"].clock_skew_s is not None, probes["node1"]
            assert abs(probes["node1"].clock_skew_s) < 5  # the same machine's clock, measured through the hop
            result = await watch.transport("node1").run("echo $SSH_CONNECTION", timeout=10)
            # sshd's own words: the session came in from the jump host's side of loopback, to node 1's port
            assert result.stdout.decode().split()[-1] == str(node.port)
        finally:
            await watch.close()
        # the jump host gone: the same node cannot be reached, and the screen says which hop refused
        jump.stop()
        watch = DeploymentWatch(deployment)

        class Host(App[None]):
            def on_mount(self) -> None:
                self.push_screen(DeploymentScreen(watch, start_watch=True))

        try:
            async with Host().run_test(size=(200, 50)) as pilot:
                screen = pilot.app.screen
                text = lambda: str(screen.query_one("#deploy-faults", Static).render())  # noqa: E731
                await until(lambda: "the jump host" in text(), 60, "the refusal on screen", text)
                said = text()
                assert "node 1 (127.0.0.1) unreachable over SSH" in said, said
                assert f"the jump host {jump.user}@127.0.0.1:{jump.port}: connection refused" in said.lower(), said
                assert "UNREACHABLE" in str(screen.query_one("#deploy-nodes", Static).render())
        finally:
            await watch.close()

    asyncio.run(run())


@pytest.mark.timeout(120)
def test_a_jump_host_that_will_not_open_the_hop_says_so(tmp_path: Path) -> None:
    jump, node, known = pair(tmp_path, jump_config="PermitOpen 127.0.0.1:1\n")
    deployment = load_config(config(tmp_path, jump, node, known)).deployment("big")

    async def run() -> None:
        watch = DeploymentWatch(deployment)
        try:
            await watch.start()
            show = lambda: watch.view().faults  # noqa: E731
            await until(lambda: any("could not reach it" in f for f in watch.view().faults), 60,
                        "the hop refused", show)
            fault = next(f for f in watch.view().faults if "could not reach it" in f)
            assert fault.startswith("node 1 (127.0.0.1) unreachable over SSH") and "the jump host" in fault, fault
            # the jump host itself answers (its own connection may still be opening when the hop's refusal
            # comes back first: the clean-clone CI run under load read "connecting")
            await until(lambda: watch.view().nodes[0].reachable is True, 60, "the jump host reachable",
                        lambda: watch.view().nodes[0])
        finally:
            await watch.close()

    try:
        asyncio.run(run())
    finally:
        jump.stop()
        node.stop()


@pytest.mark.timeout(120)
def test_a_node_key_unknown_behind_a_jump_host_is_read_through_the_hop(hosts: tuple[Sshd, Sshd, Path],
                                                                      tmp_path: Path) -> None:
    jump, node, known = hosts
    known.write_text(jump.known_hosts.read_text())  # node 1's key not known yet
    options = SshOptions(host="127.0.0.1", port=node.port, user=node.user, identity=str(jump.client_key),
                         known_hosts=str(known), ssh_config=(), connect_timeout_s=5,
                         jump=f"{jump.user}@127.0.0.1:{jump.port}")

    async def run() -> None:
        refused = SshTransport(options)
        with pytest.raises(HostKeyUnknown) as exc:
            await refused.connect()
        await refused.close()
        presented = node.known_hosts.read_text().split()[2]
        assert "SHA256:" in str(exc.value)
        accepting = SshTransport(SshOptions(**{**{f: getattr(options, f) for f in options.__slots__},
                                               "accept_new_host_key": True}))
        try:
            await accepting.connect()
            result = await accepting.run("echo $SSH_CONNECTION", timeout=10)
            assert result.stdout.decode().split()[-1] == str(node.port)
        finally:
            await accepting.close()
        assert presented in known.read_text()  # the key read through the hop is node 1's own

    asyncio.run(run())
