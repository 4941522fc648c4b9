"""The transport against a real SSH server: the in-process simulator and OpenSSH's sshd."""

from __future__ import annotations

import asyncio
import http.server
import threading
import uuid
from pathlib import Path

import httpx
import pytest

from console.demo.sshd import Sshd
from console.host.transport import (
    AuthError,
    CommandTimeout,
    ConnectError,
    HostKeyChanged,
    HostKeyUnknown,
    LocalTransport,
    Transport,
    join,
    quote,
)
from console.host.transport.ssh import SshTransport
from tests.kit.hosts import sim_options, wait_for

NASTY = [
    "plain",
    "with space",
    "it's quoted \"twice\"",
    "$(touch /tmp/pwned-gpuconsole)",
    "`id`",
    "semi;colon && or || pipe |",
    "glob * ? [a-z]",
    "new\nline",
    "tab\there",
    "-dash-first",
    "unicode ✓ é",
    "$HOME ${PATH}",
]


async def test_values_with_shell_metacharacters_arrive_literally(transport: Transport, tmp_path: Path) -> None:
    for value in NASTY:
        result = await transport.run(join(["printf", "%s", value]))
        assert result.ok
        assert result.stdout.decode() == value
    assert not Path("/tmp/pwned-gpuconsole").exists()


async def test_paths_with_metacharacters_are_created_and_stated_literally(transport: Transport,
                                                                          tmp_path: Path) -> None:
    base = tmp_path / "dir with space"
    base.mkdir()
    for i, value in enumerate(NASTY):
        path = str(base / f"{i}-{value.replace('/', '_')}")
        result = await transport.run(f"printf x > {quote(path)} && wc -c < {quote(path)}")
        assert result.ok, result.error_text
        assert result.text.strip() == "1"
        st = await transport.stat(path)
        assert st.size_bytes == 1 and not st.is_dir
        assert await transport.read_file(path) == b"x"


async def test_framing_survives_missing_newlines_binary_and_stderr(transport: Transport) -> None:
    r = await transport.run("printf no-newline")
    assert r.stdout == b"no-newline"
    r = await transport.run("printf 'a\\n\\n'")
    assert r.stdout == b"a\n\n"
    r = await transport.run("printf '\\000\\377\\n__GC_fake 0\\n'; echo to-stderr >&2; exit 7")
    assert r.stdout == b"\x00\xff\n__GC_fake 0\n"
    assert r.stderr == b"to-stderr\n"
    assert r.exit_status == 7
    # A script that changes directory or exits does not disturb the shared shell.
    await transport.run("cd /; exit 3")
    r = await transport.run("echo still-here")
    assert r.text == "still-here\n"


async def test_a_script_cannot_eat_the_next_command(transport: Transport) -> None:
    r = await transport.run("cat; echo after-cat", timeout=3)
    assert r.text == "after-cat\n"


async def test_a_hung_command_times_out_and_the_next_one_still_runs(transport: Transport) -> None:
    with pytest.raises(CommandTimeout):
        await transport.run("sleep 30", timeout=0.5)
    r = await transport.run("echo alive", timeout=5)
    assert r.text == "alive\n"


async def test_a_slow_command_does_not_hold_up_a_fast_poll(transport: Transport, tmp_path: Path) -> None:
    """The slow command runs until the test lets it end, after the fast one has answered: a fast
    poll queued behind it would never answer (it once read the wall clock: < 1 s, which a loaded
    CI machine missed with 1.19 s)."""
    release = tmp_path / "release"
    slow = asyncio.ensure_future(transport.run(
        f"while [ ! -e {quote(str(release))} ]; do sleep 0.05; done; echo slow", timeout=60))
    await asyncio.sleep(0.1)
    fast = await asyncio.wait_for(transport.run("echo fast", timeout=30), 40)
    assert fast.text == "fast\n"
    assert not slow.done(), "the slow command ended before it was let go"
    release.touch()
    assert (await slow).text == "slow\n"


