"""Host keys as OpenSSH's own `ssh` treats them, case by case, against a real sshd: malformed and
binary known_hosts, `@revoked` keys, entries for port 22 only, changed keys (issue 15, item 8)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from console.demo.sshd import Sshd
from console.host.transport import HostKeyChanged, HostKeyRevoked, HostKeyUnknown
from console.host.transport.ssh import SshTransport

pytestmark = pytest.mark.sshd


def _keys(sshd: Sshd, tmp_path: Path) -> tuple[str, str]:
    real = " ".join((sshd.directory / "host_key.pub").read_text().split()[:2])
    other = tmp_path / "other"
    if not other.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    return real, " ".join((tmp_path / "other.pub").read_text().split()[:2])


def _openssh(sshd: Sshd, known: Path, accept_new: bool) -> str:
    r = subprocess.run(
        ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={known}",
         "-o", "GlobalKnownHostsFile=/dev/null", "-o", f"StrictHostKeyChecking={'accept-new' if accept_new else 'yes'}",
         "-o", "ConnectTimeout=5", "-i", str(sshd.client_key), "-p", str(sshd.port), f"{sshd.user}@127.0.0.1", "true"],
        capture_output=True, text=True, timeout=30)
    if r.returncode == 0:
        return "connected"
    if "REVOKED" in r.stderr:
        return "revoked"
    if "IDENTIFICATION HAS CHANGED" in r.stderr:
        return "changed"
    if "verification failed" in r.stderr:
        return "unknown"
    return "other: " + r.stderr.strip()[-200:]


async def _ours(sshd: Sshd, known: Path, accept_new: bool) -> str:
    t = SshTransport(sshd.options(known_hosts=str(known), accept_new_host_key=accept_new))
    try:
        await t.connect()
    except HostKeyRevoked:
        return "revoked"
    except HostKeyChanged:
        return "changed"
    except HostKeyUnknown:
        return "unknown"
    finally:
        await t.close()
    return "connected"


CASES = {
    "empty": lambda real, other, port: b"",
    "malformed line then the key": lambda real, other, port: f"garbage\n@bogus x y z\n[127.0.0.1]:{port} {real}\n".encode(),
    "binary file": lambda real, other, port: bytes(range(256)) * 4,
    "binary then the key": lambda real, other, port: b"\xff\xfe\x00\x01\n" + f"[127.0.0.1]:{port} {real}\n".encode(),
    "revoked": lambda real, other, port: f"@revoked [127.0.0.1]:{port} {real}\n".encode(),
    "revoked for any host": lambda real, other, port: f"@revoked * {real}\n".encode(),
    "known for port 22 only": lambda real, other, port: f"127.0.0.1 {real}\n".encode(),
    "another key for port 22 only": lambda real, other, port: f"127.0.0.1 {other}\n".encode(),
    "changed": lambda real, other, port: f"[127.0.0.1]:{port} {other}\n".encode(),
}


@pytest.mark.parametrize("accept_new", [False, True])
@pytest.mark.parametrize("case", list(CASES))
async def test_host_keys_behave_as_openssh(sshd: Sshd, tmp_path: Path, case: str, accept_new: bool) -> None:
    real, other = _keys(sshd, tmp_path)
    content = CASES[case](real, other, sshd.port)
    theirs_file, ours_file = tmp_path / "theirs", tmp_path / "ours"
    theirs_file.write_bytes(content)
    ours_file.write_bytes(content)
    theirs = _openssh(sshd, theirs_file, accept_new)
    ours = await _ours(sshd, ours_file, accept_new)
    from tests.kit.figures import record

    record("host keys vs ssh(1)", tried=1, failed=int(ours != theirs), accepted_wrongly=int(
        ours == "connected" and theirs != "connected"))
    assert ours == theirs, (case, accept_new)
    added_theirs = theirs_file.read_bytes()[len(content):].split()
    added_ours = ours_file.read_bytes()[len(content):].split()
    assert added_ours[:3] == added_theirs[:3], "the same line recorded (or none)"
    if theirs == "connected" and accept_new and added_theirs:
        assert await _ours(sshd, ours_file, False) == "connected", "the recorded key is trusted next time"
