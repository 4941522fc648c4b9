"""Predicted against measured downtime for each swap path × runtime on the simulated host (issue 33,
item 4): each combination driven by the controller (console.demo.swap_demo.run_path_demo), its
report read from the recording, one line per run with the machine's load beside it.

    python -m benchmarks.swap_prediction [--speed 8] [--only restart:container,...]

The restart is played without a pre-warm (a cold read: the disk rate is what is checked), as
tests/swap/test_downtime_swap.py and test_a_restart_in_containers_is_predicted_within_ten_percent.py do.
Each run's simulated host lives in a temporary directory, removed after.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

from console.demo.swap_demo import run_path_demo
from console.domain.swap.report import report_from_recording

COMBOS = (("in-place", "systemd"), ("beside", "systemd"), ("restart", "systemd"),
          ("in-place", "container"), ("beside", "container"), ("restart", "container"), ("restart", "compose"))
COLD_RESTART = ("download", "paths", "install", "preflight", "stop_old", "start_new", "benchmark")


def one(path: str, runtime: str, speed: float) -> dict[str, object]:
    load_before = os.getloadavg()[0]
    saved = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix=f"swap-prediction-{path}-{runtime}-") as tmp:
        try:
            rec, _ = asyncio.run(run_path_demo(Path(tmp) / "out", path, speed=speed, work=Path(tmp) / "w", quiet=True,
                                               runtime=runtime, steps=COLD_RESTART if path == "restart" else None))
        finally:
            os.environ.clear()
            os.environ.update(saved)
        r = report_from_recording(rec)
    predicted, measured = r.get("predicted_downtime_s"), r.get("downtime_s")
    error = 100 * (measured - predicted) / predicted if predicted and measured is not None else None
    phases = {x["phase"]: (x["predicted_s"], x["measured_s"]) for x in r["downtime_paths"]["phases"]}
    return {"path": path, "runtime": runtime, "predicted_s": predicted, "measured_s": measured, "error_pct": error,
            "load": (load_before, os.getloadavg()[0]), "phases": phases}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.swap_prediction")
    parser.add_argument("--speed", type=float, default=8.0)
    parser.add_argument("--only", default="", help="PATH:RUNTIME,... (default: every combination)")
    args = parser.parse_args(argv)
    combos = [tuple(c.split(":", 1)) for c in args.only.split(",") if c] or list(COMBOS)
    print(f"{'path':9} {'runtime':9} {'predicted':>9} {'measured':>9} {'error':>7}  load (1-min, before → after)")
    for path, runtime in combos:
        row = one(path, runtime, args.speed)
        err = "–" if row["error_pct"] is None else f"{row['error_pct']:+.1f} %"
        lb, la = row["load"]  # type: ignore[misc]
        print(f"{path:9} {runtime:9} {row['predicted_s']!s:>9} {row['measured_s']!s:>9} {err:>7}  {lb:.1f} → {la:.1f}",
              flush=True)
        print("    " + ", ".join(f"{k} {p}/{m}" for k, (p, m) in row["phases"].items()), flush=True)  # type: ignore[attr-defined]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
