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

    def cost(fn: Callable[[], object]) -> float:
        t0 = time.thread_time_ns()
        for _ in range(N):
            try:
                fn()
            except pynvml.NVMLError:
                pass
        return round((time.thread_time_ns() - t0) / N / 1000, 2)

    sampler, delta = sampler_module.Sampler(pynvml, handles), sampler_module.Delta()
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
    out = {name: cost(fn) for name, fn in calls.items()}
    t0 = time.thread_time_ns()
    for _ in range(200):
        time.sleep(0.001)
    out["sleep wake-up (1 ms)"] = round((time.thread_time_ns() - t0) / 200 / 1000, 2)
    print(json.dumps({"driver": driver, "gpus": len(handles), "cpu_us_per_call": out}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
