"""The per-node probe of a deployment (issue 37): the node's clock against the console's, its
SGLang version, what --dist-init-addr resolves to on it, whether that is its own address, and a
bounded TCP connect from the node; a hostile address never reaches the shell as code, and a hung
probe is killed on the host."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import pytest

from console.domain.deploy.probe import parse_probe, probe_node, probe_script, split_addr
from console.host.transport.local import LocalTransport


def test_the_clock_line_gives_the_skew_with_the_zone_taken_out() -> None:
    # 2026-12-03 10:00:03.5 at +0200 is 08:00:03.5 UTC; the console's clock read 08:00:00 UTC
    console = 1796284800.0  # 2026-12-03 08:00:00 UTC
    p = parse_probe("clock 2026-12-03 10:00:03.500000000 +0200\nversion 0.5.23\n", console)
    assert p.utc_offset_s == 7200 and p.clock_skew_s == pytest.approx(3.5)
    assert p.sglang_version == "0.5.23"


@pytest.mark.parametrize("line, field, value", [
    ("resolves 10.0.0.1", "resolves_to", "10.0.0.1"),
    ("resolve-error [Errno -2] Name or service not known", "resolve_error", "[Errno -2] Name or service not known"),
    ("local yes", "address_is_local", True),
    ("local no", "address_is_local", False),
    ("tcp open", "tcp", "open"),
    ("tcp refused", "tcp", "refused"),
    ("tcp-error TimeoutError: timed out", "tcp", "error: TimeoutError: timed out"),
    ("version-error PackageNotFoundError", "version_error", "PackageNotFoundError"),
])
def test_each_probe_line_becomes_its_fact(line: str, field: str, value: object) -> None:
    assert getattr(parse_probe(line + "\n", 0.0), field) == value


def test_a_missing_line_is_unknown_not_a_guess() -> None:
    p = parse_probe("clock garbage\n", 0.0)
    assert p.clock_skew_s is None and p.sglang_version is None and p.tcp is None and p.resolves_to is None


@pytest.mark.parametrize("addr", ["10.0.0.1", "10.0.0.1:99999", "-oProxy=x:5000", ":5000", ""])
def test_only_host_colon_port_is_a_dist_init_addr(addr: str) -> None:
    assert split_addr(addr) is None


def test_the_probe_from_the_node_sees_an_open_and_a_refused_port() -> None:
    async def run() -> tuple[object, object]:
        t = LocalTransport()
        with socket.socket() as srv:
            srv.bind(("127.0.0.1", 0))
            srv.listen(1)
            port = srv.getsockname()[1]
            opened = await probe_node(t, sys.executable, f"127.0.0.1:{port}")
        refused = await probe_node(t, sys.executable, f"127.0.0.1:{port}")
        await t.close()
        return opened, refused

    opened, refused = asyncio.run(run())
    assert opened.tcp == "open" and opened.resolves_to == "127.0.0.1" and opened.address_is_local is True
    assert refused.tcp == "refused"
    assert opened.clock_skew_s is not None and abs(opened.clock_skew_s) < 60


def test_a_hostile_dist_init_addr_is_data_for_the_probe_never_shell(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    addr = f"$(touch {marker}):5000"
    script = probe_script(sys.executable, addr)

    async def run() -> object:
        t = LocalTransport()
        p = await probe_node(t, sys.executable, addr)
        await t.close()
        return p

    p = asyncio.run(run())
    assert not marker.exists()
    assert p.resolve_error is not None and "touch" not in script.split("-c", 1)[0]


def test_a_hung_probe_is_killed_on_the_host_and_said(tmp_path: Path) -> None:
    hang = tmp_path / "python"
    pidfile = tmp_path / "pid"
    hang.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 300\n")
    hang.chmod(0o755)

    async def run() -> object:
        t = LocalTransport()
        p = await probe_node(t, str(hang), "127.0.0.1:1", timeout_s=1.0)
        await t.close()
        return p

    p = asyncio.run(run())
    assert p.error is not None and "imeout" in p.error
    pid = int(pidfile.read_text())
    import os
    import time

    deadline = time.time() + 30
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        assert time.time() < deadline, "the hung probe outlived its timeout on the host"
        time.sleep(0.05)


def test_the_probe_asks_the_nodes_server_port_on_its_loopback() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Ok(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200 if self.path == "/health" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    srv = HTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=srv.serve_forever, daemon=True).start()

    async def run() -> tuple[object, object]:
        t = LocalTransport()
        up = await probe_node(t, sys.executable, None, server_port=srv.server_address[1])
        srv.shutdown()
        srv.server_close()
        down = await probe_node(t, sys.executable, None, server_port=srv.server_address[1])
        await t.close()
        return up, down

    up, down = asyncio.run(run())
    assert up.health == 200 and down.health is None
