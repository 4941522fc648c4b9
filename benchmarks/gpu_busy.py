"""A busy GPU: utilization and a long process name, through the console's paths and nvidia-smi.

Run on a GPU host (the project's lent H200):
    python3 benchmarks/gpu_busy.py OUT_DIR

One torch process runs bf16 matmuls without pause (started through a long symlinked path, so
nvidia-smi's table has to shorten its name), one holds 2 GiB idle. Recorded: the plain table,
the CSV queries, `nvidia-smi -q -d UTILIZATION`, the NVML sampler's lines; then every console
path's reading beside nvidia-smi's of the same moment (memory and processes exact; utilization,
a sampled counter, within a few points).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.gpu_holders import HOLDER, read_paths, sh, truth_now  # noqa: E402

BUSY = """
import os, sys, torch
a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda:0")
b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda:0")
keep = torch.empty(int(4 * (1 << 30)), dtype=torch.uint8, device="cuda:0")
torch.cuda.synchronize()
print("ready", os.getpid(), flush=True)
import select
while not select.select([sys.stdin], [], [], 0)[0]:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
"""

LONG_VENV = f"/tmp/gpuconsole-validation-{os.getpid()}/a-long-virtualenv-directory-name"


async def main(out: Path) -> int:
    from console.demo.hostsim import HostSimulator
    from console.host.transport import LocalTransport
    from console.host.transport.ssh import SshOptions, SshTransport

    out.mkdir(parents=True, exist_ok=True)
    # The whole virtualenv under a long name (a symlinked interpreter alone would not find its venv).
    os.makedirs(os.path.dirname(LONG_VENV), exist_ok=True)
    if not os.path.exists(LONG_VENV):
        os.symlink(Path(sys.executable).parent.parent, LONG_VENV)
    long_python = f"{LONG_VENV}/bin/python3"
    site = os.pathsep.join(p for p in sys.path if p.endswith("-packages"))  # torch, whatever the venv detection
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [site, os.environ.get("PYTHONPATH", "")]))}
    busy = subprocess.Popen([long_python, "-c", BUSY], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=env)
    idle = subprocess.Popen([sys.executable, "-c", HOLDER, "2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert busy.stdout and idle.stdout
    report: dict = {"busy": busy.stdout.readline().split(), "idle": idle.stdout.readline().split(),
                    "long_python": long_python, "readings": {}, "checks": []}
    time.sleep(3)
    (out / "busy_nvidia_smi.txt").write_text(sh("nvidia-smi"))
    (out / "busy_utilization_q.txt").write_text(sh("nvidia-smi -q -d UTILIZATION"))
    report["truth_before"] = truth_now()
    from console.host.sources.gpu import SAMPLER_SOURCE

    (out / "busy_nvml_sampler.jsonl").write_text(sh(f"timeout 3.5 {sys.executable} -u -c "
                                                    f"{__import__('shlex').quote(SAMPLER_SOURCE)} 0.5"))
    local = LocalTransport()
    await read_paths(report, local, True, "local")
    await local.close()
    async with HostSimulator(simulate_tools=False) as server:
        transport = SshTransport(SshOptions(
            "127.0.0.1", port=server.port, user="root", identity=str(server.client_key_path),
            known_hosts=str(server.known_hosts_path), ssh_config=()))
        await transport.connect()
        await read_paths(report, transport, False, "ssh")
        await transport.close()
    truth = truth_now()
    report["truth_after"] = truth
    util_rows = []
    for name, reading in report["readings"].items():
        data = (reading or {}).get("data") or {}
        for g in data.get("gpus", []):
            util_rows.append({"path": name, "util_pct": g["utilization_pct"],
                              "nvidia_smi_util_pct": truth["gpus"][0]["utilization_pct"],
                              "used_mib": g["memory_used_mib"],
                              "nvidia_smi_used_mib": truth["gpus"][0]["memory_used_mib"]})
    report["utilization"] = util_rows
    for p in (busy, idle):
        assert p.stdin
        p.stdin.write("x\n")
        p.stdin.close()
        p.wait(30)
    (out / "busy_query_gpu.txt").write_text(truth["gpu_csv"])
    (out / "busy_apps.txt").write_text(truth["apps_csv"])
    (out / "busy_report.json").write_text(json.dumps(report, indent=1, default=str))
    print(json.dumps({"checks": [{k: c.get(k) for k in ("path", "used_mib", "nvidia_smi_used_mib", "processes",
                                                        "nvidia_smi_processes", "ok")} for c in report["checks"]],
                      "utilization": util_rows}, indent=1))
    return 0 if all(c["ok"] for c in report["checks"]) else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(Path(sys.argv[1]))))

