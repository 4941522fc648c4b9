"""The NVML sampler's JSON lines (see `console.host.sources.nvml_sampler`)."""

from __future__ import annotations

import json
import math
from typing import Any

from console.model import GpuDevice, GpuProcess
from console.host.parsers import ParseError


def _opt_float(v: Any) -> float | None:
    """A finite number, else None (JSON's Infinity/NaN and huge ints are not readings)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    try:
        number = float(v)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _opt_int(v: Any) -> int | None:
    number = _opt_float(v)
    return None if number is None else int(number)


def parse_sampler_line(line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # JSONDecodeError, a 5,000-digit int, deep nesting
        raise ParseError(f"sampler: not JSON: {line[:120]!r}") from None
    if not isinstance(record, dict):
        raise ParseError(f"sampler: not an object: {line[:120]!r}")
    return record


def _index(item: Any) -> int | None:
    if isinstance(item, dict) and isinstance(item.get("index"), int) and not isinstance(item["index"], bool):
        return int(item["index"])
    return None


def merge_sample(last: dict[int, dict[str, Any]], record: dict[str, Any]) -> dict[str, Any]:
    """The whole sample again from the sampler's line of what changed (`nvml_sampler.Delta`):
    `last` holds each GPU as last known and is updated. A line without "delta" is whole; a GPU
    item with "delta" holds only its changed fields (one never seen before is taken as it is:
    its missing fields read unknown). Items that are not GPU records pass through, for
    `gpus_from_sample` to report."""
    items = record.get("gpus")
    if not isinstance(items, list):
        return record
    if not record.get("delta"):
        last.clear()
    strays: list[Any] = []
    for item in items:
        index = _index(item)
        if index is None:
            strays.append(item)
            continue
        if item.get("delta") and index in last:
            merged = {**last[index], **item}
            del merged["delta"]
            last[index] = merged
        else:
            last[index] = {k: v for k, v in item.items() if k != "delta"}
    return {**record, "gpus": [last[i] for i in sorted(last)] + strays}


def gpus_from_sample(record: dict[str, Any]) -> tuple[tuple[GpuDevice, ...], tuple[str, ...]]:
    gpus: list[GpuDevice] = []
    problems: list[str] = []
    items = record.get("gpus")
    if not isinstance(items, list):
        return (), (f"sampler: no GPU list in {str(record)[:120]}",)
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("index"), int) or isinstance(item["index"], bool):
            problems.append(f"sampler: bad GPU record {str(item)[:120]}")
            continue
        if "error" in item:
            gpus.append(GpuDevice(item["index"], "?", None, None, None, None, None, None, None,
                                  error=str(item["error"])))
            continue
        raw_procs = item.get("processes")
        if raw_procs is not None and not isinstance(raw_procs, list):
            problems.append(f"sampler: GPU {item['index']}: processes is {type(raw_procs).__name__}, not a list")
        procs = tuple(
            GpuProcess(p[0], str(p[1]), _opt_int(p[2]))
            for p in (raw_procs if isinstance(raw_procs, list) else [])
            if isinstance(p, list) and len(p) == 3 and isinstance(p[0], int) and not isinstance(p[0], bool)
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
