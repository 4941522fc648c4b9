"""What the simulated GPUs hold follows the simulated server's own lifecycle (issue 24): each fake
SGLang server writes where it is ($GPUSIM_ROOT/.sim/lifecycle/<unit>.json: its GPUs from its own
CUDA_VISIBLE_DEVICES, each boot phase as it begins, in scenario seconds, and its end), and the
simulated nvidia-smi/NVML (console/demo/hostsim/drive.py) read it: a server started on GPUs 4,5,6,7
fills those as it boots (weights, KV, graphs, for as long as that server's phases really take),
a stopped or dead one frees them. Stdlib only (it runs inside the fake server and the fake tools).

The MiB levels are the story's (console/demo/hostsim/story.py), simulator parameters, never a
measurement of a real host."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

CONTEXT_MIB = 612  # a CUDA context per GPU before any weight (story.CONTEXT_MIB)
FULL_MIB = {"old": 91_204, "new": 85_970}  # each role's model when booted (story.OLD_USED_MIB, AFTER_GRAPHS_MIB)
WEIGHTS_SHARE = 59_412 / 85_970  # the weights' share of what the server holds (story.WEIGHTS_MIB)
KV_SHARE = 84_350 / 85_970  # weights and KV, before the graphs (story.AFTER_KV_MIB)


def path(root: Path, unit: str) -> Path:
    return root / ".sim" / "lifecycle" / f"{unit}.json"


def read(root: Path, unit: str) -> dict[str, Any] | None:
    try:
        data = json.loads(path(root, unit).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def gpus_from_env(env: dict[str, str], tp: int) -> list[int]:
    """CUDA's numbering: CUDA_VISIBLE_DEVICES when set (the server's rank r is on its r-th GPU),
    else the first `tp` GPUs."""
    cvd = env.get("CUDA_VISIBLE_DEVICES", "")
    if cvd.strip():
        out = [int(x) for x in cvd.split(",") if x.strip().isdigit()]
        if out:
            return out[:tp]
    return list(range(tp))


class Lifecycle:
    """Written by the fake server: one record per unit, replaced atomically at each change."""

    def __init__(self, env: dict[str, str], tp: int, *, weights_s: float, graphs_s: float, booted: bool) -> None:
        root, unit = env.get("GPUSIM_ROOT"), env.get("GPUSIM_UNIT")
        self.file = path(Path(root), unit) if root and unit else None
        self.start_wall = float(env.get("GPUSIM_START") or time.time())
        self.speed = float(env.get("GPUSIM_SPEED") or 1.0)
        self.record: dict[str, Any] = {"pid": os.getpid(), "gpus": gpus_from_env(env, tp), "tp": tp,
                                       "started_at_t": self.now_t(), "booted": booted, "phases": [],
                                       "weights_s": weights_s, "graphs_s": graphs_s, "ended_at_t": None}
        self._write()

    def now_t(self) -> float:
        return (time.time() - self.start_wall) * self.speed

    def phase(self, name: str) -> None:
        self.record["phases"].append([name, self.now_t()])
        self._write()

    def ended(self, why: str) -> None:
        self.record["ended_at_t"], self.record["ended"] = self.now_t(), why
        self._write()

    def _write(self) -> None:
        if self.file is None:
            return
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.file.with_name(f".{self.file.name}.{os.getpid()}")
            tmp.write_text(json.dumps(self.record))
            tmp.replace(self.file)
        except OSError:
            pass  # the simulated GPUs then fall back to the story's timeline


def memory_mib(record: dict[str, Any], role: str, t: float) -> int:
    """MiB the server holds on each of its GPUs at scenario time t, from its own phases."""
    full = FULL_MIB.get(role, FULL_MIB["new"])
    ended = record.get("ended_at_t")
    if t < float(record.get("started_at_t") or 0) or (ended is not None and t >= float(ended)):
        return 0
    if record.get("booted"):
        return full
    seen = {name: float(at) for name, at in record.get("phases") or () if at <= t}
    weights = int(full * WEIGHTS_SHARE)
    if "graphs done" in seen:
        return full
    if "graphs" in seen:
        kv = int(full * KV_SHARE)
        done = min(1.0, (t - seen["graphs"]) / max(0.001, float(record.get("graphs_s") or 1.0)))
        return int(kv + (full - kv) * done)
    if "caches" in seen:
        return int(full * KV_SHARE)
    if "weights loaded" in seen:
        return CONTEXT_MIB + weights
    if "weights loading" in seen:
        done = min(1.0, (t - seen["weights loading"]) / max(0.001, float(record.get("weights_s") or 1.0)))
        return int(CONTEXT_MIB + weights * done)
    return CONTEXT_MIB


__all__ = ["Lifecycle", "gpus_from_env", "memory_mib", "path", "read"]
