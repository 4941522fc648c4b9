"""Run a gpuconsole command (the soak's core: `serve --demo ...`) under tracemalloc, and say what its
Python heap holds every `--every-s`: is a growing RSS objects that are kept, or the allocator's?

Every interval one JSON line to `--out`: the heap the interpreter's objects hold now and its peak
(MiB, tracemalloc's count: what Python allocated and has not freed), the process's RSS beside it,
and from `--settle-s` on, the allocation sites that grew most since the settle snapshot (file:line,
bytes, blocks). A heap that stays flat while the RSS grows is the allocator keeping freed pages
(fragmentation, arenas), not a leak of objects. tracemalloc slows the process (each allocation
traced, one frame deep): its CPU figures are not the console's.

    .venv/bin/python benchmarks/core_tracemalloc.py --out /tmp/core-heap.jsonl -- serve --demo --socket S
    .venv/bin/python benchmarks/soak.py --minutes 30 --trace-core        # the same, in the soak
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP = 10


def _rss_mib() -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def _sites(stats: list[tracemalloc.StatisticDiff] | list[tracemalloc.Statistic]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for s in stats[:TOP]:
        frame = s.traceback[0]
        site: dict[str, object] = {"at": f"{frame.filename.removeprefix(str(ROOT) + '/')}:{frame.lineno}",
                                   "bytes": s.size, "blocks": s.count}
        if isinstance(s, tracemalloc.StatisticDiff):
            site.update(grew_bytes=s.size_diff, grew_blocks=s.count_diff)
        out.append(site)
    return out


def watch(out: Path, every_s: float, settle_s: float) -> None:
    """The heap every `every_s`, appended to `out` (a daemon thread: it ends with the process)."""
    started = time.monotonic()
    settled: tracemalloc.Snapshot | None = None
    settled_mib: float | None = None
    while True:
        time.sleep(every_s)
        now = time.monotonic() - started
        current, peak = tracemalloc.get_traced_memory()
        record: dict[str, object] = {"minute": round(now / 60, 2), "heap_mib": round(current / 2**20, 3),
                                     "heap_peak_mib": round(peak / 2**20, 3), "rss_mib": _rss_mib()}
        snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        if settled is None and now >= settle_s:
            settled, settled_mib = snapshot, current / 2**20
        if settled is not None:
            record["heap_growth_mib_after_settle"] = round(current / 2**20 - (settled_mib or 0), 3)
            record["grew_most"] = _sites(snapshot.compare_to(settled, "lineno"))
        else:
            record["held_most"] = _sites(snapshot.statistics("lineno"))
        with out.open("a") as f:
            f.write(json.dumps(record) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="append the heap's JSON lines here")
    ap.add_argument("--every-s", type=float, default=60.0)
    ap.add_argument("--settle-s", type=float, default=600.0, help="the growth is counted from this second")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then gpuconsole's arguments")
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.every_s <= 0 or args.settle_s < 0:
        print("core_tracemalloc: give gpuconsole's arguments after --, and a positive interval", file=sys.stderr)
        return 2
    tracemalloc.start(1)  # before the console is imported: its modules are in the heap from the start
    sys.path.insert(0, str(ROOT))
    from console.cli.main import main as console_main  # the checkout's console, traced

    threading.Thread(target=watch, args=(args.out, args.every_s, args.settle_s), name="heap-watch",
                     daemon=True).start()
    return console_main(command)


if __name__ == "__main__":
    sys.exit(main())
