"""Malformed data from the host never stops a pane: bad lines are shown and counted, bad fields are
reported once and the rest of the reading kept (issue 15, items 4 and 10)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from console.host.parsers.sglang_log import parse_line
from console.host.sources.log import LogFollower, read_log_file
from console.host.transport import LocalTransport
from tests.kit.log import collect as _collect

BAD_BOOT_LINES = [
    "[2026-01-01 10:00:00 TP0] Load weight begin. avail mem=1.2.3 GB",
    "[2026-01-01 10:00:00 TP0] Load weight end. elapsed=1.2.3 s, type=Qwen, avail mem=7.7.7 GB",
    "[2026-01-01 10:00:00 TP0] max_total_num_tokens=" + "9" * 5000 + ", max_prefill_tokens=1, "
    "max_running_requests=2, context_len=3, available_gpu_mem=1.. GB",
    "[2026-01-01 10:00:00 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=.. GB",
]


def test_a_boot_line_with_a_malformed_number_is_shown_as_text_and_marked() -> None:
    for line in BAD_BOOT_LINES:
        event = parse_line(line)
        assert event.text == line
        assert event.kind in ("line", "boot")
        if event.kind == "line":
            assert "unparsed" in event.fields


async def test_log_following_goes_on_after_a_malformed_boot_line(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text("".join(line + "\n" for line in BAD_BOOT_LINES) + "[2026-01-01 10:00:01 TP0] after 1\n")
    transport = LocalTransport()
    try:
        follower = LogFollower(transport, log_file=str(log))
        seen = await _collect(follower, lambda s: any("after 1" in x for x in s))
        assert seen[:len(BAD_BOOT_LINES)] == BAD_BOOT_LINES
        with open(log, "a") as fh:
            fh.write("[2026-01-01 10:00:02 TP0] after 2\n")
        assert (await _collect(follower, lambda s: len(s) >= 1)) == ["[2026-01-01 10:00:02 TP0] after 2"]
        assert follower.tracker.summary().unparsed_lines >= 3
    finally:
        await transport.close()


async def test_read_log_file_counts_unparsed_lines(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("\n".join(BAD_BOOT_LINES) + "\n")
    summary = await read_log_file(str(log))
    assert summary.lines_seen == len(BAD_BOOT_LINES) and summary.unparsed_lines >= 3


def test_snapshot_log_file_with_a_malformed_line_prints_json_not_a_traceback(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("\n".join(BAD_BOOT_LINES) + "\n")
    out = subprocess.run([sys.executable, "-m", "console", "snapshot", "--log-file", str(log), "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert json.loads(out.stdout)["log"]["unparsed_lines"] >= 3


def test_a_corrupt_hub_cache_is_rebuilt_not_fatal(tmp_path: Path, monkeypatch) -> None:
    import pytest

    from console.host.hub import HubError, _cache_path, fetch_expected
    from tests.kit.download import FakeHub, small_plan

    monkeypatch.setenv("GPUCONSOLE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    path = _cache_path("Qwen/Tiny", "main")
    path.parent.mkdir(parents=True)
    for corrupt in (b"[1, 2]", b"\xff\xfe\x00binary", b'{"fetched_at": "x", "siblings": 3}', b"9" * 5000,
                    b'{"fetched_at": 1e999, "siblings": [1]}'):
        path.write_bytes(corrupt)
        monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:1")
        with pytest.raises(HubError, match="unreachable"):
            fetch_expected("Qwen/Tiny")
    import http.server
    import threading

    FakeHub.siblings = small_plan().hub_siblings()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        assert len(fetch_expected("Qwen/Tiny").shards) == 4
    finally:
        server.shutdown()
    assert json.loads(path.read_text())["siblings"], "the cache was rewritten with the Hub's answer"
