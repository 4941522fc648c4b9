"""The simulated SGLang's multi-node start (`--nnodes N --node-rank R --dist-init-addr HOST:PORT`):
stdlib only, imported by launch_server.py on the simulated host.

What real SGLang does (tests/data/sglang_multinode_real.json, with sources): every scheduler
process (one per TP rank) logs `Init torch distributed begin.`, then blocks in torch's rendezvous
at `tcp://<dist-init-addr>` until all `tp*pp` ranks have joined; rank 0 hosts the store. Then
torch's gloo prints `[Gloo] Rank r is connected to …` and SGLang `Init torch distributed ends. …`.
A node that never joins leaves rank 0 silent after its begin line until the store times out
(`DistStoreError: Timed out after N seconds waiting for clients. k/N clients joined.`). Node R of
N runs TP ranks `range(tp/N*R, tp/N*(R+1))`; a node of rank >= 1 serves no API, only a dummy
health server once its schedulers are ready.

Here the nodes meet the same way, over TCP at the dist-init-addr, but only on loopback: a
dist-init-addr that is not a loopback address is never listened on nor connected to (the
simulator never leaves this machine), so such a rendezvous waits and times out, as an
unreachable one does on real hosts. One TCP connection per node (not per rank) stands for it.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import time
from pathlib import Path

GO = b"go\n"


def local_ranks(tp: int, nnodes: int, node_rank: int) -> list[int]:
    """The TP ranks node `node_rank` runs (engine.py: tp_size_per_node = tp_size // nnodes)."""
    per_node = max(1, tp // max(1, nnodes))
    return list(range(per_node * node_rank, per_node * (node_rank + 1)))


def split_addr(addr: str) -> tuple[str, int] | None:
    host, _, port = (addr or "").rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_store(addr: tuple[str, int], nnodes: int, timeout_s: float) -> tuple[bool, int, list[socket.socket]]:
    """Rank 0: host the store until every other node has joined, then release them all.
    Returns (everyone joined, nodes joined counting this one, the nodes' connections, kept open
    for `barrier`)."""
    joined: dict[int, socket.socket] = {}
    deadline = time.time() + timeout_s
    if not is_loopback(addr[0]):
        time.sleep(max(0.0, deadline - time.time()))
        return False, 1, []
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        srv.bind(addr)
    except OSError:
        time.sleep(max(0.0, deadline - time.time()))
        return False, 1, []
    srv.listen(64)
    try:
        while len(joined) < nnodes - 1:
            left = deadline - time.time()
            if left <= 0:
                for conn in joined.values():
                    conn.close()
                return False, 1 + len(joined), []
            srv.settimeout(min(left, 0.5))
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                continue
            conn.settimeout(5.0)
            try:
                line = conn.makefile("rb").readline(32).strip()
                rank = int(line)
            except (OSError, ValueError):
                conn.close()
                continue
            if 0 < rank < nnodes and rank not in joined:
                joined[rank] = conn
            else:
                conn.close()
        for conn in joined.values():
            try:
                conn.sendall(GO)
            except OSError:
                pass
        return True, nnodes, list(joined.values())
    finally:
        srv.close()


def join_store(addr: tuple[str, int], node_rank: int, timeout_s: float) -> socket.socket | None:
    """Rank >= 1: connect to rank 0's store (retrying, as torch's client does) and wait for it.
    Returns the connection (kept open for `barrier`), None when the rendezvous timed out."""
    deadline = time.time() + timeout_s
    if not is_loopback(addr[0]):
        time.sleep(max(0.0, deadline - time.time()))
        return None
    while time.time() < deadline:
        try:
            conn = socket.create_connection(addr, timeout=1.0)
        except OSError:
            time.sleep(0.2)
            continue
        try:
            conn.sendall(f"{node_rank}\n".encode())
            conn.settimeout(max(0.1, deadline - time.time()))
            if conn.makefile("rb").readline(8) == GO:
                conn.settimeout(None)
                return conn
        except OSError:
            pass
        conn.close()
        time.sleep(0.2)
    return None


def barrier(conns: list[socket.socket], mine: socket.socket | None) -> None:
    """The first collective after init (the weights loaded on every rank): a node of rank >= 1
    says it is there; rank 0 waits for every node's word. A node that died never says it, and
    rank 0 hangs here without a line, as a real rank 0 hangs in its first collective."""
    if mine is not None:
        try:
            mine.sendall(b"loaded\n")
        except OSError:
            pass
        return
    for conn in conns:
        try:
            line = conn.makefile("rb").readline(16)
        except OSError:
            line = b""
        if not line:
            while True:
                time.sleep(3600)


def incomplete_download(model_path: str) -> str | None:
    """The first file a weight load would miss: a partial left by `hf download` (under
    .cache/huggingface/download/) or a shard the index names that is not there. None: complete."""
    root = Path(model_path or "")
    if not root.is_dir():
        return None
    partials = sorted((root / ".cache" / "huggingface" / "download").rglob("*.incomplete"))
    index = root / "model.safetensors.index.json"
    try:

        shards = sorted(set(json.loads(index.read_text()).get("weight_map", {}).values()))
    except (OSError, ValueError, AttributeError):
        shards = []
    for shard in shards:
        if not (root / shard).exists():
            return str(root / shard)
    return str(partials[0]) if partials else None
