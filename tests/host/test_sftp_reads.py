"""read_file over SFTP issues one plain read request at a time, never a task per 16 KiB block up
to `max_bytes` (asyncssh's default reader started 64 requests for a 2 KB file, and a read that
timed out left them behind: "Task exception was never retrieved ... SFTPEOFError" under load)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh.sftp
import pytest

from console.demo.hostsim import HostSimulator
from console.host.transport.ssh import SshTransport
from tests.kit.hosts import sim_options


@pytest.fixture(params=["sim", "sshd"])
async def ssh(request: pytest.FixtureRequest, sim: HostSimulator) -> AsyncIterator[SshTransport]:
    if request.param == "sim":
        t = SshTransport(sim_options(sim))
    else:
        t = SshTransport(request.getfixturevalue("sshd").options())
    await t.connect()
    try:
        yield t
    finally:
        await t.close()


@pytest.fixture
def read_requests(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []
    real = asyncssh.sftp.SFTPClientHandler.read

    async def counting(self: object, handle: bytes, offset: int, length: int):  # type: ignore[no-untyped-def]
        sizes.append(length)
        return await real(self, handle, offset, length)  # type: ignore[arg-type]

    monkeypatch.setattr(asyncssh.sftp.SFTPClientHandler, "read", counting)
    return sizes


async def test_a_small_file_costs_one_read_and_the_end(ssh: SshTransport, tmp_path: Path,
                                                       read_requests: list[int]) -> None:
    unit = tmp_path / "sglang.service"
    unit.write_bytes(b"[Service]\nExecStart=/opt/sglang/bin/python -m sglang.launch_server\n" * 30)
    assert await ssh.read_file(str(unit)) == unit.read_bytes()
    # the data, then the empty read that says the file ended
    assert len(read_requests) <= 2, read_requests


async def test_a_large_file_is_read_whole_and_bounded(ssh: SshTransport, tmp_path: Path,
                                                      read_requests: list[int]) -> None:
    big = tmp_path / "config.json"
    body = bytes(range(256)) * 2000  # 512,000 bytes: several requests, short answers included
    big.write_bytes(body)
    assert await ssh.read_file(str(big)) == body
    assert await ssh.read_file(str(big), max_bytes=70_000) == body[:70_000]
    assert max(read_requests) <= 64 * 1024
    with pytest.raises(FileNotFoundError):
        await ssh.read_file(str(tmp_path / "missing"))
