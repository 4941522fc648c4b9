"""Shared test kit: moved from test_core.py so that no test imports another test module."""

from __future__ import annotations

from console.model import GpuDevice, GpuStatus, Reading


def gpu(index: int, used: int, uuid: str | None = None, util: int = 50) -> GpuDevice:
    return GpuDevice(index, "NVIDIA H200", uuid or f"GPU-{index}", used, 143771, util, 40, 100.0, 700.0)


def gpu_reading(*gpus: GpuDevice, at: float = 100.0) -> Reading[GpuStatus]:
    return Reading("gpu", GpuStatus("nvml", tuple(gpus), sampled_at_s=at), at)
