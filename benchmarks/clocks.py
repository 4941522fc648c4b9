"""The timings that tests used to assert (issue 27: no test asserts a wall-clock bound). Each is
measured here, on this machine, and printed beside the bound the old test held it to:

    diff-megabyte   `gpuconsole diff` of a unit against a one-word megabyte file (was < 15 s)
    fit-no-hub      `gpuconsole fit REPO` with the Hub unreachable: the hint (was < 10 s)
    bench-stop      a benchmark of 16 x 128 tokens at 50 ms/token, stopped after 0.5 s (was < 5 s)
    backoff-wake    a 30 s backoff woken after 50 ms (was < 2 s)

    .venv/bin/python benchmarks/clocks.py [--json FILE]

The tests check the behaviour (the answer, the refusal, nothing completed, woken rather than timed
out); whether it is quick enough on a given machine is this script's figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _cli(*args: str, env: dict[str, str] | None = None) -> float:
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "console", *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, env={**os.environ, **(env or {})})
    elapsed = time.monotonic() - started
    if "Traceback" in out.stderr:
        raise RuntimeError(out.stderr.strip().splitlines()[-1])
    return elapsed


def diff_megabyte(tmp: Path) -> float:
    unit = "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m\n"
    (tmp / "unit1.service").write_text(unit)
    (tmp / "oneword").write_text("x" * 1_000_000)
    return _cli("diff", str(tmp / "unit1.service"), str(tmp / "oneword"), "--json")


def fit_no_hub(tmp: Path) -> float:
    from console.demo.sshd import free_port

    return _cli("fit", "Qwen/Qwen3.5-122B-A10B", "--gpus", "4", "--gpu-mem", "96",
                env={"HF_ENDPOINT": f"http://127.0.0.1:{free_port()}", "HF_HOME": str(tmp / "hf")})


def bench_stop() -> float:
    from benchmarks.loopback_server import start_in_process
    from console.domain.bench.runner import BenchConfig, run_benchmark
    from console.domain.bench.workload import random_prompts

    proc, url = start_in_process(ttft_ms=50, itl_ms=50)
    try:
        stop = threading.Event()

        async def run() -> float:
            asyncio.get_running_loop().call_later(0.5, stop.set)
            started = time.monotonic()
            await run_benchmark(BenchConfig(url, concurrency=4, warmup=0), random_prompts(16, 8, 128), stop=stop)
            return time.monotonic() - started

        return asyncio.run(run())
    finally:
        proc.kill()
        proc.wait(10)


def backoff_wake() -> float:
    from console.host.backoff import Backoff

    async def run() -> float:
        b = Backoff()
        started = time.monotonic()
        waiter = asyncio.ensure_future(b.sleep(30))
        await asyncio.sleep(0.05)
        b.wake()
        await waiter
        return time.monotonic() - started

    return asyncio.run(run())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gc-clocks-") as tmp:
        rows = [("diff-megabyte", diff_megabyte(Path(tmp)), 15.0), ("fit-no-hub", fit_no_hub(Path(tmp)), 10.0),
                ("bench-stop", bench_stop(), 5.0), ("backoff-wake", backoff_wake(), 2.0)]
    for name, secs, bound in rows:
        print(f"{name:15} {secs:7.2f} s   (the old test's bound: {bound:g} s)")
    if args.json:
        Path(args.json).write_text(json.dumps({n: round(s, 3) for n, s, _ in rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
