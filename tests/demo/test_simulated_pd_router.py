"""The simulated prefill/decode router (issue 37): the real router's command line
(`--pd-disaggregation --prefill URL [BOOTSTRAP_PORT] --decode URL`), its first log line, and a
/health that is 200 only while every prefill and decode worker answers."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.demo.hostsim.fake_sglang.pd_router import parse

ROOT = Path(__file__).resolve().parents[2]


def test_the_router_takes_prefill_urls_with_their_bootstrap_port_as_the_real_one_does() -> None:
    args = parse(["--pd-disaggregation", "--prefill", "http://127.0.0.1:30000", "8998",
                  "--prefill", "http://127.0.0.2:30000", "--decode", "http://127.0.0.1:30001"])
    assert args.prefill_urls == [("http://127.0.0.1:30000", 8998), ("http://127.0.0.2:30000", None)]
    assert args.decode_urls == ["http://127.0.0.1:30001"]
    with pytest.raises(SystemExit) as bad:
        parse(["--pd-disaggregation", "--prefill", "http://127.0.0.1:30000", "eight"])
    assert bad.value.code == 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def health(port: int) -> int | None:
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/health")
        code = c.getresponse().status
        c.close()
        return code
    except OSError:
        return None


def wait(predicate: object, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.time() < deadline, "condition never held"
        time.sleep(0.05)


def test_the_router_is_healthy_only_while_both_sides_answer(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GPUSIM_BOOTED": "1", "GPUSIM_ROOT": str(tmp_path)}
    p_port, d_port, r_port = free_port(), free_port(), free_port()
    procs = []
    try:
        for mode, port in (("prefill", p_port), ("decode", d_port)):
            procs.append(subprocess.Popen([sys.executable, "-m", "console.demo.hostsim.fake_sglang.launch_server",
                                           "--model-path", str(tmp_path), "--port", str(port),
                                           "--disaggregation-mode", mode], env=env, cwd=tmp_path,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        log = tmp_path / "router.log"
        procs.append(subprocess.Popen([sys.executable, "-m", "console.demo.hostsim.fake_sglang.pd_router",
                                       "--pd-disaggregation", "--prefill", f"http://127.0.0.1:{p_port}", "8998",
                                       "--decode", f"http://127.0.0.1:{d_port}", "--host", "0.0.0.0",
                                       "--port", str(r_port)], env=env, cwd=tmp_path, stdout=log.open("w"),
                                      stderr=subprocess.STDOUT))
        wait(lambda: health(r_port) == 200)
        first = log.read_text().splitlines()[0]
        assert "INFO smg::server:" in first and "Starting router on 0.0.0.0:" in first
        assert f'mode: PrefillDecode {{ prefill_urls: [("http://127.0.0.1:{p_port}", Some(8998))]' in first
        procs[1].terminate()
        procs[1].wait(10)
        wait(lambda: health(r_port) == 503)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(10)
