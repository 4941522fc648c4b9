"""What one poll costs on the wire (issue 23 item 1, the client's side): one encrypted packet out
per command, not two (asyncssh's empty MSG_IGNORE before every packet is a CBC countermeasure an
AEAD cipher does not need), and AES-GCM chosen before ChaCha20 (one cipher call per packet, not
three) unless the user's ssh_config says otherwise."""

from __future__ import annotations

from pathlib import Path

from console.demo.sshd import Sshd
from console.host.transport.ssh import SshTransport


async def test_a_poll_sends_one_packet_and_the_cipher_is_aes_gcm(sshd: Sshd) -> None:
    transport = SshTransport(sshd.options())
    await transport.connect()
    try:
        await transport.run("true", timeout=5)  # the shell is open
        conn = transport._conn
        assert conn is not None
        assert conn.get_extra_info("send_cipher") == "aes128-gcm@openssh.com"
        seq = conn._send_seq  # asyncssh's count of packets sent
        for _ in range(10):
            assert (await transport.run("true", timeout=5)).ok
        assert conn._send_seq - seq == 10, "more than one packet per poll (an MSG_IGNORE before each?)"
    finally:
        await transport.close()


async def test_ciphers_in_the_users_ssh_config_still_win(sshd: Sshd, tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Ciphers chacha20-poly1305@openssh.com\n")
    transport = SshTransport(sshd.options(ssh_config=(str(config),)))
    await transport.connect()
    try:
        assert (await transport.run("echo ok", timeout=5)).text == "ok\n"
        assert transport._conn is not None
        assert transport._conn.get_extra_info("send_cipher") == "chacha20-poly1305@openssh.com"
    finally:
        await transport.close()
