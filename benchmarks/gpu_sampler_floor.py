"""A stand-in for the GPU sampler with no NVML: the header, then one 75-byte line per interval in one
write(2), the same sleep. Run by `benchmarks/gpu_sampler_cost.py --sampler floor=benchmarks/gpu_sampler_floor.py`,
it is the floor of a Python process that wakes and writes each sample: what is left of the sampler above
it is the NVML calls."""

import json
import os
import sys
import time

interval = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
os.write(1, b'{"driver":"none","count":1}\n')
line = (json.dumps({"t": 0, "gpus": [{"index": 0, "power_w": 118.7, "delta": 1}], "delta": 1}) + "\n").encode()
while True:
    started = time.perf_counter()
    os.write(1, line)
    time.sleep(max(0.0, interval - (time.perf_counter() - started)))
