"""The simulated SGLang's multi-node start (issue 37): the nodes meet over loopback TCP at the
--dist-init-addr, each logs SGLang's distributed-init lines for its own TP ranks (the lines of
tests/data/sglang_multinode_real.json), rank 0 serves only once every node has joined, a node of
rank >= 1 serves only SGLang's dummy health server, a node that never starts leaves rank 0 waiting,
and a node whose download is incomplete dies at the weight load."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REAL = json.loads((ROOT / "tests" / "data" / "sglang_multinode_real.json").read_text())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Node:
    def __init__(self, tmp: Path, rank: int, port: int, dist: str, model: Path, *, timeout_s: int = 600,
                 extra: tuple[str, ...] = ()) -> None:
        self.log = tmp / f"node{rank}.log"
        self.port = port
        env = {**os.environ, "PYTHONPATH": str(ROOT), "GPUSIM_SPEED": "20", "GPUSIM_ROOT": str(tmp)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "console.demo.hostsim.fake_sglang.launch_server", "--model-path", str(model),
             "--tp-size", "4", "--port", str(port), "--nnodes", "2", "--node-rank", str(rank),
             "--dist-init-addr", dist, "--dist-timeout", str(timeout_s), *extra],
            stdout=self.log.open("w"), stderr=subprocess.STDOUT, env=env, cwd=tmp)

    def text(self) -> str:
        return self.log.read_text()

    def wait_line(self, needle: str, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while needle not in self.text():
            assert time.time() < deadline, f"{needle!r} never came:\n{self.text()[-2000:]}"
            assert self.proc.poll() is None or needle in self.text(), self.text()[-2000:]
            time.sleep(0.05)

    def status(self, path: str) -> int | None:
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            c.request("GET", path)
            code = c.getresponse().status
            c.close()
            return code
        except OSError:
            return None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture
def model(tmp_path: Path) -> Path:
    m = tmp_path / "model"
    m.mkdir()
    (m / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                                                                "b": "model-00002-of-00002.safetensors"}}))
    for shard in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        (m / shard).write_bytes(b"\0")
    return m


def test_rank_zero_serves_only_once_every_node_has_joined_and_each_node_logs_its_own_ranks(tmp_path: Path,
                                                                                           model: Path) -> None:
    dist = f"127.0.0.1:{free_port()}"
    node0 = Node(tmp_path, 0, free_port(), dist, model)
    node1 = None
    try:
        node0.wait_line("TP1] " + REAL["init_begin"]["format"])
        assert node0.status("/health") is None  # nothing listens while rank 0 waits in the rendezvous
        assert "Init torch distributed ends" not in node0.text()
        node1 = Node(tmp_path, 1, free_port(), dist, model)
        node0.wait_line("The server is fired up and ready to roll!")
        node1.wait_line("Dummy health check server started in background thread at 127.0.0.1:")
        assert node0.status("/health") == 200
        assert node1.status("/health") == 200 and node1.status("/server_info") == 404
        # node 1 runs TP ranks 2 and 3 of 4 (engine.py's tp_size_per_node), node 0 ranks 0 and 1
        assert "TP2] Init torch distributed begin." in node1.text() and "TP0]" not in node1.text()
        assert "TP2]" not in node0.text()
        for r in (2, 3):
            assert f"[Gloo] Rank {r} is connected to 3 peer ranks. Expected number of connected peer ranks is : 3" \
                in node1.text()
        assert "Init torch distributed ends. elapsed=" in node0.text()
    finally:
        node0.stop()
        if node1 is not None:
            node1.stop()


def test_a_node_that_never_starts_leaves_rank_zero_waiting_until_the_store_times_out(tmp_path: Path,
                                                                                      model: Path) -> None:
    node0 = Node(tmp_path, 0, free_port(), f"127.0.0.1:{free_port()}", model, timeout_s=40)  # 2 s at speed 20
    try:
        assert node0.proc.wait(60) == 1
        text = node0.text()
        assert "Init torch distributed begin." in text and "Init torch distributed ends" not in text
        assert "DistStoreError: Timed out after 41 seconds waiting for clients. 1/2 clients joined." in text
        assert "Uvicorn running" not in text
    finally:
        node0.stop()


def test_a_node_whose_download_is_incomplete_dies_at_the_weight_load_and_rank_zero_never_serves(
        tmp_path: Path, model: Path) -> None:
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "model.safetensors.index.json").write_text((model / "model.safetensors.index.json").read_text())
    (partial / "model-00001-of-00002.safetensors").write_bytes(b"\0")
    dist = f"127.0.0.1:{free_port()}"
    node0 = Node(tmp_path, 0, free_port(), dist, model)
    node1 = Node(tmp_path, 1, free_port(), dist, partial)
    try:
        assert node1.proc.wait(60) == 1
        assert "FileNotFoundError: [Errno 2] No such file or directory:" in node1.text()
        assert "model-00002-of-00002.safetensors" in node1.text()
        node0.wait_line("Load weight end.")
        assert node0.proc.poll() is None  # hung in its first collective, as a real rank 0 is
        assert node0.status("/health") is None and "Uvicorn running" not in node0.text()
    finally:
        node0.stop()
        node1.stop()
