"""The host-side test kit: the recorded data's folder, SSH options for the simulator, OpenSSH's sshd
requirement, and one bounded wait on a condition."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import hypothesis  # noqa: F401 - imported first: a late import (the plugin's summary) hits CPython 3.11.7's "AST constructor recursion depth mismatch"
import pytest

from console.demo.hostsim import HostSimulator
from console.host.transport.ssh import SshOptions

DATA = Path(__file__).parent.parent / "data"


def sim_options(sim: HostSimulator, **overrides: object) -> SshOptions:
    values: dict[str, object] = dict(
        host="127.0.0.1", port=sim.port, user="root", identity=str(sim.client_key_path),
        known_hosts=str(sim.known_hosts_path), ssh_config=(), connect_timeout_s=5,
    )
    values.update(overrides)
    return SshOptions(**values)  # type: ignore[arg-type]


def require_sshd() -> None:
    """OpenSSH's sshd can run here, else skip (fail in CI: the CI must test against OpenSSH)."""
    from console.demo.sshd import find_sshd

    if find_sshd() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("sshd is missing: CI must test against OpenSSH (apt-get install openssh-server)")
        pytest.skip("OpenSSH sshd is not installed")
    if os.geteuid() != 0 and os.environ.get("CI") != "true":
        pytest.skip("sshd tests run as root (CI does)")


async def wait_for(predicate: object, timeout: float = 5.0, interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(interval)
    raise AssertionError("condition not met in time")
