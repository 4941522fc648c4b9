"""`hf download REPO --local-dir DIR`, simulated: the same files, metadata and partial-file names,
renamed on completion. Files are sparse, so 250 GB costs no disk."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from console.host.parsers.hf_listing import short_hash

COMMIT = "7d1a5a4b0c7f3e9e1d2b4a6c8e0f1a3b5c7d9e1f"
REPO_ID = "Qwen/Qwen3.5-122B-A10B"  # the repo the story downloads (the simulated Hub serves its file list)
SHARDS = 39
GB = 10**9


def qwen122b_config() -> dict[str, object]:
    """The text-model fields the console reads (values from the model card; see research/qwen35_fit.md)."""
    return {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "model_type": "qwen3_5_moe",
        "tie_word_embeddings": False,
        "text_config": {
            "model_type": "qwen3_5_moe_text", "vocab_size": 248320, "hidden_size": 3072,
            "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 256,
            "full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
            "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 64,
            "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 1024,
            "shared_expert_intermediate_size": 1024, "max_position_embeddings": 262144,
            "mtp_num_hidden_layers": 1, "mamba_ssm_dtype": "float32", "dtype": "bfloat16",
            "rope_parameters": {"rope_theta": 10000000, "partial_rotary_factor": 0.25},
        },
        "dtype": "bfloat16",
    }


@dataclass
class RepoFile:
    path: str
    size: int
    sha256: str | None
    content: bytes | None = None  # small files get real content


def qwen122b_files() -> list[RepoFile]:
    files: list[RepoFile] = []
    sizes = [6_420_000_000 + ((i * 7919) % 97) * 1_000_000 for i in range(SHARDS - 1)]
    sizes.append(250_000_000_000 - sum(sizes) if sum(sizes) < 245 * GB else 3_100_000_000)
    header = 48_000
    weight_map: dict[str, str] = {}
    for i, size in enumerate(sizes, 1):
        name = f"model-{i:05d}-of-{SHARDS:05d}.safetensors"
        files.append(RepoFile(name, size, hashlib.sha256(name.encode()).hexdigest()))
        for t in ("mlp.experts.gate_up_proj", "mlp.experts.down_proj", "linear_attn.in_proj_qkvz"):
            weight_map[f"model.language_model.layers.{i}.{t}.weight"] = name
    weight_map["mtp.layers.0.mlp.experts.down_proj.weight"] = files[-1].path
    index = {"metadata": {"total_size": sum(sizes) - header * len(sizes)}, "weight_map": weight_map}
    small = {
        "config.json": json.dumps(qwen122b_config(), indent=2).encode(),
        "generation_config.json": b'{"do_sample": true, "temperature": 0.6, "top_p": 0.95, "top_k": 20}\n',
        "model.safetensors.index.json": json.dumps(index, indent=2).encode(),
        "tokenizer_config.json": b'{"model_max_length": 262144, "tokenizer_class": "Qwen2Tokenizer"}\n',
        "README.md": b"# Qwen3.5-122B-A10B (simulated by gpuconsole's hostsim)\n",
    }
    for name, content in small.items():
        files.append(RepoFile(name, len(content), None, content))
    files.append(RepoFile("tokenizer.json", 12_807_982, hashlib.sha256(b"tokenizer.json").hexdigest()))
    return sorted(files, key=lambda f: f.path)


@dataclass
class DownloadPlan:
    files: list[RepoFile] = field(default_factory=qwen122b_files)
    start_bytes: int = 37 * GB
    rate_bytes_per_s: float = 5.4 * GB  # time-compressed: the whole 250 GB in about 40 s
    stall: tuple[float, float] | None = None  # scenario seconds with no progress
    workers: int = 3
    new_naming: bool = True  # huggingface_hub >= 1.18: <short>.<etag>.<8hex>.incomplete
    tree_listing: bool = False  # huggingface_hub >= 1.22 keeps the commit's listing under .cache/huggingface/trees/
    header_bytes: int = 48_000  # each shard starts with a real safetensors header of this size (8 + JSON)

    def downloaded(self, t: float) -> float:
        moving = t
        if self.stall:
            a, b = self.stall
            moving = t - max(0.0, min(t, b) - a)
        return self.start_bytes + self.rate_bytes_per_s * max(0.0, moving)

    def progress(self, t: float) -> dict[str, int]:
        """Bytes of each large file at scenario time t (small files are there from the start)."""
        big = [f for f in self.files if f.content is None]
        lanes: list[list[RepoFile]] = [big[i::self.workers] for i in range(self.workers)]
        per_lane = self.downloaded(t) / self.workers
        out: dict[str, int] = {}
        for lane in lanes:
            budget = per_lane
            for f in lane:
                got = int(min(f.size, max(0.0, budget)))
                if got:
                    out[f.path] = got
                budget -= f.size
                if budget <= 0:
                    break
        return out

    def hub_siblings(self) -> list[dict[str, object]]:
        return [{"rfilename": f.path, "size": f.size,
                 "lfs": {"size": f.size, "sha256": f.sha256, "pointerSize": 134} if f.sha256 else None}
                for f in self.files]


class LocalDirDownloader:
    def __init__(self, model_dir: Path, plan: DownloadPlan, clock: Callable[[], float],
                 lfs_manifest: Path | None = None) -> None:
        self.dir = model_dir
        self.lfs_manifest = lfs_manifest
        self.plan = plan
        self.clock = clock
        self._suffix = {f.path: secrets.token_hex(4) for f in plan.files}
        self.meta_dir = model_dir / ".cache" / "huggingface" / "download"

    def _incomplete(self, f: RepoFile) -> Path:
        folder = self.meta_dir / os.path.dirname(f.path)
        base = f"{short_hash(os.path.basename(f.path))}.{f.sha256}"
        name = f"{base}.{self._suffix[f.path]}.incomplete" if self.plan.new_naming else f"{base}.incomplete"
        return folder / name

    def _metadata(self, f: RepoFile) -> None:
        meta = self.meta_dir / f"{f.path}.metadata"
        meta.parent.mkdir(parents=True, exist_ok=True)
        meta.write_text(f"{COMMIT}\n{f.sha256 or hashlib.sha1(f.content or b'').hexdigest()}\n{time.time()}\n")

    def _header(self, f: RepoFile) -> bytes:
        """A valid safetensors header for a file of `f.size` bytes: 8-byte length, JSON padded with
        spaces (as the safetensors library pads it), one tensor covering the rest of the file."""
        n = self.plan.header_bytes - 8
        body = json.dumps({"__metadata__": {"format": "pt"},
                           "weight": {"dtype": "U8", "shape": [f.size - 8 - n], "data_offsets": [0, f.size - 8 - n]}},
                          separators=(",", ":")).encode()
        return n.to_bytes(8, "little") + body.ljust(n, b" ")

    def tree_listing(self) -> dict[str, object]:
        """What huggingface_hub's `write_tree_cache` writes (format_version 1)."""
        files: dict[str, object] = {}
        for f in sorted(self.plan.files, key=lambda x: x.path):
            info: dict[str, object] = {"size": f.size, "blob_id": hashlib.sha1(f.path.encode()).hexdigest()}
            if f.sha256:
                info.update(lfs_sha256=f.sha256, lfs_size=f.size)
            files[f.path] = info
        return {"format_version": 1, "files": files}

    def prepare(self) -> None:
        if self.lfs_manifest is not None:
            # What the simulated `sha256sum` may answer for LFS files it cannot afford to hash.
            lfs = {os.path.basename(f.path): [f.size, f.sha256] for f in self.plan.files if f.sha256}
            self.lfs_manifest.write_text(json.dumps(lfs))
        cache = self.dir / ".cache" / "huggingface"
        self.meta_dir.mkdir(parents=True, exist_ok=True)
        (cache / ".gitignore").write_text("*\n")
        (cache / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
        if self.plan.tree_listing:
            (cache / "trees").mkdir(exist_ok=True)
            (cache / "trees" / f"{COMMIT}.json").write_text(json.dumps(self.tree_listing(), indent=1))
        for f in self.plan.files:
            if f.content is not None:
                (self.dir / f.path).write_bytes(f.content)
                self._metadata(f)

    def step(self) -> None:
        progress = self.plan.progress(self.clock())
        for f in self.plan.files:
            if f.content is not None or f.path not in progress:
                continue
            got = progress[f.path]
            final = self.dir / f.path
            if final.exists():
                continue
            partial = self._incomplete(f)
            partial.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(partial, os.O_RDWR | os.O_CREAT, 0o644)  # not O_APPEND: pwrite must write at 0
            try:
                had = os.fstat(fd).st_size
                os.ftruncate(fd, got)  # sparse: no disk is used for the zeros
                header = self._header(f) if f.path.endswith(".safetensors") else b""
                if header and had < len(header) <= got:
                    os.pwrite(fd, header, 0)
            finally:
                os.close(fd)
            if got >= f.size:
                partial.rename(final)
                self._metadata(f)

    async def run(self, every_s: float = 0.2) -> None:
        self.prepare()
        while True:
            with contextlib.suppress(OSError):
                self.step()
            await asyncio.sleep(every_s)
