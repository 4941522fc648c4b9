"""Data that crosses layers: frozen, slotted dataclasses with units in the field names.

`None` means "not available"; it is shown as "–" and never guessed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Reading(Generic[T]):
    """What a source knows right now: the last good data and, if the last poll failed, why."""

    source: str
    data: T | None = None
    ok_at_s: float | None = None
    error: str | None = None
    error_at_s: float | None = None
    detail: str | None = None

    def age_s(self, now_s: float | None = None) -> float | None:
        if self.ok_at_s is None:
            return None
        return max(0.0, (time.time() if now_s is None else now_s) - self.ok_at_s)

    def is_stale(self, max_age_s: float, now_s: float | None = None) -> bool:
        age = self.age_s(now_s)
        return self.error is not None or age is None or age > max_age_s


@dataclass(frozen=True, slots=True)
class DiskUsage:
    """One filesystem as `df -P -B1 PATH` reports it."""

    path: str
    mount: str
    size_bytes: int
    used_bytes: int
    avail_bytes: int


@dataclass(frozen=True, slots=True)
class HostSummary:
    hostname: str
    kernel: str | None
    uptime_s: float | None
    load_1m: float | None
    load_5m: float | None
    load_15m: float | None
    cpus: int | None
    disks: tuple[DiskUsage, ...]


@dataclass(frozen=True, slots=True)
class GpuProcess:
    pid: int
    name: str
    memory_mib: int | None
    container: str | None = None  # the Docker container holding it (issue 26): what nvidia-smi cannot show


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """One GPU as nvidia-smi's --query-gpu reports it. Unsupported fields are None (shown as –)."""

    index: int
    name: str
    uuid: str | None
    memory_used_mib: int | None
    memory_total_mib: int | None
    utilization_pct: int | None
    temperature_c: int | None
    power_w: float | None
    power_limit_w: float | None
    processes: tuple[GpuProcess, ...] = ()
    error: str | None = None  # "GPU requires reset", "Unknown Error", ...
    lost_at_s: float | None = None  # missing from the samples since then: its values are the last seen

    @property
    def key(self) -> str:
        """What identifies this GPU across samples: its UUID, else its index (never a row position)."""
        return self.uuid or f"index:{self.index}"

    @property
    def memory_fraction(self) -> float | None:
        if self.memory_used_mib is None or not self.memory_total_mib:
            return None
        return self.memory_used_mib / self.memory_total_mib


@dataclass(frozen=True, slots=True)
class GpuStatus:
    """All GPUs of the host at one instant, with the path that read them."""

    source: str  # "nvml", "nvidia-smi-stream" or "nvidia-smi"
    gpus: tuple[GpuDevice, ...]
    problems: tuple[str, ...] = ()
    driver: str | None = None
    sampled_at_s: float | None = None
    # The last samples of memory use and utilization per GPU index, oldest first (0..1 and %).
    memory_history: tuple[tuple[float, ...], ...] = ()
    util_history: tuple[tuple[float, ...], ...] = ()
