"""The size of a recording: `gpuconsole --demo` (the demo host: 4 GPUs, the swap story, then the
new model serving) recorded for `--minutes` of real time, the recording directory's size sampled
every `--every` seconds.

The console's cadences are real time (GPU samples at 1 Hz, the host summary every 5 s, ...), so
an hour of recording is an hour of real time: run `--minutes 60` for the hour itself. With fewer
minutes the script also reports the steady rate (bytes per minute after `--steady-after`, when the
story is over and the host only serves) and what an hour at that rate would be, marked as an
extrapolation. The recording is gzip'd JSON lines flushed every 5 s, so the sampled sizes lag by
at most one flush.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def main(minutes: float, every: float, steady_after_s: float) -> dict[str, object]:
    data = Path(tempfile.mkdtemp(prefix="gpuconsole-recsize-"))
    env = {**os.environ, "XDG_DATA_HOME": str(data), "TERM": "xterm-256color"}
    env.pop("GPUCONSOLE_CONFIG", None)
    seconds = minutes * 60
    shot = data / "end.svg"
    console = subprocess.Popen([sys.executable, "-m", "console", "--demo", "--screenshot", str(shot),
                                "--screenshot-after", str(seconds)], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    recordings = data / "gpuconsole" / "recordings"
    t0 = time.time()
    samples: list[tuple[float, int]] = []
    while console.poll() is None:
        time.sleep(every)
        samples.append((round(time.time() - t0, 1), dir_bytes(recordings)))
        print(json.dumps({"t_s": samples[-1][0], "bytes": samples[-1][1]}), file=sys.stderr, flush=True)
    final = dir_bytes(recordings)
    from console.core.recording import read_recording

    kinds: collections.Counter[str] = collections.Counter()
    raw_bytes = 0
    files = sorted(f for f in recordings.rglob("*") if f.is_file())
    for f in files:
        rec = read_recording(f)
        for _t, event in rec.entries:
            name = type(event).__name__
            kinds[name if name != "ReadingChanged" else f"ReadingChanged:{event.source}"] += 1
        import gzip

        raw_bytes += len(gzip.decompress(f.read_bytes()))
    steady = [(t, b) for t, b in samples if t >= steady_after_s]
    result: dict[str, object] = {
        "minutes_recorded": round((time.time() - t0) / 60, 2), "console_exit": console.returncode,
        "recording_bytes": final, "uncompressed_bytes": raw_bytes, "files": len(files),
        "events_by_kind": dict(kinds.most_common()), "samples": samples,
    }
    if len(steady) >= 2:
        rate = (steady[-1][1] - steady[0][1]) / ((steady[-1][0] - steady[0][0]) / 60)
        result["steady_bytes_per_min"] = round(rate)
        at_steady_start = steady[0][1]
        result["hour_bytes" if minutes >= 60 else "hour_bytes_extrapolated"] = (
            final if minutes >= 60 else round(at_steady_start + rate * (60 - steady[0][0] / 60)))
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--every", type=float, default=30.0)
    ap.add_argument("--steady-after", type=float, default=180.0, help="seconds: the story is over by then")
    a = ap.parse_args()
    print(json.dumps(main(a.minutes, a.every, a.steady_after), indent=2))
