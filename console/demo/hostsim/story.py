"""The seeds' swap as a timeline of scenario seconds (the demo plays it at 1 s per second).

Every simulated tool derives what it shows from `t` alone, so they agree with one another.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GIB = 1024  # MiB

# The story's names on the host
MODEL_DIR = "/shared/models/Qwen3.5-122B-A10B"
OLD_MODEL_DIR = "/data/models/Qwen3.5-397B-A17B-NVFP4"
NEW_UNIT = "sglang-qwen122b.service"
OLD_UNIT = "sglang-qwen397b.service"
NEW_CONTAINER = "sglang-qwen122b"  # --demo-scenario docker: the same services as containers (issue 26)
OLD_CONTAINER = "sglang-qwen397b"

# Timeline (scenario seconds)
T_DOWNLOAD_END = 40.0
T_OLD_STOP = 45.0
T_DRAINED = 48.0
T_NEW_START = 50.0
T_WEIGHTS_BEGIN = 54.0
T_WEIGHTS_END = 64.0
T_KV_ALLOC = 66.0
T_GRAPH_BEGIN = 67.0
T_GRAPH_END = 72.0
T_READY = 75.0

GPU_COUNT = 4
GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
GPU_TOTAL_MIB = 97887
POWER_LIMIT_W = 600.0
CONTEXT_MIB = 612
OLD_USED_MIB = 91_204
WEIGHTS_MIB = 59_412  # ~58 GiB of BF16 weights per GPU at TP4
AFTER_KV_MIB = 84_350  # weights + GDN state + verification buffers + KV (see analysis/fit.py)
AFTER_GRAPHS_MIB = 85_970
OLD_PID_BASE = 41_200
NEW_PID_BASE = 52_300


@dataclass(frozen=True)
class SimGpu:
    index: int
    uuid: str
    used_mib: int
    util_pct: int
    temp_c: int
    power_w: float
    processes: tuple[tuple[int, str, int], ...]


def _ramp(t: float, t0: float, t1: float, a: float, b: float) -> float:
    if t <= t0:
        return a
    if t >= t1:
        return b
    return a + (b - a) * (t - t0) / (t1 - t0)


def new_service_phase(t: float) -> str:
    if t < T_NEW_START:
        return "stopped"
    if t < T_WEIGHTS_BEGIN:
        return "starting"
    if t < T_WEIGHTS_END:
        return "loading weights"
    if t < T_GRAPH_BEGIN:
        return "allocating KV cache"
    if t < T_GRAPH_END:
        return "capturing CUDA graphs"
    if t < T_READY:
        return "warming up"
    return "ready"


def traffic(t: float) -> float:
    """Load on the serving model, 0..1: a slow swell, never quite idle while serving."""
    return 0.45 + 0.35 * math.sin(t / 9.0) + 0.1 * math.sin(t / 2.3)


def gpu_states(t: float) -> tuple[SimGpu, ...]:
    gpus = []
    for i in range(GPU_COUNT):
        jitter = (i * 37) % 11
        if t < T_OLD_STOP:
            used = OLD_USED_MIB + jitter
            util = int(100 * max(0.0, min(1.0, traffic(t + i))))
            procs = ((OLD_PID_BASE + i, f"sglang::scheduler_TP{i}", used - 520),)
        elif t < T_NEW_START:
            used = int(_ramp(t, T_OLD_STOP, T_DRAINED, OLD_USED_MIB, 0))
            util = 0
            procs = ((OLD_PID_BASE + i, f"sglang::scheduler_TP{i}", max(0, used - 520)),) if used > 0 else ()
        else:
            if t < T_WEIGHTS_BEGIN:
                used = CONTEXT_MIB
            elif t < T_WEIGHTS_END:
                used = int(_ramp(t, T_WEIGHTS_BEGIN, T_WEIGHTS_END, CONTEXT_MIB, CONTEXT_MIB + WEIGHTS_MIB))
            elif t < T_KV_ALLOC:
                used = CONTEXT_MIB + WEIGHTS_MIB
            elif t < T_GRAPH_BEGIN:
                used = AFTER_KV_MIB
            else:
                used = int(_ramp(t, T_GRAPH_BEGIN, T_GRAPH_END, AFTER_KV_MIB, AFTER_GRAPHS_MIB))
            used += jitter
            busy = 0.9 if T_GRAPH_BEGIN <= t < T_READY else traffic(t + i) if t >= T_READY else 0.05
            util = int(100 * max(0.0, min(1.0, busy)))
            procs = ((NEW_PID_BASE + i, f"sglang::scheduler_TP{i}", used - 520),)
        temp = int(36 + util * 0.34 + i)
        power = round(88.0 + util * 4.6 + i * 1.7, 2)
        uuid = f"GPU-5f0c{i:04x}-9d4e-43b1-a7c2-1b8e3f6d{i:04x}"
        gpus.append(SimGpu(i, uuid, used, util, temp, power, procs))
    return tuple(gpus)
