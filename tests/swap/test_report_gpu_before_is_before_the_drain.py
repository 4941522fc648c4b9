"""The report's "GPU before" is the GPUs as they were before the stop: a stop seen late (by a poll,
after the memory had begun to fall) is not allowed to pick a sample from the middle of its own
drain (the default demo's report said 81,680 MiB "before" where the old server held 91,204)."""

from __future__ import annotations

from console.model import GpuDevice, GpuStatus
from console.core.derive.swap_observer import before_the_drain as _before_the_drain


def _status(*used: int) -> GpuStatus:
    return GpuStatus("nvml", tuple(GpuDevice(i, "H20", f"GPU-{i}", u, 97887, 50, 40, 300.0, 700.0)
                                   for i, u in enumerate(used)))


def test_a_sample_taken_while_the_memory_falls_is_stepped_back_over() -> None:
    samples = [_status(91204, 91204), _status(91204, 91204), _status(86000, 85500), _status(81680, 81000)]
    assert _before_the_drain(samples) is samples[1]


def test_steady_or_rising_memory_keeps_the_last_sample() -> None:
    steady = [_status(91204, 91204), _status(91300, 91204)]
    assert _before_the_drain(steady) is steady[-1]
    wobble = [_status(91204, 91204), _status(90900, 91000)]  # under 1 GiB: noise, not a drain
    assert _before_the_drain(wobble) is wobble[-1]
