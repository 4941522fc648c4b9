"""gpuconsole's benchmark client side by side with SGLang's own `bench_serving`, in one run, against
the same loopback server with exact timing that reports its own truth (benchmarks/loopback_server.py).

For each scenario (zero think time: the clients' ceiling; paced: TTFT 20 ms, 5 ms per token) and
each concurrency, both clients run as their users run them, each in a fresh process, interleaved
(the order alternates between repetitions), with the same workload: random prompts of
--input-len words (one token each for the locally built tokenizer), --output-len tokens out,
ignore_eos, one warm-up request. Figures are medians over the repetitions:

- req/s and output tok/s, as each client reports them (bench_serving's own JSONL line);
- TTFT overhead = the client's TTFT minus the server's truth (request read -> first token
  written), for the mean and for p99 (p99 of the client minus p99 of the truth);
- ITL mean, against the server's pace.

Where SGLang's bench_serving comes from, first found wins:
1. `--bench-serving-file PATH` or `$SGLANG_BENCH_SERVING_FILE`: its `bench_serving.py` run as a
   standalone script (sglang <= 0.5.5 ship a self-contained one; its imports are in this
   project's `peer` extra: `pip install -e '.[peer]'`). To get one without installing SGLang:
   `pip download --no-deps sglang==0.5.5 -d /tmp/sgl && unzip -o -j /tmp/sgl/sglang-0.5.5-*.whl
   sglang/bench_serving.py -d /tmp/sgl` and pass `--bench-serving-file /tmp/sgl/bench_serving.py`.
2. an installed `sglang` package: `python -m sglang.bench_serving`.
Neither: only gpuconsole's client runs, and the report says so.

It needs a tokenizer (it counts prompt tokens): a word-level one is built locally, so nothing is
downloaded. bench_serving's backend is `sglang-oai-chat` (the same /v1/chat/completions endpoint).

    .venv/bin/python benchmarks/bench_client.py --bench-serving-file /tmp/sgl/bench_serving.py
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.loopback_server import build_tokenizer, start_in_process  # noqa: E402


def truth(url: str) -> dict[str, Any]:
    import urllib.request

    with urllib.request.urlopen(url + "/truth", timeout=10) as resp:  # noqa: S310 - loopback only
        return dict(json.loads(resp.read()))


def child_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def find_peer(path: str | None) -> list[str] | None:
    path = path or os.environ.get("SGLANG_BENCH_SERVING_FILE")
    if path:
        if not Path(path).is_file():
            sys.exit(f"bench_client: {path}: no such file (see --help for how to get bench_serving.py)")
        return [sys.executable, path]
    import importlib.util

    if importlib.util.find_spec("sglang") is not None:
        return [sys.executable, "-m", "sglang.bench_serving"]
    return None


# Our client as it runs without the `bench` extra's uvloop and orjson (its fallbacks: asyncio's
# own loop, the json module), in the same virtualenv: the two imports made to fail.
STDLIB = ("import runpy, sys; sys.modules['uvloop'] = None; sys.modules['orjson'] = None; "
          "sys.argv[0] = 'console'; runpy.run_module('console', run_name='__main__', alter_sys=True)")


def run_ours(url: str, n: int, c: int, a: argparse.Namespace, work: Path, stdlib: bool = False) -> dict[str, Any]:
    python = [sys.executable, "-c", STDLIB] if stdlib else [sys.executable, "-m", "console"]
    cmd = [*python, "bench", "--url", url, "--num-prompts", str(n),
           "--input-len", str(a.input_len), "--output-len", str(a.output_len), "--concurrency", str(c),
           "--warmup", "1", "--json", "--output-file", str(work / "ours.jsonl")]
    if a.tokenizer:
        cmd += ["--tokenizer", str(a.tokenizer)]
    cpu = child_cpu_s()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)
    if out.returncode not in (0, 1):
        raise RuntimeError(f"gpuconsole bench failed: {out.stderr[-500:]}")
    m = json.loads(out.stdout)
    m["client_cpu_s"] = child_cpu_s() - cpu
    return m


def run_peer(peer: list[str], url: str, n: int, c: int, a: argparse.Namespace, work: Path) -> dict[str, Any]:
    out_file = work / f"peer-{time.monotonic_ns()}.jsonl"
    cmd = [*peer, "--backend", "sglang-oai-chat", "--base-url", url, "--model", "zero",
           "--tokenizer", str(a.tokenizer_dir), "--dataset-name", "random-ids", "--num-prompts", str(n),
           "--random-input-len", str(a.input_len), "--random-output-len", str(a.output_len),
           "--random-range-ratio", "1.0", "--max-concurrency", str(c), "--warmup-requests", "1",
           "--output-file", str(out_file), "--disable-tqdm", "--seed", "1"]
    cpu = child_cpu_s()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=work)
    if out.returncode != 0 or not out_file.exists():
        raise RuntimeError(f"bench_serving failed ({out.returncode}): {(out.stderr or out.stdout)[-800:]}")
    m = json.loads(out_file.read_text().splitlines()[-1])
    m["client_cpu_s"] = child_cpu_s() - cpu
    return m


def row(m: dict[str, Any], t: dict[str, Any], n: int, c: int) -> dict[str, float]:
    # Closed loop at c: the server could have served c / (its mean time per request) req/s; what
    # a client reaches below that is its own time between requests.
    server_bound = c * 1000 / t["duration_mean_ms"] if t.get("duration_mean_ms") else 0.0
    return {
        "completed": m["completed"],
        "req_s": m["request_throughput"],
        "out_tok_s": m["output_throughput"],
        "ttft_mean_ms": m["mean_ttft_ms"],
        "ttft_p99_ms": m["p99_ttft_ms"],
        "ttft_overhead_mean_ms": m["mean_ttft_ms"] - (t["mean_ms"] or 0.0),
        "ttft_overhead_p99_ms": m["p99_ttft_ms"] - (t["p99_ms"] or 0.0),
        "itl_mean_ms": m["mean_itl_ms"],
        "cpu_ms_per_req": 1000 * m["client_cpu_s"] / max(n, 1),
        "truth_ttft_mean_ms": t["mean_ms"] or 0.0,
        "server_bound_req_s": server_bound,
        "req_s_vs_server_bound_pct": 100 * m["request_throughput"] / server_bound if server_bound else 0.0,
    }


def medians(rows: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(statistics.median(r[k] for r in rows), 2) for k in rows[0]}


def table(report: dict[str, Any]) -> str:
    lines = ["| scenario | c | client | req/s | out tok/s | TTFT overhead mean / p99 (ms) | ITL mean (ms) |"
             " CPU ms/req | req/s of the server's bound |", "|---|---|---|---|---|---|---|---|---|"]
    for key, res in report["results"].items():
        scenario, c = key.rsplit(" c=", 1)
        for client, m in res.items():
            lines.append(f"| {scenario} | {c} | {client} | {m['req_s']:.1f} | {m['out_tok_s']:,.0f} | "
                         f"{m['ttft_overhead_mean_ms']:.2f} / {m['ttft_overhead_p99_ms']:.2f} | "
                         f"{m['itl_mean_ms']:.2f} | {m['cpu_ms_per_req']:.1f} | "
                         f"{m['req_s_vs_server_bound_pct']:.1f} % |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--concurrency", default="1,8,32", help="levels, comma-separated")
    ap.add_argument("--scenarios", default="zero,paced", help="zero (no think time) and/or paced")
    ap.add_argument("--ttft-ms", type=float, default=20.0, help="paced: server time to the first token")
    ap.add_argument("--itl-ms", type=float, default=5.0, help="paced: server time per later token")
    ap.add_argument("--input-len", type=int, default=256)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--zero-requests", type=int, default=1500, help="requests per run, zero think time")
    ap.add_argument("--paced-requests-per-c", type=int, default=12, help="paced: requests per run = this x c (min 30)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--bench-serving-file", help="SGLang's bench_serving.py, run standalone (see below)")
    ap.add_argument("--no-peer", action="store_true", help="only gpuconsole's client")
    ap.add_argument("--tokenizer", action="store_true",
                    help="also give gpuconsole the tokenizer (it counts with usage when the server sends it)")
    ap.add_argument("--json-out", help="write the whole report here")
    ap.add_argument("--stdlib-too", action="store_true",
                    help="also our client without uvloop and orjson (asyncio's loop, json), in the same reps")
    a = ap.parse_args()
    peer = None if a.no_peer else find_peer(a.bench_serving_file)
    work = Path(tempfile.mkdtemp(prefix="gpuconsole-bench-client-"))
    a.tokenizer_dir = build_tokenizer(work / "tokenizer")
    a.tokenizer = a.tokenizer_dir if a.tokenizer else None
    levels = [int(x) for x in a.concurrency.split(",")]
    report: dict[str, Any] = {
        "workload": {"input_len": a.input_len, "output_len": a.output_len, "reps": a.reps,
                     "paced": {"ttft_ms": a.ttft_ms, "itl_ms": a.itl_ms}},
        "peer": " ".join(peer[1:]) if peer else "not found: pass --bench-serving-file (see --help)",
        "cores": os.cpu_count(), "results": {}, "raw": {}}
    for scenario in a.scenarios.split(","):
        pace = (a.ttft_ms, a.itl_ms) if scenario == "paced" else (0.0, 0.0)
        proc, url = start_in_process(*pace)
        try:
            for c in levels:
                n = a.zero_requests if scenario == "zero" else max(30, a.paced_requests_per_c * c)
                clients = ["gpuconsole", *(["gpuconsole (stdlib)"] if a.stdlib_too else []), "bench_serving"]
                raw: dict[str, list[dict[str, float]]] = {name: [] for name in clients}
                ratios: list[float] = []
                for rep in range(a.reps):
                    order = clients if rep % 2 == 0 else list(reversed(clients))
                    for client in order:
                        if client == "bench_serving" and peer is None:
                            continue
                        truth(url)  # reset
                        load = os.getloadavg()[0]
                        m = run_ours(url, n, c, a, work, stdlib=client.endswith("(stdlib)")) \
                            if client.startswith("gpuconsole") else run_peer(peer, url, n, c, a, work)  # type: ignore[arg-type]
                        r = row(m, truth(url), n, c)
                        r["load_1m"] = round(load, 2)
                        raw[client].append(r)
                        print(f"{scenario} c={c} rep {rep} {client}: {json.dumps(r)}", file=sys.stderr, flush=True)
                    if raw["gpuconsole"] and raw.get("bench_serving") and len(raw["bench_serving"]) == rep + 1:
                        # The ratio within one rep (both runs a minute apart), not of two medians.
                        ratios.append(round(raw["gpuconsole"][-1]["req_s"] / raw["bench_serving"][-1]["req_s"], 2))
                report.setdefault("req_s_ratio_by_rep", {})[f"{scenario} c={c}"] = ratios
                key = f"{scenario} c={c}"
                report["raw"][key] = raw
                report["results"][key] = {k: medians(v) for k, v in raw.items() if v}
        finally:
            proc.terminate()
            proc.wait(5)
    report["table"] = table(report)
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(report, indent=2))
    print(report["table"])
    print(f"\npeer: {report['peer']}; {a.reps} repetitions, medians; {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