async def test_missing_files_raise_file_not_found(transport: Transport, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await transport.stat(str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError):
        await transport.read_file(str(tmp_path / "nope"))


async def test_read_file_is_bounded(transport: Transport, tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"y" * 100_000)
    assert len(await transport.read_file(str(big), max_bytes=1000)) == 1000


async def test_stream_lines_and_no_remote_process_left_after_close(transport: Transport) -> None:
    tag = uuid.uuid4().hex
    stream = await transport.stream(f"while :; do echo {tag}; sleep 0.05; done")
    lines = []
    async for line in stream:
        lines.append(line)
        if len(lines) == 3:
            break
    assert lines == [tag.encode()] * 3
    await stream.close()

    async def alive() -> bool:
        r = await transport.run(f"pgrep -f {quote(tag)} | grep -v $$ || true")
        return bool(r.text.strip())

    deadline = asyncio.get_running_loop().time() + 5
    while await alive():
        assert asyncio.get_running_loop().time() < deadline, "the stream's remote command outlived its channel"
        await asyncio.sleep(0.1)


async def test_a_stream_whose_command_exits_ends_with_its_status(transport: Transport) -> None:
    stream = await transport.stream("echo one; echo oops >&2; exit 3")
    lines = [line async for line in stream]
    assert lines == [b"one"]
    await wait_for(lambda: stream.exit_status is not None, 5)
    assert stream.exit_status == 3
    assert "oops" in stream.stderr_tail
    await stream.close()


async def test_quiet_stream_dies_when_the_connection_drops(sim: object) -> None:
    """Without a pty a quiet `tail -f` would linger on the host after the console is gone."""
    from console.demo.hostsim import HostSimulator

    assert isinstance(sim, HostSimulator)
    tag = uuid.uuid4().hex
    t = SshTransport(sim_options(sim))
    await t.connect()
    await t.stream(f"sleep 300 # {tag}")
    checker = LocalTransport()
    await wait_for(lambda: True)
    r = await checker.run(f"pgrep -f {quote(tag)}")
    assert r.ok, "the stream should be running"
    await t.close()
    for _ in range(50):
        r = await checker.run(f"pgrep -f {quote(tag)}")
        if not r.ok:
            break
        await asyncio.sleep(0.1)
    await checker.close()
    assert not r.ok, "the remote command outlived the connection"


async def test_http_reaches_the_host_through_a_port_forward(transport: Transport) -> None:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = await transport.http_base_url(server.server_address[1])
        async with httpx.AsyncClient(base_url=base, timeout=5) as client:
            response = await client.get("/health")
        assert response.json() == {"ok": True}
    finally:
        server.shutdown()


async def test_unknown_host_key_is_refused_with_its_fingerprint(sim: object, tmp_path: Path) -> None:
    from console.demo.hostsim import HostSimulator

    assert isinstance(sim, HostSimulator)
    known = tmp_path / "known_hosts"
    t = SshTransport(sim_options(sim, known_hosts=str(known)))
    with pytest.raises(HostKeyUnknown) as info:
        await t.connect()
    assert info.value.fingerprint == sim.host_key.get_fingerprint("sha256")
    assert "--accept-new-host-key" in str(info.value)
    assert t.state.status == "failed"
    assert not known.exists()


async def test_accept_new_host_key_records_it_then_a_changed_key_is_refused(sim: object, tmp_path: Path) -> None:
    from console.demo.hostsim import HostSimulator

    assert isinstance(sim, HostSimulator)
    known = tmp_path / "known_hosts"
    t = SshTransport(sim_options(sim, known_hosts=str(known), accept_new_host_key=True))
    await t.connect()
    assert (await t.run("echo ok")).text == "ok\n"
    await t.close()
    assert f"[127.0.0.1]:{sim.port} ssh-ed25519 " in known.read_text()

    # Same known_hosts, a server with another key on the same address: always refused.
    other = HostSimulator(tmp_path / "other")
    await other.start()
    try:
        line = known.read_text().replace(f"[127.0.0.1]:{sim.port}", f"[127.0.0.1]:{other.port}")
        known.write_text(line)
        t2 = SshTransport(sim_options(other, known_hosts=str(known), accept_new_host_key=True))
        with pytest.raises(HostKeyChanged) as info:
            await t2.connect()
        assert "HOST KEY CHANGED" in str(info.value)
        assert known.read_text() == line, "a changed key must never be recorded"
    finally:
        await other.stop()


async def test_wrong_key_is_an_auth_error(sshd: Sshd, tmp_path: Path) -> None:
    import subprocess

    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")], check=True)
    t = SshTransport(sshd.options(identity=str(tmp_path / "k")))
    with pytest.raises(AuthError):
        await t.connect()


async def test_closed_port_fails_fast_with_a_connect_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused connection is its own error, at the first attempt: one try, no retry loop, no wait
    for the connect timeout (a long one here: a timeout would say "no answer within 60s")."""
    import socket

    import console.host.transport.ssh as ssh_module

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from console.host.transport.ssh import SshOptions

    attempts: list[str] = []
    real_connect = ssh_module.asyncssh.connect

    def counting_connect(host: str, **kwargs: object) -> object:
        attempts.append(host)
        return real_connect(host, **kwargs)

    monkeypatch.setattr(ssh_module.asyncssh, "connect", counting_connect)
    t = SshTransport(SshOptions("127.0.0.1", port=port, ssh_config=(), connect_timeout_s=60))
    states: list[str] = []
    t.on_state(lambda st: states.append(st.status))
    with pytest.raises(ConnectError) as info:
        await t.connect()
    assert "127.0.0.1" in str(info.value) and "connection refused" in str(info.value)
    assert attempts == ["127.0.0.1"] and states[-1] == "failed"
    assert t._supervisor is None  # nothing keeps trying behind the caller's back
    await t.close()


async def test_reconnects_after_the_connection_drops(sim: object) -> None:
    from console.demo.hostsim import HostSimulator

    assert isinstance(sim, HostSimulator)
    t = SshTransport(sim_options(sim))
    states: list[str] = []
    t.on_state(lambda s: states.append(s.status))
    await t.connect()
    for conn in list(sim.open_connections):
        conn.close()
    await wait_for(lambda: "reconnecting" in states, 5)
    await wait_for(lambda: t.state.status == "connected", 10)
    assert (await t.run("echo back")).text == "back\n"
    assert states[-3:] == ["connected", "reconnecting", "connected"]
    await t.close()
