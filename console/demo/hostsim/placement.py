"""Which simulated GPUs each unit's server runs on (issue 24: an 8-GPU host where the old server
uses 4). Stdlib only. The GPU count is the scenario's ($GPUSIM_ROOT/.sim/gpus.json {"count": N});
a unit's GPUs are its `Environment=CUDA_VISIBLE_DEVICES=…` in its unit file, else the first four
(the story's TP4 server), as CUDA numbers them."""

from __future__ import annotations

import json
import re
from pathlib import Path

DEFAULT_GPUS = (0, 1, 2, 3)
CVD_RE = re.compile(r"^\s*Environment=.*?\bCUDA_VISIBLE_DEVICES=([0-9,]+)", re.M)


def gpu_count(root: Path, default: int) -> int:
    try:
        return int(json.loads((root / ".sim" / "gpus.json").read_text())["count"])
    except (OSError, ValueError, KeyError, TypeError):
        return default


def set_gpu_count(root: Path, count: int) -> None:
    (root / ".sim" / "gpus.json").write_text(json.dumps({"count": int(count)}))


def unit_gpus(root: Path, unit: str) -> tuple[int, ...]:
    try:
        text = (root / "etc" / "systemd" / "system" / unit).read_text()
    except OSError:
        return DEFAULT_GPUS
    m = CVD_RE.search(text)
    if not m:
        return DEFAULT_GPUS
    return tuple(int(x) for x in m.group(1).split(",") if x)
