"""What building one `LogEvent` costs (µs), as the parser builds them: SGLang's batch lines from a
journal (tests/kit/log_cost), each line's stamp a new string (as a regex group is), kind and
severity the parser's literals. Each tree is timed in its own process, the trees interleaved run
for run (the load falls on both), the median of the runs reported.

    .venv/bin/python benchmarks/log_event_build.py --base /tmp/base-tree --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TIMED = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2])
from console.host.parsers.sglang_log import LogEvent, parse_line
from tests.kit import log_cost
lines = [e.text for e in log_cost.by_thread(log_cost.journal_entries())]
parsed = [parse_line(t) for t in lines]
args = [(e.kind, e.text, e.ts, e.ranks, e.severity, e.phase) for e in parsed]
best = []
for _ in range(7):
    fresh = [(k, t, None if ts is None else (ts + ".")[:-1], r, s, p) for k, t, ts, r, s, p in args]
    t0 = time.perf_counter()
    for k, t, ts, r, s, p in fresh:
        LogEvent(k, t, ts, r, s, p)
    best.append((time.perf_counter() - t0) / len(fresh) * 1e6)
print(json.dumps(sorted(best)[len(best) // 2]))
"""


def one(tree: Path) -> float:
    out = subprocess.run([sys.executable, "-c", TIMED, str(tree), str(ROOT)], capture_output=True, text=True,
                         check=True, cwd=tree)
    return float(json.loads(out.stdout))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", type=Path, help="a base tree (`git archive` of main) timed beside this one")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    trees = {"now": ROOT} if a.base is None else {"base": a.base, "now": ROOT}
    runs: dict[str, list[float]] = {name: [] for name in trees}
    loads = []
    for _ in range(a.runs):
        for name, tree in trees.items():
            loads.append(round(os.getloadavg()[0], 1))
            runs[name].append(round(one(tree), 3))
    print(json.dumps({"us_per_line_median": {n: statistics.median(v) for n, v in runs.items()},
                      "runs": runs, "load_1m_at_each": loads}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
