"""Shared fixtures: the in-process host simulator, and OpenSSH's sshd on 127.0.0.1.

With CI=true a missing sshd fails the run instead of skipping (the CI must test real OpenSSH).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from console.hostsim import HostSimulator
from console.testing import Sshd
from console.transport.ssh import SshOptions, SshTransport

DATA = Path(__file__).parent / "data"


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[HostSimulator]:
    simulator = HostSimulator(tmp_path / "host")
    await simulator.start()
    try:
        yield simulator
    finally:
        await simulator.stop()


def sim_options(sim: HostSimulator, **overrides: object) -> SshOptions:
    values: dict[str, object] = dict(
        host="127.0.0.1", port=sim.port, user="root", identity=str(sim.client_key_path),
        known_hosts=str(sim.known_hosts_path), ssh_config=(), connect_timeout_s=5,
    )
    values.update(overrides)
    return SshOptions(**values)  # type: ignore[arg-type]


@pytest.fixture
async def sim_transport(sim: HostSimulator) -> AsyncIterator[SshTransport]:
    transport = SshTransport(sim_options(sim))
    await transport.connect()
    try:
        yield transport
    finally:
        await transport.close()


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """OpenSSH's sshd on 127.0.0.1 with temporary keys, for this test session only."""
    from console.testing import SshdError, find_sshd, start_sshd

    if find_sshd() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("sshd is missing: CI must test against OpenSSH (apt-get install openssh-server)")
        pytest.skip("OpenSSH sshd is not installed")
    if os.geteuid() != 0 and os.environ.get("CI") != "true":
        pytest.skip("sshd tests run as root (CI does)")
    try:
        server = start_sshd(tmp_path_factory.mktemp("sshd"))
    except SshdError as exc:
        pytest.fail(str(exc))
    try:
        yield server
    finally:
        server.stop()


async def wait_for(predicate: object, timeout: float = 5.0, interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(interval)
    raise AssertionError("condition not met in time")
