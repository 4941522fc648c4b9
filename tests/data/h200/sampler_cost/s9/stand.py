"""Stand-in samplers, one NVML call set each: which part of a sample's whole-process cost is what."""
import json, os, sys, time
mode = os.environ.get("STAND", "init")
interval = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
import pynvml
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
os.write(1, b'{"driver":"x","count":1}\n')
line = (json.dumps({"t": 0, "gpus": [{"index": 0, "power_w": 118.7, "delta": 1}], "delta": 1}) + "\n").encode()
nxt = time.monotonic()
while True:
    if mode in ("mem", "mem_util", "three"):
        pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    if mode in ("mem_util", "three"):
        pynvml.nvmlDeviceGetUtilizationRates(h)
    if mode == "three":
        pynvml.nvmlDeviceGetPowerUsage(h)
    os.write(1, line)
    nxt += interval
    d = nxt - time.monotonic()
    if d > 0:
        time.sleep(d)
