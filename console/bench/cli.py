"""`gpuconsole bench`: one run, or a sweep, printed as sglang.bench_serving prints it (or JSON)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from console.bench.metrics import format_table
from console.bench.runner import BenchConfig, run_benchmark
from console.bench.store import default_path, save_run
from console.bench.workload import WorkloadError, random_prompts, sharegpt_prompts
from console.config import HostProfile


def plan_runs(args: argparse.Namespace, base_url: str) -> list[tuple[BenchConfig, list[Any]]]:
    levels = [int(x) for x in args.sweep.split(",")] if args.sweep else [args.concurrency]
    runs = []
    for level in levels:
        n = args.num_prompts
        if args.dataset:
            prompts = sharegpt_prompts(args.dataset, n, output_len=args.output_len, seed=args.seed)
        else:
            prompts = random_prompts(n, args.input_len, args.output_len, seed=args.seed, range_ratio=args.range_ratio)
        cfg = BenchConfig(base_url, model=args.model, endpoint=args.endpoint, num_prompts=n,
                          input_len=args.input_len, output_len=args.output_len, concurrency=level,
                          request_rate=args.request_rate or float("inf"), duration_s=args.duration,
                          warmup=args.warmup, seed=args.seed)
        runs.append((cfg, prompts))
    return runs


async def run_bench_cli(args: argparse.Namespace, profile: HostProfile, session: Any) -> int:
    if session is not None:
        base_url = await session.transport.http_base_url(profile.server_port)
        host = session.transport.label
    else:
        base_url, host = args.url.rstrip("/"), args.url
    try:
        runs = plan_runs(args, base_url)
    except WorkloadError as exc:
        print(f"gpuconsole: {exc}", file=sys.stderr)
        return 2
    results = []
    not_saved = False
    out_path = Path(args.output_file) if args.output_file else default_path()
    for cfg, prompts in runs:
        try:
            metrics = await run_benchmark(cfg, prompts)
        except Exception as exc:  # noqa: BLE001 - one line, no traceback
            print(f"gpuconsole: benchmark failed: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
            return 1
        try:
            save_run(metrics, out_path, host=host, flags=None)
        except OSError as exc:  # disk full, read-only: the run's figures are still printed
            print(f"gpuconsole: result not saved to {out_path}: {exc.strerror or exc}", file=sys.stderr)
            not_saved = True
        results.append(metrics)
        if not args.json:
            rate = "inf" if cfg.request_rate == float("inf") else f"{cfg.request_rate:g}"
            print(format_table(metrics, rate=rate, max_concurrency=str(cfg.concurrency or "not set")))
            if metrics["errors"]:
                for reason, count in metrics["errors"].items():
                    print(f"  failed x{count}: {reason}")
    if args.json:
        print(json.dumps(results if args.sweep else results[0], indent=2))
    return 0 if all(r["completed"] for r in results) and not not_saved else 1
