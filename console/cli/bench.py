"""`gpuconsole bench`: one run, or a sweep, printed as sglang.bench_serving prints it (or JSON)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from console.config import HostProfile
from console.domain.bench.metrics import format_table
from console.domain.bench.runner import BenchConfig, run_benchmark, run_loop
from console.domain.bench.store import default_path, save_run
from console.domain.bench.tokens import TokenizerError, load_counter
from console.domain.bench.workload import WorkloadError, random_prompts, sharegpt_prompts


class ApiKeyError(ValueError):
    """The --api-key source is not usable; the message never contains the key."""


def read_api_key(source: str | None) -> str | None:
    """`env:VAR` or `file:PATH` (first line, stripped). A literal key is refused: it shows in ps."""
    if not source:
        return None
    kind, _, where = source.partition(":")
    if kind == "env" and where:
        value = os.environ.get(where)
        if not value:
            raise ApiKeyError(f"--api-key: the environment variable {where} is not set or empty")
        return value.strip()
    if kind == "file" and where:
        try:
            with open(where, encoding="utf-8") as fh:
                value = fh.readline(4096).strip()
        except OSError as exc:
            raise ApiKeyError(f"--api-key: {where}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise ApiKeyError(f"--api-key: {where}: not text") from None
        if not value:
            raise ApiKeyError(f"--api-key: {where} is empty")
        return value
    raise ApiKeyError("--api-key takes env:VAR or file:PATH (a key on the command line would show in ps)")


def plan_runs(args: argparse.Namespace, base_url: str, api_key: str | None = None
              ) -> list[tuple[BenchConfig, list[Any]]]:
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
                          warmup=args.warmup, seed=args.seed, api_key=api_key)
        runs.append((cfg, prompts))
    return runs


def format_errors(metrics: dict[str, Any]) -> list[str]:
    examples = metrics.get("error_examples") or {}
    return [f"  failed x{count}: {kind}" + (f" (e.g. {examples[kind]})" if examples.get(kind, kind) != kind else "")
            for kind, count in (metrics.get("errors") or {}).items()]


async def run_bench_cli(args: argparse.Namespace, profile: HostProfile, session: Any) -> int:
    try:
        api_key = read_api_key(getattr(args, "api_key", None))
        counter = load_counter(getattr(args, "tokenizer", None))
    except (ApiKeyError, TokenizerError) as exc:
        print(f"gpuconsole: {exc}", file=sys.stderr)
        return 2
    if session is not None:
        base_url = await session.transport.http_base_url(profile.server_port)
        host = session.transport.label
    else:
        base_url, host = args.url.rstrip("/"), args.url
    try:
        runs = plan_runs(args, base_url, api_key)
    except WorkloadError as exc:
        print(f"gpuconsole: {exc}", file=sys.stderr)
        return 2
    results = []
    not_saved = False
    out_path = Path(args.output_file) if args.output_file else default_path()
    for cfg, prompts in runs:
        try:
            # On a loop of its own (uvloop when installed), so nothing else on this loop delays it.
            metrics = await asyncio.to_thread(run_loop, run_benchmark(cfg, prompts, counter=counter))
        except Exception as exc:  # noqa: BLE001 - one line, no traceback
            message = f"{type(exc).__name__}: {str(exc)[:200]}"
            print(f"gpuconsole: benchmark failed: {message.replace(api_key, '***') if api_key else message}",
                  file=sys.stderr)
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
            print(f"  output tokens counted by: {metrics.get('token_count') or '–'}")
            for line in format_errors(metrics):
                print(line)
    if args.json:
        print(json.dumps(results if args.sweep else results[0], indent=2))
    return 0 if all(r["completed"] for r in results) and not not_saved else 1
