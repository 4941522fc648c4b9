"""The benchmark must not distort the console, nor be distorted by it.

Against the paced loopback server (TTFT 20 ms, 5 ms per token; benchmarks/loopback_server.py), a
concurrency-32 run, input 256 / output 128:

1. headless: `gpuconsole bench --url` in its own process;
2. in the console: the app (headless Textual, 120x40, this machine as the host) runs the same
   plan through its own bench thread (`start_bench`), while a probe on the UI's event loop sleeps
   10 ms at a time and records how late it wakes (the loop's lag).

Targets (issue 16): UI lag p99 <= 50 ms while the run goes; the run's TTFT overhead against the
server's truth within 10 % of the headless run's. Runs alternate (headless, console, ...) and the
figures are medians.

    .venv/bin/python benchmarks/bench_ui_lag.py --reps 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_client import truth  # noqa: E402
from benchmarks.loopback_server import start_in_process  # noqa: E402
from console.bench.metrics import percentile  # noqa: E402


def headless(url: str, n: int, c: int, work: Path) -> dict[str, Any]:
    truth(url)
    out = subprocess.run([sys.executable, "-m", "console", "bench", "--url", url, "--num-prompts", str(n),
                          "--input-len", "256", "--output-len", "128", "--concurrency", str(c), "--json",
                          "--output-file", str(work / "headless.jsonl")],
                         capture_output=True, text=True, timeout=600, cwd=ROOT, check=True)
    m = json.loads(out.stdout)
    t = truth(url)
    return {"req_s": m["request_throughput"], "ttft_overhead_mean_ms": m["mean_ttft_ms"] - t["mean_ms"],
            "ttft_overhead_p99_ms": m["p99_ttft_ms"] - t["p99_ms"], **client(m)}


def client(m: dict[str, Any]) -> dict[str, Any]:
    """The run's own word on its client (issue 23 item 4): send lag, CPU, client-bound."""
    return {"client_send_lag_p99_ms": m.get("client_send_lag_p99_ms"), "client_cpu_pct": m.get("client_cpu_pct"),
            "client_bound": float(bool(m.get("client_bound")))}


async def in_console(url: str, n: int, c: int) -> dict[str, Any]:
    from console.app import ConsoleApp
    from console.config import HostProfile
    from console.session import HostSession, make_transport

    port = int(url.rsplit(":", 1)[1])
    profile = HostProfile(name="local", server_port=port)
    app = ConsoleApp.for_session(HostSession(profile, make_transport(profile)))
    lags: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(2.0)  # first polls done
        truth(url)
        view = app.state.bench
        app.start_bench("quick", plan=[(c, n, 256, 128)])
        deadline = time.monotonic() + 600
        while not view.results and time.monotonic() < deadline:
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append((time.perf_counter() - before - 0.01) * 1000)
        await pilot.pause(0.5)
        t = truth(url)
        m = view.results[-1]
    return {"req_s": m["request_throughput"], "ttft_overhead_mean_ms": m["mean_ttft_ms"] - t["mean_ms"],
            "ttft_overhead_p99_ms": m["p99_ttft_ms"] - t["p99_ms"],
            "ui_lag_p50_ms": percentile(lags, 50), "ui_lag_p99_ms": percentile(lags, 99), "ui_lag_max_ms": max(lags),
            **client(m)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--requests", type=int, default=640, help="per run (about 13 s at c=32)")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gpuconsole-ui-lag-"))
    import os

    os.environ["XDG_DATA_HOME"] = str(work)  # the console's runs go here, not into the user's bench.jsonl
    proc, url = start_in_process(20.0, 5.0)
    rows: dict[str, list[dict[str, Any]]] = {"headless": [], "console": []}
    try:
        for rep in range(a.reps):
            rows["headless"].append(headless(url, a.requests, a.concurrency, work))
            rows["console"].append(asyncio.run(in_console(url, a.requests, a.concurrency)))
            print(f"rep {rep}: {json.dumps({k: v[-1] for k, v in rows.items()})}", file=sys.stderr, flush=True)
    finally:
        proc.terminate()
        proc.wait(5)
    med = {k: {f: round(statistics.median(r[f] for r in v), 2) for f in v[0] if v[0][f] is not None}
           for k, v in rows.items()}
    med["load_average_1m"] = round(os.getloadavg()[0], 2)
    h, cns = med["headless"]["ttft_overhead_mean_ms"], med["console"]["ttft_overhead_mean_ms"]
    med["ttft_overhead_console_vs_headless_pct"] = round(100 * (cns - h) / h, 1) if h else None
    print(json.dumps(med, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
