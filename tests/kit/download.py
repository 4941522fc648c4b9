"""Shared test kit: moved from test_download.py so that no test imports another test module."""

from __future__ import annotations

import ctypes
import http.server
import json
from pathlib import Path

from console.domain.analysis.download import DownloadProgress
from console.demo.hostsim.downloader import DownloadPlan, RepoFile
from console.host.sources.download import DownloadWatcher
from console.host.transport import LocalTransport


def small_plan(**kw: object) -> DownloadPlan:
    files = [RepoFile(f"model-{i:05d}-of-00004.safetensors", 1_000_000, f"{i:064x}") for i in range(1, 5)]
    files.append(RepoFile("config.json", 2, None, b"{}"))
    index = {"metadata": {"total_size": 3_999_000}, "weight_map": {f"w{i}": f.path for i, f in enumerate(files[:4])}}
    files.append(RepoFile("model.safetensors.index.json", 0, None, json.dumps(index).encode()))
    files[-1].size = len(files[-1].content or b"")
    values: dict[str, object] = dict(files=files, start_bytes=0, rate_bytes_per_s=1_000_000.0, workers=2)
    values.update(kw)
    return DownloadPlan(**values)  # type: ignore[arg-type]


class FakeHub(http.server.BaseHTTPRequestHandler):
    """The Hub's model_info endpoint on loopback: one repo, everything else 404 RepoNotFound."""

    siblings: list[dict[str, object]] = []

    def do_GET(self) -> None:  # noqa: N802
        if self.path.startswith("/api/models/Qwen/Tiny"):
            body = json.dumps({"id": "Qwen/Tiny", "sha": "abc", "siblings": self.siblings}).encode()
            self.send_response(200)
        else:
            body = b'{"error": "Repository not found"}'
            self.send_response(404)
            self.send_header("X-Error-Code", "RepoNotFound")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def write_safetensors(path: Path, tensors: dict[str, int]) -> int:
    """A real file written by the safetensors library (name -> byte count of a uint8 tensor)."""
    from safetensors import TensorSpec, serialize_file

    buffers = {name: ctypes.create_string_buffer(n) for name, n in tensors.items()}
    specs = {name: TensorSpec(dtype="uint8", shape=[n], data_ptr=ctypes.addressof(buffers[name]), data_len=n)
             for name, n in tensors.items()}
    serialize_file(specs, str(path), {"format": "pt"})
    return path.stat().st_size


def model_dir(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    sizes = {"config.json": 2}
    weight_map = {}
    for i in (1, 2):
        name = f"model-0000{i}-of-00002.safetensors"
        sizes[name] = write_safetensors(model / name, {f"layer{i}.a": 4096, f"layer{i}.b": 1000 + i})
        weight_map[f"layer{i}.a"] = weight_map[f"layer{i}.b"] = name
    index = json.dumps({"metadata": {"total_size": 4096 * 2 + 2003}, "weight_map": weight_map})
    (model / "model.safetensors.index.json").write_text(index)
    sizes["model.safetensors.index.json"] = len(index)
    return model, sizes


async def poll(model: Path) -> DownloadProgress:
    transport = LocalTransport()
    try:
        watcher = DownloadWatcher(transport, str(model), None)
        await watcher.poll()  # the first poll finds the shards; their headers ride along with the next
        return await watcher.poll()
    finally:
        await transport.close()
