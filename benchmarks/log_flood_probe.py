"""Where a log flood's UI loop lag goes: `log_flood.py`'s flood with every loop callback over 2 ms
timed (wall and the UI thread's CPU), the collector's passes timed, and at each lag sample the UI
thread's run-queue time (/proc/thread-self/schedstat). Prints, for the lag samples over 16 ms, how
long the UI thread ran in them and how long it waited for a core; the callbacks by name (count, wall
ms, CPU ms); the worst lags and what ran in them. A benchmark's own instrument: it patches asyncio's
`Handle._run` in this process.

    .venv/bin/python benchmarks/log_flood_probe.py [--seconds 10] [--busy 1] [--apart] [--group-nice N]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import os
import sys
import time
from asyncio import events
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchmarks.log_flood as lf  # noqa: E402

CALLS: list[tuple[float, float, float, str]] = []  # (start, end, CPU s, name) of callbacks over 2 ms
GCS: list[tuple[float, float, float, int]] = []  # (start, wall s, CPU s, generation) of passes over 2 ms
LAGS: list[tuple[float, float]] = []
SCHED: list[tuple[float, float]] = []  # per lag sample: ms the UI thread ran, ms it waited for a core


def _name(handle: Any) -> str:
    cb = handle._callback
    name = getattr(cb, "__qualname__", None) or repr(cb)
    task = getattr(cb, "__self__", None)
    if isinstance(task, asyncio.Task):
        coro = task.get_coro()
        name = "task:" + getattr(coro, "__qualname__", repr(coro))
    return name


def _patch() -> None:
    run = events.Handle._run

    def timed(self: Any) -> None:
        w0, c0 = time.perf_counter(), time.thread_time()
        try:
            run(self)
        finally:
            w1 = time.perf_counter()
            if w1 - w0 > 0.002:
                CALLS.append((w0, w1, time.thread_time() - c0, _name(self)))

    events.Handle._run = timed  # type: ignore[method-assign]
    started = [0.0, 0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[:] = [time.perf_counter(), time.thread_time()]
        elif time.perf_counter() - started[0] > 0.002:
            GCS.append((started[0], time.perf_counter() - started[0], time.thread_time() - started[1],
                        info.get("generation", -1)))

    gc.callbacks.append(on_gc)

    def sched() -> tuple[int, int]:
        with open("/proc/thread-self/schedstat") as fh:
            ran, waited, _ = fh.read().split()
        return int(ran), int(waited)

    real_sleep = asyncio.sleep

    async def sleep(delay: float, *args: Any) -> Any:
        s0, t0 = sched(), time.perf_counter()
        result = await real_sleep(delay, *args)
        if delay == 0.01:  # the flood's lag sample
            t1, s1 = time.perf_counter(), sched()
            LAGS.append((t0, t1))
            SCHED.append(((s1[0] - s0[0]) / 1e6, (s1[1] - s0[1]) / 1e6))
        return result

    shim = type(sys)("asyncio_probe")
    shim.__dict__.update(asyncio.__dict__)
    shim.sleep = sleep  # type: ignore[attr-defined]
    lf.asyncio = shim  # type: ignore[assignment]


def report(res: dict[str, Any]) -> None:
    print(json.dumps({k: res[k] for k in ("load_average_1m", "lines_written", "lines_seen", "lag_ms", "floor_lag_ms",
                                          "ui_thread_waited_for_a_core_ms", "ui_thread_cpu_ms_per_1k_lines")}))
    t_start, t_end = LAGS[0][0], LAGS[-1][1]
    lags = [(a, b, (b - a - 0.01) * 1000) for a, b in LAGS]
    big = [i for i, lag in enumerate(lags) if lag[2] > 16]
    print(f"lag samples {len(lags)}, over 16 ms {len(big)}: lag {sum(lags[i][2] for i in big):.0f} ms in all, "
          f"the UI thread ran {sum(SCHED[i][0] for i in big):.0f} ms in them and waited for a core "
          f"{sum(SCHED[i][1] for i in big):.0f} ms")
    print(f"the whole flood: the UI thread ran {sum(s[0] for s in SCHED):.0f} ms, waited for a core "
          f"{sum(s[1] for s in SCHED):.0f} ms")
    by_name: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for w0, w1, cpu, name in CALLS:
        if t_start <= w0 <= t_end:
            row = by_name[name]
            row[0] += 1
            row[1] += (w1 - w0) * 1000
            row[2] += cpu * 1000
    print("callbacks over 2 ms during the flood: count, wall ms, CPU ms, name")
    for name, (n, wall, cpu) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:20]:
        print(f"  {n:5.0f} {wall:9.1f} {cpu:9.1f}  {name[:100]}")
    passes = [g for g in GCS if t_start <= g[0] <= t_end]
    print(f"collector passes over 2 ms: {len(passes)}, wall {sum(g[1] for g in passes) * 1000:.1f} ms, "
          f"CPU {sum(g[2] for g in passes) * 1000:.1f} ms, by generation {dict(collections.Counter(g[3] for g in passes))}")
    print("the worst lags: ran/waited for a core (ms); callbacks in them (wall/CPU ms)")
    for i in sorted(big, key=lambda i: -lags[i][2])[:12]:
        a, b, lag = lags[i]
        inside = [(n, (w1 - w0) * 1000, c * 1000) for w0, w1, c, n in CALLS if w1 > a + 0.01 and w0 < b]
        print(f"  {lag:6.1f} ms: ran {SCHED[i][0]:.1f}, waited {SCHED[i][1]:.1f}; "
              + "; ".join(f"{n[-45:]} {w:.1f}/{c:.1f}" for n, w, c in inside))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="where a log flood's UI loop lag goes")
    ap.add_argument("--rate", type=int, default=20_000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--busy", type=int, default=1)
    ap.add_argument("--apart", action="store_true")
    ap.add_argument("--group-nice", type=int, metavar="N")
    a = ap.parse_args()
    group = Path("/proc/self/autogroup")
    before = None
    if a.group_nice is not None:
        before = int(group.read_text().split()[-1])
        group.write_text(f"{a.group_nice}\n")
    os.environ.setdefault("TERM", "xterm-256color")
    _patch()
    try:
        report(asyncio.run(lf.flood(a.rate, a.seconds, a.busy, apart=a.apart)))
    finally:
        if before is not None:
            group.write_text(f"{before}\n")
