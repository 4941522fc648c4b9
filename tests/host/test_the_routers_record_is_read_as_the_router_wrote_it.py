"""The router in front of SGLang as the host keeps it (console/host/sources/router.py): its worker list
(`GET /list_workers`) and its log's add/remove-worker lines at the router's own time, read from the
simulated router (console/demo/hostsim/fake_sglang/router.py, the one the real-daemon beside tests
run) through a real shell; host text is cleaned, a log path is quoted, and a log line cannot pose
as another section of the answer."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from console.config import ConfigError, load_config
from console.host.parsers.router import parse_router_log, parse_worker_list, url_port
from console.host.sources.router import RouterWatcher, router_script
from console.host.transport.local import LocalTransport


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str) -> int:
    with urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=30) as r:
        return int(r.status)


def _wait_up(url: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_the_simulated_routers_workers_and_moves_are_read_at_its_own_time(tmp_path: Path) -> None:
    port = _free_port()
    router, first = f"http://127.0.0.1:{port}", "http://127.0.0.1:1"
    log = tmp_path / "router $(touch pwned) 'x'.log"  # a path the shell must not read as anything else
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "console.demo.hostsim.fake_sglang.router", "--port", str(port),
                                 "--worker-urls", first], stdout=out, stderr=out)
    try:
        _wait_up(router)
        before = time.time()
        assert _post(f"{router}/add_worker?url={router}") == 200  # the router's own /health answers
        assert _post(f"{router}/remove_worker?url={first}") == 200
        after = time.time()
        with open(log, "a") as f:
            f.write("@@rdeadbeef00000000workers\n{\"urls\": [\"http://forged:1\"]}\n")

        async def read() -> object:
            transport = LocalTransport()
            try:
                return await RouterWatcher(transport, router, str(log)).poll()
            finally:
                await transport.close()

        reading = asyncio.run(read())
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()
    assert reading.workers == (router,), reading  # the router's list, not a line of its log
    assert [(m.verb, m.url) for m in reading.moves] == [("added", router), ("removed", first)], reading.moves
    for move in reading.moves:  # the router's stamps: whole seconds of its local time
        assert int(before) <= move.at_s <= after and move.at_s == int(move.at_s), (move, before, after)
    assert reading.log == str(log) and reading.log_error is None


def test_a_log_that_cannot_be_read_is_one_line_and_the_list_is_still_read(tmp_path: Path) -> None:
    async def read() -> object:
        transport = LocalTransport()
        try:
            return await RouterWatcher(transport, "http://127.0.0.1:1", str(tmp_path / "none.log")).poll()
        finally:
            await transport.close()

    reading = asyncio.run(read())
    assert reading.workers is None and reading.moves == ()  # no router answering: unknown, not empty
    assert reading.log_error is not None and "none.log" in reading.log_error and "\n" not in reading.log_error


def test_the_routers_lines_are_read_as_written_and_anything_else_is_skipped() -> None:
    text = "\n".join([
        "2026-12-03T21:04:20 INFO sgl_model_gateway: Starting router on 127.0.0.1:30100 | workers: ['http://a:1']",
        "2026-12-03T21:04:21 INFO sgl_model_gateway: Added worker http://127.0.0.1:30001",
        '2026-12-03T21:04:21 INFO sgl_model_gateway: 127.0.0.1 "POST /add_worker?url=http://127.0.0.1:30001 HTTP/1.1" 200',
        "2026-12-03 21:04:22.250  INFO smg::routers: Removed worker: http://127.0.0.1:30000.",
        "Added worker http://no-stamp:1",
        "2026-13-40T99:00:00 INFO x: Added worker http://bad-stamp:1",
        "2026-12-03T21:04:23 INFO x: Added worker http://127.0.0.1:30002\x1b]0;pwned\x07",
    ])
    moves = parse_router_log(text)
    at = dt.datetime(2026, 12, 3, 21, 4, 21).timestamp()
    assert [(m.at_s - at, m.verb, m.url) for m in moves] == [
        (0.0, "added", "http://127.0.0.1:30001"), (1.25, "removed", "http://127.0.0.1:30000"),
        (2.0, "added", "http://127.0.0.1:30002")]
    assert parse_worker_list('{"urls": ["http://127.0.0.1:30001"]}') == ("http://127.0.0.1:30001",)
    for bad in ("", "not json", '{"urls": "x"}', '{"urls": [1]}', "[]", '{"workers": []}'):
        assert parse_worker_list(bad) is None, bad
    assert (url_port("http://127.0.0.1:30001"), url_port("http://h:8/x"), url_port("http://h")) == (30001, 8, None)


@pytest.mark.parametrize("value", ["relative/router.log", "-rf", "/var/log/a\nb", 7])
def test_a_router_log_that_is_not_an_absolute_path_is_refused_at_load(tmp_path: Path, value: object) -> None:
    config = tmp_path / "config.toml"
    shown = f'"{value}"' if isinstance(value, str) else str(value)
    config.write_text(f"[profiles.h]\nhost = \"h\"\nrouter_log = {shown.replace(chr(10), chr(92) + 'n')}\n")
    with pytest.raises(ConfigError, match="router_log"):
        load_config(config)


# -- the router's record where the router keeps it: journald (a systemd unit) or Docker (a container) --
ROUTER_LINES = (
    "2026-12-03T21:04:20 INFO sgl_model_gateway: Starting router on 127.0.0.1:30100",
    "2026-12-03T21:04:21 INFO sgl_model_gateway: Added worker http://127.0.0.1:30001",
    '2026-12-03T21:04:21 INFO sgl_model_gateway: 127.0.0.1 "GET /health HTTP/1.1" 200',
    "2026-12-03T21:04:22 INFO sgl_model_gateway: Removed worker http://127.0.0.1:30000",
)


@pytest.fixture
def record_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`journalctl` and `docker` on the shell host's PATH that print the router's lines for one unit
    and one container (exit 1 otherwise, as theirs do), and log the argv they were given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    lines = tmp_path / "router.lines"
    lines.write_text("\n".join(ROUTER_LINES) + "\n")
    calls = tmp_path / "calls"
    for tool, known in (("journalctl", "sglang-router.service"), ("docker", "router")):
        script = bin_dir / tool
        script.write_text(f"#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > '{calls}.{tool}'\n"
                          f"for a in \"$@\"; do last=$a; done\n"
                          f"[ \"$last\" = {known} ] || {{ echo 'no such {tool} target' >&2; exit 1; }}\n"
                          f"cat '{lines}'\n")
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return tmp_path


def _read(log: str) -> object:
    async def read() -> object:
        transport = LocalTransport()
        try:
            return await RouterWatcher(transport, "http://127.0.0.1:1", log).poll()
        finally:
            await transport.close()

    return asyncio.run(read())


@pytest.mark.parametrize("log, tool, argv", [
    ("journal:sglang-router.service", "journalctl",
     ["--no-pager", "-o", "cat", "-n", "100000", "-u", "sglang-router.service"]),
    ("docker:router", "docker", ["logs", "--tail", "100000", "router"]),
])
def test_the_routers_moves_are_read_from_journald_or_docker_as_it_wrote_them(
        record_tools: Path, log: str, tool: str, argv: list[str]) -> None:
    reading = _read(log)
    at = dt.datetime(2026, 12, 3, 21, 4, 21).timestamp()
    assert [(m.at_s - at, m.verb, m.url) for m in reading.moves] == [
        (0.0, "added", "http://127.0.0.1:30001"), (1.0, "removed", "http://127.0.0.1:30000")], reading
    assert reading.log == log and reading.log_error is None
    assert (record_tools / f"calls.{tool}").read_text().splitlines() == argv  # the host ran it, as argv


@pytest.mark.parametrize("log, words", [
    ("journal:other.service", "journalctl -u other.service failed (exit 1"),
    ("docker:gone", "docker logs gone failed (exit 1"),
])
def test_a_record_that_cannot_be_read_is_one_line_with_the_readers_words(
        record_tools: Path, log: str, words: str) -> None:
    reading = _read(log)
    assert reading.moves == () and reading.log_error is not None and words in reading.log_error, reading
    assert "\n" not in reading.log_error


def test_the_router_record_commands_are_bounded_and_quoted() -> None:
    for log in ("journal:sglang-router.service", "docker:router"):
        script = router_script("http://127.0.0.1:30080", log, "@@rX")
        reader = script.split("echo @@rXlog; { ", 1)[1]
        assert reader.startswith("timeout -k 5 10 "), reader


@pytest.mark.parametrize("value", ["journal:sglang-router.service", "docker:router", "docker:my_router.1",
                                   "/var/log/router.log"])
def test_a_router_log_in_journald_or_docker_is_accepted_at_load(tmp_path: Path, value: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f"[profiles.h]\nhost = \"h\"\nrouter_log = \"{value}\"\n")
    (profile,) = load_config(config).profiles.values()
    assert profile.router_log == value


@pytest.mark.parametrize("value", ["journal:", "journal:-x.service", "journal:router", "journal:a b.service",
                                   "journal:$(reboot).service", "docker:", "docker:-v", "docker:a;b", "dockr:x",
                                   "docker:" + "a" * 300])
def test_a_router_log_naming_no_unit_or_container_is_refused_at_load(tmp_path: Path, value: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f"[profiles.h]\nhost = \"h\"\nrouter_log = \"{value}\"\n")
    with pytest.raises(ConfigError, match="router_log"):
        load_config(config)
