"""How nvidia-smi turns NVML's bytes into MiB: NVML's byte counts beside nvidia-smi's MiB, for many
memory states of one GPU (holders of odd sizes started one after another).

Run on a GPU host (the project's lent H200):
    python3 benchmarks/gpu_rounding.py OUT_DIR
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

HOLD = """
import sys, torch
x = torch.empty(int(float(sys.argv[1]) * (1 << 20)), dtype=torch.uint8, device="cuda:0")
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.read()
"""


def smi() -> tuple[list[int], dict[int, int]]:
    gpu = subprocess.run("nvidia-smi --query-gpu=memory.used,memory.total,memory.free,memory.reserved "
                         "--format=csv,noheader,nounits -i 0", shell=True, capture_output=True, text=True).stdout
    apps = subprocess.run("nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits",
                          shell=True, capture_output=True, text=True).stdout
    return ([int(v) for v in gpu.split(", ")],
            {int(p): int(m) for p, m in (line.split(", ") for line in apps.splitlines() if line.strip())})


def main(out: Path) -> int:
    import pynvml

    out.mkdir(parents=True, exist_ok=True)
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    rows = []
    holders = []
    sizes = [1, 37.3, 100.7, 513.1, 1000.5, 2049.9, 4097.3, 777.7, 3333.3, 12.5]
    for size in sizes:
        p = subprocess.Popen([sys.executable, "-c", HOLD, str(size)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
        assert p.stdout
        p.stdout.readline()
        holders.append(p)
        time.sleep(0.5)
        for _ in range(2):
            m2 = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
            m1 = pynvml.nvmlDeviceGetMemoryInfo(h)
            procs = {q.pid: q.usedGpuMemory for q in pynvml.nvmlDeviceGetComputeRunningProcesses(h)}
            (used, total, free, reserved), apps = smi()
            m2b = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
            rows.append({"size_mib": size, "v2": {"used": m2.used, "total": m2.total, "free": m2.free,
                                                  "reserved": m2.reserved},
                         "v2_after": {"used": m2b.used, "free": m2b.free},
                         "v1": {"used": m1.used, "total": m1.total, "free": m1.free},
                         "smi": {"used": used, "total": total, "free": free, "reserved": reserved},
                         "procs_bytes": {str(k): v for k, v in procs.items()},
                         "smi_procs_mib": {str(k): v for k, v in apps.items()}})
            time.sleep(0.3)
    for p in holders:
        assert p.stdin
        p.stdin.close()
        p.wait(30)
    (out / "rounding.json").write_text(json.dumps(rows, indent=1))

    def rule(b: int, mib: int) -> list[str]:
        x = b / (1 << 20)
        return [name for name, f in (("floor", int(x)), ("round", round(x)), ("ceil", -(-b // (1 << 20))))
                if f == mib]
    verdict = {"used_v2": [rule(r["v2"]["used"], r["smi"]["used"]) for r in rows],
               "used_v1": [rule(r["v1"]["used"], r["smi"]["used"]) for r in rows],
               "free_v2": [rule(r["v2"]["free"], r["smi"]["free"]) for r in rows],
               "total": [rule(r["v2"]["total"], r["smi"]["total"]) for r in rows],
               "procs": [rule(b, r["smi_procs_mib"].get(pid, -1)) for r in rows for pid, b in r["procs_bytes"].items()]}
    print(json.dumps(verdict))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))
