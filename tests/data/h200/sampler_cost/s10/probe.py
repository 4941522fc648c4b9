"""Whole-process CPU, minor faults and context switches per sample of sampler variants (interleaved)."""
import json, os, subprocess, sys, time
from pathlib import Path
def stat(pid):
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ns = int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    st = dict(l.split(":\t") for l in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in l)
    return ns, int(f[7]), int(st["voluntary_ctxt_switches"].strip()), int(st["nonvoluntary_ctxt_switches"].strip())
interval, warm, window, rounds = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
variants = [a.split("=", 2) for a in sys.argv[5:]]  # label=ENV=path  (ENV like PYTHONMALLOC:malloc or -)
out = {}
for r in range(rounds):
    for label, envs, path in variants:
        env = dict(os.environ)
        if envs != "-":
            k, v = envs.split(":"); env[k] = v
        p = subprocess.Popen(["python3", "-u", "-c", Path(path).read_text(), str(interval)], stdout=subprocess.DEVNULL, env=env)
        time.sleep(warm); a = stat(p.pid); t0 = time.monotonic()
        time.sleep(window); b = stat(p.pid); t1 = time.monotonic()
        p.kill(); p.wait()
        n = (t1 - t0) / interval
        row = {"cpu_us": round((b[0] - a[0]) / 1e3 / n, 1), "minflt": round((b[1] - a[1]) / n, 2),
               "vcs": round((b[2] - a[2]) / n, 2), "nvcs": round((b[3] - a[3]) / n, 2)}
        out.setdefault(label, []).append(row); print(r, label, row, flush=True)
print(json.dumps(out))
