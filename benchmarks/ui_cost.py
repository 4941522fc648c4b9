"""The console's own work on a quiet host, counted in-process (issue 23 item 3).

The same quiet host as `quiet_host.py` (OpenSSH sshd on 127.0.0.1, 2 fake GPUs, a still log, a
finished model dir); the console runs in this process, headless at 120x40, and over the window
this script counts what the console did: its CPU (process time), Textual's compositor refreshes,
full layouts, plotext chart builds, the screen's flushes and its age timer, each with its CPU.
Counts do not depend on the machine's load the way a CPU percentage does; `--warmup 130` measures
the steady state (the time chart's 120 s window full).

    .venv/bin/python benchmarks/ui_cost.py --warmup 130 --window 30
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.hostkit import start_host  # noqa: E402

_cpu: collections.Counter[str] = collections.Counter()
_calls: collections.Counter[str] = collections.Counter()
_counting = False


def _count(owner: Any, name: str, label: str) -> None:
    real = getattr(owner, name)

    def counted(*a: Any, **k: Any) -> Any:
        t = time.process_time()
        try:
            return real(*a, **k)
        finally:
            if _counting:
                _cpu[label] += time.process_time() - t
                _calls[label] += 1

    setattr(owner, name, counted)


def main(warmup_s: float, window_s: float) -> dict[str, Any]:
    global _counting
    from textual.screen import Screen

    import console.ui.host_screen as host_screen
    import console.ui.panes.bench as bench
    from console.ui.app import ConsoleApp
    from console.config import HostProfile
    from console.host.session import HostSession, make_transport

    _count(Screen, "_compositor_refresh", "compositor refresh")
    _count(Screen, "_refresh_layout", "layout")
    _count(host_screen.HostScreen, "flush", "screen flush")
    _count(host_screen.HostScreen, "_tick", "age timer")
    _count(bench, "chart", "plotext time chart")
    host = start_host(gpus=2, model_files=60, log=True)
    s = host.sshd
    profile = HostProfile(name="bench", host="127.0.0.1", port=s.port, user=s.user, identity=str(s.client_key),
                          known_hosts=str(s.known_hosts), model_dir=str(host.model_dir), log_file=str(host.log_file))
    app = ConsoleApp.for_session(HostSession(profile, make_transport(profile)))
    marks: dict[str, float] = {}

    async def run() -> None:
        loop = asyncio.get_running_loop()

        def start() -> None:
            global _counting
            _counting, marks["cpu0"], marks["load0"] = True, time.process_time(), os.getloadavg()[0]

        def stop() -> None:
            global _counting
            _counting, marks["cpu1"], marks["load1"] = False, time.process_time(), os.getloadavg()[0]
            app.exit(0)

        loop.call_later(warmup_s, start)
        loop.call_later(warmup_s + window_s, stop)
        await app.run_async(headless=True, size=(120, 40))

    try:
        asyncio.run(run())
    finally:
        host.stop()
    cpu = marks["cpu1"] - marks["cpu0"]
    return {"warmup_s": warmup_s, "window_s": window_s, "console_cpu_pct": round(100 * cpu / window_s, 2),
            "load_1m": [round(marks["load0"], 2), round(marks["load1"], 2)],
            "work": {k: {"calls": _calls[k], "cpu_ms": round(_cpu[k] * 1000, 1)} for k in sorted(_calls)}}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="the console's own work on a quiet host, counted in-process")
    ap.add_argument("--warmup", type=float, default=130.0, help="seconds before the window (130: steady state)")
    ap.add_argument("--window", type=float, default=30.0)
    a = ap.parse_args()
    os.environ.setdefault("TERM", "xterm-256color")
    print(json.dumps(main(a.warmup, a.window), indent=2))
