"""Every figure of issue 23's table, re-measured in one go, one benchmark after another (never
two at once), and printed as the table (Markdown) with the load average beside each row.

    .venv/bin/python benchmarks/issue23.py                 # all rows, about 8 minutes
    .venv/bin/python benchmarks/issue23.py --only poll,flood --json out.json

Each row runs its own script under benchmarks/ in a child process (the commands are printed in
the table), with short windows so that the whole table fits in about 8 minutes; run a row's
script alone for longer windows. A row whose script fails or runs past its limit says so in the
table and the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


@dataclass(frozen=True, slots=True)
class Row:
    key: str
    measure: str
    goal: str
    argv: tuple[str, ...]
    limit_s: int
    figure: Callable[[dict[str, Any]], tuple[str, bool | None]]  # (the figure in words, goal met)


def _poll(r: dict[str, Any]) -> tuple[str, bool | None]:
    w, x = r["watchdog"], r["wrapper"]
    return (f"**{w['p50_ms_median']:.3f} ms** (runs {w['p50_ms_runs']}; wrapper {x['p50_ms_median']:.3f} ms,"
            f" {r['ratio_wrapper_over_watchdog']}x)", w["p50_ms_median"] <= 1.0)


def _flood(r: dict[str, Any]) -> tuple[str, bool | None]:
    lag, kept = r["lag_ms"], r["lines_seen"] >= r["lines_written"]
    return (f"p99 **{lag['p99']} ms** (p50 {lag['p50']}, max {lag['max']}); {r['lines_seen']:,} of "
            f"{r['lines_written']:,} lines; CPU {r['console_cpu_pct_during_flood']} %", lag["p99"] <= 16 and kept)


def _demo(r: dict[str, Any]) -> tuple[str, bool | None]:
    return f"**{r['console_cpu_pct_median']} %** (runs {r['console_cpu_pct_runs']})", r["console_cpu_pct_median"] <= 1.5


def _quiet(r: dict[str, Any]) -> tuple[str, bool | None]:
    c = r["console"]
    return (f"**{c['cpu_pct_median']} %** (runs {c['cpu_pct_runs']}; recording on "
            f"{r['console_recording']['cpu_pct_median']} %)", c["cpu_pct_median"] <= 0.5)


def _ttft(r: dict[str, Any]) -> tuple[str, bool | None]:
    pct = r.get("ttft_overhead_console_vs_headless_pct")
    h, c = r["headless"], r["console"]
    bound = " (client-bound: " + ", ".join(k for k in ("headless", "console") if r[k].get("client_bound")) + ")" \
        if h.get("client_bound") or c.get("client_bound") else ""
    return (f"**{'+' if pct is not None and pct >= 0 else ''}{pct} %** ({c['ttft_overhead_mean_ms']} vs "
            f"{h['ttft_overhead_mean_ms']} ms mean overhead; UI lag p99 {c.get('ui_lag_p99_ms')} ms){bound}",
            None if pct is None else pct <= 5)


def _ssh(r: dict[str, Any]) -> tuple[str, bool | None]:
    n, up = r["hosts"], r["connected_at_end"]
    age = r.get("gpu_reading_age_ms") or {}
    met = up == n and r["cpu_pct_of_one_core"] <= 25 and r["peak_rss_mib"] <= 400
    return (f"{up} of {n} connected (all by {r['all_connected_s']} s); **{r['cpu_pct_of_one_core']} %** of a core, "
            f"**{r['peak_rss_mib']} MiB**; a row's GPU reading p50 {age.get('p50')} ms old", met)


def _prom(r: dict[str, Any]) -> tuple[str, bool | None]:
    c = r["cycle_ms"]
    return (f"p50 **{c['p50']} ms** (p99 {c['p99']}); CPU per cycle: console {r['cycle_console_cpu_ms']['p50']} ms, "
            f"Prometheus {r['cycle_prometheus_cpu_ms']['p50']} ms", c["p50"] <= 1000)


ROWS = (
    Row("poll", "one poll, persistent shell, OpenSSH sshd (`doctor --json` p50, median of 3x100)", "<= 1.0 ms",
        ("benchmarks/poll_rtt.py", "--rounds", "3", "--runs", "100", "--json"), 240, _poll),
    Row("flood", "log flood 20k lines/s through sshd, UI loop lag p99, every line kept", "<= 16 ms",
        ("benchmarks/log_flood.py", "--seconds", "20"), 150, _flood),
    Row("demo", "demo console CPU, story steady", "<= 1.5 %",
        ("benchmarks/demo_idle_cpu.py", "--runs", "1", "--from", "80", "--to", "100"), 170, _demo),
    Row("quiet", "console on a quiet host (sshd, 2 GPUs, still log)", "<= 0.5 %",
        ("benchmarks/quiet_host.py", "--runs", "1", "--warmup", "10", "--window", "20"), 150, _quiet),
    Row("ttft", "TTFT read by a benchmark inside the console vs headless, 32 concurrent (median of 3 reps)",
        "<= +5 %", ("benchmarks/bench_ui_lag.py", "--reps", "3", "--requests", "320"), 400, _ttft),
    # One stream at a time: the rate at which this VM's client is not itself the bottleneck (the
    # client-bound warning is off there), so the console's own cost is what the figure shows.
    Row("ttft1", "the same, one request at a time (client not the bottleneck)", "<= +5 %",
        ("benchmarks/bench_ui_lag.py", "--reps", "3", "--concurrency", "1", "--requests", "40"), 300, _ttft),
    Row("ssh50", "fleet over SSH, 50 hosts (one simulator process)", "all, <= 25 %, <= 400 MiB",
        ("benchmarks/fleet.py", "ssh", "--hosts", "50", "--warmup", "30", "--seconds", "15"), 200, _ssh),
    Row("ssh100", "fleet over SSH, 100 hosts", "all, <= 25 %, <= 400 MiB",
        ("benchmarks/fleet.py", "ssh", "--hosts", "100", "--warmup", "45", "--seconds", "15"), 260, _ssh),
    Row("prom", "fleet from Prometheus, 500 hosts x 8 GPUs, cycle p50", "<= 1.0 s",
        ("benchmarks/fleet.py", "prometheus", "--hosts", "500", "--cycles", "6"), 200, _prom),
)


def last_json(text: str) -> dict[str, Any]:
    """The last JSON object a script printed (log_flood.py prints two)."""
    decoder, found, i = json.JSONDecoder(), None, 0
    while (i := text.find("{", i)) >= 0:
        try:
            found, end = decoder.raw_decode(text, i)
            i = end
        except json.JSONDecodeError:
            i += 1
    if not isinstance(found, dict):
        raise ValueError("no JSON object in its output")
    return found


def run_row(row: Row) -> dict[str, Any]:
    load0 = os.getloadavg()[0]
    started = time.monotonic()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": os.environ.get("TERM", "xterm-256color")}
    out: dict[str, Any] = {"key": row.key, "command": " ".join(row.argv)}
    try:
        done = subprocess.run([PY, *row.argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=row.limit_s)
        if done.returncode != 0:
            raise RuntimeError(f"exit {done.returncode}: {(done.stderr.strip().splitlines() or [''])[-1][:200]}")
        result = last_json(done.stdout)
        out["figure"], out["met"] = row.figure(result)
        out["result"] = result
    except subprocess.TimeoutExpired as exc:
        # fleet.py prints its figures to stderr before it closes the fleet (which can take long):
        # use them, and say that the script did not end in time.
        partial = "".join(x.decode() if isinstance(x, bytes) else (x or "") for x in (exc.stdout, exc.stderr))
        try:
            result = last_json(partial)
            out["figure"], out["met"] = row.figure(result)
            out["figure"] += f" (figures printed; the script did not exit within {row.limit_s} s)"
            out["result"] = result
        except (ValueError, KeyError, TypeError):
            out["figure"], out["met"] = f"did not finish within {row.limit_s} s", None
    except (RuntimeError, ValueError, KeyError, TypeError) as exc:
        out["figure"], out["met"] = f"failed: {type(exc).__name__}: {exc}", None
    out["seconds"] = round(time.monotonic() - started, 1)
    out["load"] = f"{load0:.1f}-{os.getloadavg()[0]:.1f}"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated rows: " + ",".join(r.key for r in ROWS))
    ap.add_argument("--json", metavar="FILE", help="also write every row's full result here")
    a = ap.parse_args(argv)
    keys = [k.strip() for k in a.only.split(",")] if a.only else [r.key for r in ROWS]
    unknown = set(keys) - {r.key for r in ROWS}
    if unknown:
        print(f"issue23: unknown row(s) {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    results = []
    for row in ROWS:
        if row.key in keys:
            print(f"[{time.strftime('%H:%M:%S')}] {row.key}: {' '.join(row.argv)}", file=sys.stderr, flush=True)
            results.append((row, run_row(row)))
    print(f"\nIssue 23 figures, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores "
          f"(load average beside each row):\n")
    print("| measure | figure | goal | met | load | command |")
    print("|---|---|---|---|---|---|")
    for row, r in results:
        met = {True: "yes", False: "**no**", None: "–"}[r["met"]]
        print(f"| {row.measure} | {r['figure']} | {row.goal} | {met} | {r['load']} | `{r['command']}` |")
    print(f"\ntotal {sum(r['seconds'] for _, r in results):.0f} s")
    if a.json:
        Path(a.json).write_text(json.dumps([r for _, r in results], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
