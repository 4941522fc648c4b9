"""(On a GPU host) the CPU of each NVML call the GPU sampler makes, in the calling thread, and of a whole sample.

`python3 benchmarks/gpu_sampler_calls.py console/host/sources/nvml_sampler.py` on the host: set beside
`gpu_sampler_cost.py`'s whole-process figure, it says how much of a sample is NVML and Python in the
sampler's own thread, and so how much is the process's wake-up and the kernel (under gVisor, the NVML
ioctls' round trips). Stdlib and pynvml only.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from collections.abc import Callable
from typing import Any

N = 2000


def main() -> int:
    spec = importlib.util.spec_from_file_location("sampler", sys.argv[1])
    assert spec is not None and spec.loader is not None
    sampler_module: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sampler_module)
    pynvml, handles, driver = sampler_module.open_nvml()
    h = handles[0]

    def schedstat() -> int:
        try:
            with open("/proc/self/schedstat") as fh:
                return int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            return 0

    def cost(fn: Callable[[], object]) -> dict[str, float]:
        """Per call: the thread's CPU, the process's (every thread) and the kernel's schedstat of
        the process (what gpu_sampler_cost.py reads from outside)."""
        t0, p0, s0 = time.thread_time_ns(), time.process_time_ns(), schedstat()
        for _ in range(N):
            try:
                fn()
            except pynvml.NVMLError:
                pass
        t1, p1, s1 = time.thread_time_ns(), time.process_time_ns(), schedstat()
        return {"thread": round((t1 - t0) / N / 1000, 2), "process": round((p1 - p0) / N / 1000, 2),
                "schedstat": round((s1 - s0) / N / 1000, 2) if s0 else None}

    sampler, delta = sampler_module.Sampler(pynvml, handles), sampler_module.Delta()
    try:  # a sampler that reads the slow fields on their own clock, as on the host at 1 s
        clocked = sampler_module.Sampler(pynvml, handles, interval_s=1.0)
    except TypeError:
        clocked = None
    encode = json.JSONEncoder(separators=(",", ":")).encode
    calls = {
        "memory_v2": lambda: pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2),
        "utilization": lambda: pynvml.nvmlDeviceGetUtilizationRates(h),
        "power": lambda: pynvml.nvmlDeviceGetPowerUsage(h),
        "power_limit": lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(h),
        "temperature": lambda: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
        "processes": lambda: pynvml.nvmlDeviceGetComputeRunningProcesses(h),
        "whole sample()": sampler.sample,
        "sample+delta+encode": lambda: encode(delta.record(sampler.sample())),
    }
    if clocked is not None:
        calls["sample() on a 1 s clock"] = clocked.sample
    out = {name: cost(fn) for name, fn in calls.items()}
    global N
    N = 200
    out["sleep wake-up (1 ms)"] = cost(lambda: time.sleep(0.001))
    print(json.dumps({"driver": driver, "gpus": len(handles), "cpu_us_per_call": out}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
