"""nvidia-smi's CSV query output (`--format=csv,noheader,nounits`).

Real output (H200, driver 580) separates fields with ", "; `[N/A]` marks an unsupported field.
A GPU in trouble shows `[GPU requires reset]` or `[Unknown Error]` in its fields, or nvidia-smi
prints a free-text line such as "Unable to determine the device handle for GPU0000:3B:00.0:
Unknown Error". Such lines become problems; the healthy GPUs are kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from console.model import GpuDevice, GpuProcess

GPU_FIELDS = ("index", "name", "uuid", "memory.used", "memory.total", "utilization.gpu",
              "temperature.gpu", "power.draw", "power.limit")
APP_FIELDS = ("gpu_uuid", "pid", "process_name", "used_memory")


def query_gpu_command(interval_ms: int | None = None) -> str:
    loop = f" -lms {int(interval_ms)}" if interval_ms else ""
    return f"nvidia-smi --query-gpu={','.join(GPU_FIELDS)} --format=csv,noheader,nounits{loop}"


def query_apps_command() -> str:
    return f"nvidia-smi --query-compute-apps={','.join(APP_FIELDS)} --format=csv,noheader,nounits"


@dataclass(frozen=True, slots=True)
class GpuCsv:
    gpus: tuple[GpuDevice, ...]
    problems: tuple[str, ...]


def _na(value: str) -> bool:
    return value.startswith("[") and value.endswith("]") or value in ("", "N/A")


def _float(value: str) -> float | None:
    """A finite number, else None: `1e999`, `nan` and `١٢` (non-ASCII digits) are not readings."""
    if _na(value) or not value.isascii():
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _int(value: str) -> int | None:
    number = _float(value)
    return None if number is None else int(number)


def _ascii_digits(value: str) -> bool:
    return value.isascii() and value.isdigit() and len(value) < 10


def _field_error(fields: list[str]) -> str | None:
    for value in fields:
        if value.startswith("[") and value.endswith("]") and value != "[N/A]":
            return value.strip("[]")  # "GPU requires reset", "Unknown Error", "Insufficient Permissions"
    return None


def parse_gpu_line(line: str) -> GpuDevice | None:
    """One --query-gpu line with GPU_FIELDS, or None when the line is not one."""
    fields = [f.strip() for f in line.split(", ")]
    if len(fields) != len(GPU_FIELDS) or not _ascii_digits(fields[0]):
        return None
    index, name, uuid, used, total, util, temp, power, limit = fields
    return GpuDevice(
        index=int(index), name=name, uuid=None if _na(uuid) else uuid,
        memory_used_mib=_int(used), memory_total_mib=_int(total), utilization_pct=_int(util),
        temperature_c=_int(temp), power_w=_float(power), power_limit_w=_float(limit),
        error=_field_error(fields),
    )


def parse_gpu_csv(text: str) -> GpuCsv:
    gpus: list[GpuDevice] = []
    problems: list[str] = []
    for line_no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        gpu = parse_gpu_line(line)
        if gpu is None:
            problems.append(f"line {line_no}: {line[:200]}")
        else:
            gpus.append(gpu)
    return GpuCsv(tuple(gpus), tuple(problems))


def parse_compute_apps(text: str) -> tuple[dict[str, list[GpuProcess]], tuple[str, ...]]:
    """`--query-compute-apps`: processes by GPU uuid. Empty output means no processes."""
    by_uuid: dict[str, list[GpuProcess]] = {}
    problems: list[str] = []
    for line_no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        fields = [f.strip() for f in line.split(", ")]
        if len(fields) != 4 or not _ascii_digits(fields[1]):
            problems.append(f"apps line {line_no}: {line[:200]}")
            continue
        uuid, pid, name, mem = fields
        by_uuid.setdefault(uuid, []).append(GpuProcess(int(pid), name, _int(mem)))
    return by_uuid, tuple(problems)


def attach_processes(gpus: tuple[GpuDevice, ...], by_uuid: dict[str, list[GpuProcess]]) -> tuple[GpuDevice, ...]:
    return tuple(replace(g, processes=tuple(by_uuid.get(g.uuid or "", ()))) for g in gpus)
