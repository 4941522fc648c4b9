"""How the console's cost grows with work: CPU (% of one core) and memory (RSS) of the console
process against GPUs per host (1, 8, 16), files in the model dir (60, 10k, 100k) and log rate
(0, 1k, 20k lines/s). Every cell is measured, none extrapolated.

Each row changes one thing from the quiet host of `quiet_host.py` (OpenSSH sshd on 127.0.0.1,
2 GPUs through a fake nvidia-smi printing recorded real H200 output, a finished 60-file model
dir, a log that does not grow). The console runs in its own process, headless Textual at
120x40 through `ConsoleApp.for_session`; its CPU is utime + stime from /proc/PID/stat over the
window; `--runs` runs per row, the median reported. A finished model dir is polled every 10 s (a
downloading one every 2 s): `--poll-cost` also times one poll of each dir on its own (client
CPU per poll), which is what a downloading dir pays five times as often.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.hostkit import LOG_WRITER, ROOT, console_config, measure, median_runs, start_host  # noqa: E402

ROWS: list[tuple[str, dict[str, Any]]] = [
    ("quiet host (2 GPUs, 60 files, log 0/s)", {}),
    ("1 GPU", {"gpus": 1}),
    ("8 GPUs", {"gpus": 8}),
    ("16 GPUs", {"gpus": 16}),
    ("10k files", {"files": 10_000}),
    ("100k files", {"files": 100_000}),
    ("log 1k lines/s", {"rate": 1_000}),
    ("log 20k lines/s", {"rate": 20_000}),
]


async def poll_cost(host: Any, polls: int = 3) -> dict[str, float]:
    from console.host.sources.download import DownloadWatcher
    from console.host.transport.ssh import SshTransport

    t = SshTransport(host.sshd.options())
    await t.connect()
    watcher = DownloadWatcher(t, str(host.model_dir), None)
    await watcher.poll()
    cpu, wall = [], []
    for _ in range(polls):
        c, w = time.process_time(), time.perf_counter()
        await watcher.poll()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    await t.close()
    return {"client_cpu_s_per_poll": round(sorted(cpu)[polls // 2], 3),
            "wall_s_per_poll": round(sorted(wall)[polls // 2], 3)}


def row(label: str, gpus: int = 2, files: int = 60, rate: int = 0, *, runs: int, warmup_s: float,
        window_s: float, poll: bool) -> dict[str, Any]:
    host = start_host(gpus=gpus, model_files=files, log=True)
    writers: list[subprocess.Popen[str]] = []

    def start_writer(_pid: int) -> None:
        if rate:
            assert host.log_file is not None
            writers.append(subprocess.Popen([sys.executable, "-c", LOG_WRITER, str(host.log_file), str(rate),
                                             str(window_s + 1), str(ROOT)], stdout=subprocess.PIPE, text=True))

    try:
        results = []
        for _ in range(runs):
            results.append(measure(console_config(host, seconds=0), warmup_s, window_s, start_writer))
            for w in writers:
                w.wait(30)
            writers.clear()
        extra = asyncio.run(poll_cost(host)) if poll and files != 60 or poll and label.startswith("quiet") else {}
    finally:
        for w in writers:
            w.kill()
        host.stop()
    summary = median_runs(results)
    return {"row": label, "gpus": gpus, "files": files, "log_lines_per_s": rate, **summary, **extra}


def markdown(rows: list[dict[str, Any]]) -> str:
    out = ["| case | console CPU, % of one core (median) | runs | RSS MiB | seen |", "|---|---|---|---|---|"]
    for r in rows:
        seen = r["seen"]
        what = (f"{seen['gpus']} GPUs via {seen['gpu_path']}, {seen['download_files']} shards done, "
                f"{seen['log_lines']} log lines" if "gpus" in seen else seen.get("exit", "?"))
        if "client_cpu_s_per_poll" in r:
            what += f"; one dir poll: {r['client_cpu_s_per_poll']} s CPU, {r['wall_s_per_poll']} s wall"
        out.append(f"| {r['row']} | {r['cpu_pct_median']} | {', '.join(map(str, r['cpu_pct_runs']))} | "
                   f"{r['rss_mib_median']} | {what} |")
    return "\n".join(out)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=float, default=15.0)
    ap.add_argument("--window", type=float, default=30.0)
    ap.add_argument("--only", help="rows whose label contains this")
    ap.add_argument("--poll-cost", action="store_true", help="also time one poll of each model dir on its own")
    a = ap.parse_args()
    os.environ.setdefault("TERM", "xterm-256color")
    rows = []
    for label, kw in ROWS:
        if a.only and a.only not in label:
            continue
        rows.append(row(label, **kw, runs=a.runs, warmup_s=a.warmup, window_s=a.window, poll=a.poll_cost))
        print(json.dumps(rows[-1]), flush=True)
    print(markdown(rows))
