"""How often NVML's utilization and power values move on this GPU, under a duty-cycled load."""
import json, statistics, subprocess, sys, time
import pynvml
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
LOAD = r'''
import torch, time, sys
a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda:0"); b = a.clone()
torch.cuda.synchronize(); print("ready", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    t = time.time()
    while time.time() - t < 0.3:
        c = a @ b; torch.cuda.synchronize()
    time.sleep(0.5)
'''
out = {}
p = None
try:
    p = subprocess.Popen([sys.executable, "-c", LOAD, "12"], stdout=subprocess.PIPE, text=True)
    out["load"] = p.stdout.readline().strip()
except Exception as e:
    out["load"] = repr(e)
def changes(fn, seconds=8.0, hz=200):
    seen, last, t0 = [], object(), time.monotonic()
    while time.monotonic() - t0 < seconds:
        v = fn()
        if v != last:
            seen.append((round(time.monotonic() - t0, 4), v)); last = v
        time.sleep(1 / hz)
    gaps = [b[0] - a[0] for a, b in zip(seen, seen[1:])]
    return {"changes": len(seen), "median_gap_s": statistics.median(gaps) if gaps else None,
            "min_gap_s": min(gaps) if gaps else None, "first": seen[:40]}
import threading
res = {}
def run(name, fn):
    res[name] = changes(fn)
ts = [threading.Thread(target=run, args=(n, f)) for n, f in [
    ("util", lambda: pynvml.nvmlDeviceGetUtilizationRates(h).gpu),
    ("power", lambda: pynvml.nvmlDeviceGetPowerUsage(h)),
    ("power_instant", lambda: pynvml.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_POWER_INSTANT])[0].value.uiVal),
]]
for t in ts: t.start()
for t in ts: t.join()
out.update(res)
for name, kind in (("util_samples", pynvml.NVML_GPU_UTILIZATION_SAMPLES), ("power_samples", pynvml.NVML_TOTAL_POWER_SAMPLES)):
    try:
        typ, samples = pynvml.nvmlDeviceGetSamples(h, kind, 0)
        stamps = [s.timeStamp for s in samples]
        gaps = sorted(b - a for a, b in zip(stamps, stamps[1:]))
        out[name] = {"n": len(stamps), "median_gap_us": statistics.median(gaps) if gaps else None,
                     "gaps_us": gaps[:10] + gaps[-5:]}
    except Exception as e:
        out[name] = repr(e)
try:
    out["arch"] = pynvml.nvmlDeviceGetArchitecture(h)
except Exception as e:
    out["arch"] = repr(e)
if p:
    p.wait(timeout=30)
print(json.dumps(out, indent=1, default=str))
