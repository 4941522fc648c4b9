"""Shared fixtures: the in-process host simulator, and OpenSSH's sshd on 127.0.0.1.

With CI=true a missing sshd fails the run instead of skipping (the CI must test real OpenSSH).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from console.hostsim import HostSimulator
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Sshd:
    port: int
    client_key: Path
    known_hosts: Path
    user: str
    process: subprocess.Popen[bytes]

    def options(self, **overrides: object) -> SshOptions:
        values: dict[str, object] = dict(
            host="127.0.0.1", port=self.port, user=self.user, identity=str(self.client_key),
            known_hosts=str(self.known_hosts), ssh_config=(), connect_timeout_s=5,
        )
        values.update(overrides)
        return SshOptions(**values)  # type: ignore[arg-type]


def find_sshd() -> str | None:
    for candidate in (shutil.which("sshd"), "/usr/sbin/sshd"):
        if candidate and os.path.exists(candidate):
            return candidate
    return None


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """OpenSSH's sshd on 127.0.0.1 with temporary keys, for this test session only."""
    binary = find_sshd()
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("sshd is missing: CI must test against OpenSSH (apt-get install openssh-server)")
        pytest.skip("OpenSSH sshd is not installed")
    if os.geteuid() != 0 and os.environ.get("CI") != "true":
        pytest.skip("sshd tests run as root (CI does)")
    d = tmp_path_factory.mktemp("sshd")
    d.chmod(0o700)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key")], check=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "client_key")], check=True)
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    (d / "authorized_keys").chmod(0o600)
    port = _free_port()
    config = d / "sshd_config"
    config.write_text(f"""\
Port {port}
ListenAddress 127.0.0.1
HostKey {d / 'host_key'}
AuthorizedKeysFile {d / 'authorized_keys'}
PidFile {d / 'sshd.pid'}
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin prohibit-password
AllowTcpForwarding local
Subsystem sftp internal-sftp
LogLevel ERROR
""")
    Path("/run/sshd").mkdir(exist_ok=True)
    process = subprocess.Popen([binary, "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE)
    deadline = time.time() + 10
    while time.time() < deadline:
        if process.poll() is not None:
            err = process.stderr.read().decode() if process.stderr else ""
            pytest.fail(f"sshd exited at start: {err}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    host_pub = (d / "host_key.pub").read_text().split()
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    import pwd

    try:
        yield Sshd(port, d / "client_key", d / "known_hosts", pwd.getpwuid(os.geteuid()).pw_name, process)
    finally:
        process.terminate()
        process.wait(5)


async def wait_for(predicate: object, timeout: float = 5.0, interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(interval)
    raise AssertionError("condition not met in time")
