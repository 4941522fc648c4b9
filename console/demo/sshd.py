"""Test and benchmark helpers that need no pytest: OpenSSH's sshd on 127.0.0.1 with temporary keys."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from console.host.transport.ssh import SshOptions

if TYPE_CHECKING:
    from console.host.transport.ssh import SshOptions


def find_sshd() -> str | None:
    for candidate in (shutil.which("sshd"), "/usr/sbin/sshd"):
        if candidate and os.path.exists(candidate):
            return candidate
    return None


def free_port() -> int:
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
    directory: Path

    def options(self, **overrides: object) -> SshOptions:
        """SshOptions that reach this sshd with its own known_hosts and key (no ~/.ssh/config)."""
        values: dict[str, object] = dict(
            host="127.0.0.1", port=self.port, user=self.user, identity=str(self.client_key),
            known_hosts=str(self.known_hosts), ssh_config=(), connect_timeout_s=5,
        )
        values.update(overrides)
        return SshOptions(**values)  # type: ignore[arg-type]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(5)


class SshdError(RuntimeError):
    pass


def start_sshd(directory: Path | None = None, *, extra_config: str = "", port: int | None = None) -> Sshd:
    """sshd -D on 127.0.0.1 (never another address), with its own host key and one client key."""
    binary = find_sshd()
    if binary is None:
        raise SshdError("OpenSSH's sshd is not installed (apt-get install openssh-server)")
    d = Path(directory or tempfile.mkdtemp(prefix="gpuconsole-sshd-"))
    d.mkdir(parents=True, exist_ok=True)
    d.chmod(0o700)
    for name in ("host_key", "client_key"):
        if not (d / name).exists():  # a restart in the same directory keeps its keys
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    (d / "authorized_keys").chmod(0o600)
    port = port or free_port()
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
{extra_config}""")
    Path("/run/sshd").mkdir(exist_ok=True)
    process = subprocess.Popen([binary, "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE)
    deadline = time.time() + 10
    while time.time() < deadline:
        if process.poll() is not None:
            err = process.stderr.read().decode() if process.stderr else ""
            raise SshdError(f"sshd exited at start: {err.strip()}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    host_pub = (d / "host_key.pub").read_text().split()
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    user = pwd.getpwuid(os.geteuid()).pw_name
    return Sshd(port, d / "client_key", d / "known_hosts", user, process, d)
