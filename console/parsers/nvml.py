"""The NVML sampler's JSON lines (see `console.sources.nvml_sampler`)."""

from __future__ import annotations

import json
from typing import Any

from console.model import GpuDevice, GpuProcess
from console.parsers import ParseError


def _opt_int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _opt_float(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def parse_sampler_line(line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        raise ParseError(f"sampler: not JSON: {line[:120]!r}") from None
    if not isinstance(record, dict):
        raise ParseError(f"sampler: not an object: {line[:120]!r}")
    return record


def gpus_from_sample(record: dict[str, Any]) -> tuple[tuple[GpuDevice, ...], tuple[str, ...]]:
    gpus: list[GpuDevice] = []
    problems: list[str] = []
    for item in record.get("gpus", []):
        if not isinstance(item, dict) or not isinstance(item.get("index"), int):
            problems.append(f"sampler: bad GPU record {str(item)[:120]}")
            continue
        if "error" in item:
            gpus.append(GpuDevice(item["index"], "?", None, None, None, None, None, None, None,
                                  error=str(item["error"])))
            continue
        procs = tuple(
            GpuProcess(int(p[0]), str(p[1]), _opt_int(p[2]))
            for p in item.get("processes", []) if isinstance(p, list) and len(p) == 3
        )
        gpus.append(GpuDevice(
            index=item["index"], name=str(item.get("name", "?")), uuid=item.get("uuid"),
            memory_used_mib=_opt_int(item.get("memory_used_mib")),
            memory_total_mib=_opt_int(item.get("memory_total_mib")),
            utilization_pct=_opt_int(item.get("utilization_pct")),
            temperature_c=_opt_int(item.get("temperature_c")),
            power_w=_opt_float(item.get("power_w")), power_limit_w=_opt_float(item.get("power_limit_w")),
            processes=procs,
        ))
    return tuple(gpus), tuple(problems)
