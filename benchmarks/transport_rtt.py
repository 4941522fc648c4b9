"""Poll cost three ways against OpenSSH's sshd on 127.0.0.1:

1. a command on the persistent shell (what gpuconsole does);
2. a new exec channel on the open connection;
3. a new `ssh host cmd` process (what operators do today).

Targets (issue #2): persistent p50 <= 2 ms, >= 100x faster than `ssh host cmd`, >= 30x faster
than an exec channel per poll. `--pollers 5` runs that many pollers at once on one connection.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from console.cli.doctor import percentile  # noqa: E402
from console.demo.sshd import start_sshd  # noqa: E402
from console.host.transport.ssh import SshOptions, SshTransport  # noqa: E402


def summary(xs: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(xs), 3), "p95": round(percentile(xs, 95), 3), "n": len(xs)}


async def main(persistent_n: int, exec_n: int, ssh_n: int, pollers: int) -> dict[str, object]:
    sshd = start_sshd()
    try:
        t = SshTransport(SshOptions("127.0.0.1", port=sshd.port, user=sshd.user, identity=str(sshd.client_key),
                                    known_hosts=str(sshd.known_hosts), ssh_config=()))
        await t.connect()
        await t.run("true")

        async def timed(fresh: bool, n: int) -> list[float]:
            out = []
            for _ in range(n):
                s = time.perf_counter()
                await (t.run_fresh("true") if fresh else t.run("true"))
                out.append((time.perf_counter() - s) * 1000)
            return out

        persistent = [x for chunk in await asyncio.gather(*[timed(False, persistent_n) for _ in range(pollers)])
                      for x in chunk]
        exec_channel = [x for chunk in await asyncio.gather(*[timed(True, exec_n) for _ in range(pollers)])
                        for x in chunk]
        await t.close()
        ssh_cmd = []
        for _ in range(ssh_n):
            s = time.perf_counter()
            subprocess.run(["ssh", "-p", str(sshd.port), "-i", str(sshd.client_key), "-o", "BatchMode=yes",
                            "-o", f"UserKnownHostsFile={sshd.known_hosts}", "-o", "StrictHostKeyChecking=yes",
                            f"{sshd.user}@127.0.0.1", "true"], check=True, capture_output=True)
            ssh_cmd.append((time.perf_counter() - s) * 1000)
    finally:
        sshd.stop()
    p, e, s_ = summary(persistent), summary(exec_channel), summary(ssh_cmd)
    return {"pollers": pollers, "persistent_ms": p, "exec_channel_ms": e, "ssh_process_ms": s_,
            "speedup_vs_ssh": round(s_["p50"] / p["p50"], 1), "speedup_vs_exec": round(e["p50"] / p["p50"], 1)}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--persistent", type=int, default=500)
    ap.add_argument("--exec", type=int, default=50)
    ap.add_argument("--ssh", type=int, default=20)
    ap.add_argument("--pollers", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    result = asyncio.run(main(a.persistent, a.exec, a.ssh, a.pollers))
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"pollers {result['pollers']} on one connection, OpenSSH sshd on 127.0.0.1")
        for label, key in (("persistent shell", "persistent_ms"), ("exec channel per poll", "exec_channel_ms"),
                           ("new `ssh host cmd`", "ssh_process_ms")):
            r = result[key]
            print(f"  {label:<24} p50 {r['p50']:8.2f} ms   p95 {r['p95']:8.2f} ms   (n={r['n']})")
        print(f"  persistent is {result['speedup_vs_ssh']}x faster than ssh, {result['speedup_vs_exec']}x than exec")
