"""The console's own cost, open on a quiet real host.

The host: OpenSSH's sshd on 127.0.0.1; 2 GPUs through a fake `nvidia-smi` first on the sshd
sessions' PATH that prints recorded real H200 output (tests/data/h200/); a log file that does not
grow; a finished 60-file model dir. No unit (the service pane says so) and no server listening.
The console: its own process, headless Textual at 120x40 through `ConsoleApp.for_session`.

Its CPU is utime + stime from /proc/PID/stat over the window (CPU time, not wall time), as % of
one core; each case runs `--runs` times, the median is reported, alternating cases so load from
other work on the machine falls on both. Targets (issues 11 and 16): <= 1 % of a core; recording
(`record=True`) adds <= 0.2 %. `--baseline` also measures an empty Textual app at 120x40.
`--profile FILE` runs py-spy on one extra run and writes its raw (collapsed) stacks there.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.hostkit import console_config, cpu_s, measure, median_runs, start_host  # noqa: E402

EMPTY_APP = r"""
import asyncio, sys
from textual.app import App
from textual.widgets import Footer, Static
class Empty(App):
    def compose(self):
        yield Static("at rest")
        yield Footer()
app = Empty()
async def main():
    asyncio.get_running_loop().call_later(float(sys.argv[1]), app.exit)
    await app.run_async(headless=True, size=(120, 40))
asyncio.run(main())
"""


def empty_app(warmup_s: float, window_s: float) -> float:
    proc = subprocess.Popen([sys.executable, "-c", EMPTY_APP, str(warmup_s + window_s + 1)])
    time.sleep(warmup_s)
    c0, w0 = cpu_s(proc.pid), time.monotonic()
    time.sleep(window_s)
    c1, w1 = cpu_s(proc.pid), time.monotonic()
    proc.wait(30)
    return 100 * (c1 - c0) / (w1 - w0)


def profile(config: dict[str, object], warmup_s: float, window_s: float, out: str) -> None:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")

    def during(pid: int) -> None:
        subprocess.Popen([spy, "record", "-p", str(pid), "-d", str(int(window_s)), "-r", "200", "-f", "raw",
                          "-o", out, "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    measure(config, warmup_s, window_s, during)
    time.sleep(2)


def main(runs: int, warmup_s: float, window_s: float, baseline: bool, profile_out: str | None,
         base: Path | None = None, counts: bool = False, no_recording: bool = False,
         cprofile_out: str | None = None, stacks_out: str | None = None) -> dict[str, object]:
    host = start_host(gpus=2, model_files=60, log=True)
    extra: dict[str, object] = {}
    try:
        plain, recorded, before, loads = [], [], [], []
        for _ in range(runs):
            if base is not None:  # interleaved: base, now, base, now ... (the load falls on both)
                loads.append(round(os.getloadavg()[0], 2))
                before.append(measure({**console_config(host, seconds=0), "counts": counts}, warmup_s, window_s,
                                      tree=base))
            loads.append(round(os.getloadavg()[0], 2))
            plain.append(measure({**console_config(host, seconds=0), "counts": counts}, warmup_s, window_s))
            if not no_recording:
                recorded.append(measure(console_config(host, seconds=0, record=True), warmup_s, window_s))
        if stacks_out:
            extra["stacks"] = measure({**console_config(host, seconds=0), "stacks": stacks_out},
                                      warmup_s, window_s)["cpu_pct"]
        if cprofile_out:
            extra["cprofile"] = measure({**console_config(host, seconds=0), "cprofile": cprofile_out},
                                        warmup_s, window_s)["cpu_pct"]
        if profile_out:
            profile(console_config(host, seconds=0), warmup_s, window_s, profile_out)
        sizes = [f.stat().st_size for f in (host.directory / "recordings").rglob("*") if f.is_file()]
    finally:
        host.stop()
    result: dict[str, object] = {
        "window_s": window_s, "warmup_s": warmup_s, "runs": runs, "cpus_on_machine": os.cpu_count(),
        "load_1m_at_each_start": loads, "load_1m_at_end": os.getloadavg()[0],
        "console": median_runs(plain),
    }
    if base is not None:
        result["base"] = {"tree": str(base), **median_runs(before)}
    if recorded:
        result["console_recording"] = median_runs(recorded)
        result["recording_adds_pct"] = round(median_runs(recorded)["cpu_pct_median"]
                                             - median_runs(plain)["cpu_pct_median"], 2)
        result["recording_bytes_per_run"] = sorted(sizes)
    result.update(extra)
    if baseline:
        empty = sorted(empty_app(warmup_s, window_s) for _ in range(runs))
        result["empty_textual_app_pct"] = round(empty[runs // 2], 2)
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=float, default=12.0, help="seconds before the window (connect, first polls)")
    ap.add_argument("--window", type=float, default=60.0)
    ap.add_argument("--baseline", action="store_true", help="also an empty Textual app at 120x40")
    ap.add_argument("--profile", metavar="FILE", help="py-spy raw stacks of one more run (console only)")
    ap.add_argument("--base", metavar="DIR", type=Path,
                    help="a base checkout (e.g. `git worktree add`/`git archive` of main): its console is measured "
                         "interleaved with this one's, run for run")
    ap.add_argument("--counts", action="store_true",
                    help="also count what the console drew in the window (frames, layouts, refreshes by widget)")
    ap.add_argument("--cprofile", metavar="FILE", help="cProfile stats of the UI thread over the window of one more run")
    ap.add_argument("--stacks", metavar="FILE",
                    help="the UI thread's stacks sampled every ms of CPU time over the window of one more run "
                         "(collapsed: `a;b;c count`)")
    ap.add_argument("--no-recording", action="store_true", help="leave out the recording-on runs")
    a = ap.parse_args()
    os.environ.setdefault("TMPDIR", tempfile.gettempdir())
    print(json.dumps(main(a.runs, a.warmup, a.window, a.baseline, a.profile, a.base, a.counts, a.no_recording,
                          a.cprofile, a.stacks),
                     indent=2))
