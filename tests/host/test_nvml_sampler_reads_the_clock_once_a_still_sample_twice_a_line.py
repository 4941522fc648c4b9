"""The sampler on the host reads the clock once a sample where nothing moved and twice a sample
that sends a line (its start, and its end for the line's cost_us): on the H200 each read cost
6-14 µs of a 1 Hz sample's CPU under Firecracker, ~5-7 under gVisor
(tests/data/h200/sampler_cost/s14). The line's time is still the wall clock's."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from console.host.parsers.nvml import parse_sampler_line
from console.host.sources.gpu import SAMPLER_SOURCE

# A pynvml of one GPU, imported by the sampler before its loop: it wraps the time module's clocks so
# that each read the sampler makes is counted in $COUNTS ("clock"), and each memory read too
# ("sample"). With MOVING set the power moves every sample (every sample sends a line).
FAKE_PYNVML = textwrap.dedent('''
    import os, time
    _counts = open(os.environ["COUNTS"], "a", buffering=1)
    def _counted(fn):
        def read():
            _counts.write("clock\\n")
            return fn()
        return read
    time.time, time.perf_counter = _counted(time.time), _counted(time.perf_counter)
    NVML_TEMPERATURE_GPU = 0
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_NO_PERMISSION = 4
    nvmlMemory_v2 = 0x02000028
    class NVMLError(Exception):
        value = 999
    _n = [0]
    class _O:
        def __init__(self, **kw):
            self.__dict__.update(kw)
    def nvmlInit(): pass
    def nvmlSystemGetDriverVersion(): return "580.159.04"
    def nvmlDeviceGetCount(): return 1
    def nvmlDeviceGetHandleByIndex(i): return i
    def nvmlDeviceGetName(h): return "NVIDIA H200"
    def nvmlDeviceGetUUID(h): return "GPU-0"
    def nvmlDeviceGetMemoryInfo(h, version=None):
        _n[0] += 1
        _counts.write("sample\\n")
        return _O(used=1000 << 20, total=143771 << 20)
    def nvmlDeviceGetUtilizationRates(h): return _O(gpu=0, memory=0)
    def nvmlDeviceGetPowerUsage(h): return 118776 + (_n[0] if os.environ.get("MOVING") else 0)
    def nvmlDeviceGetEnforcedPowerLimit(h): return 700000
    def nvmlDeviceGetTemperature(h, sensor): return 40
    def nvmlDeviceGetComputeRunningProcesses(h): return [_O(pid=4242, usedGpuMemory=990 << 20)]
    def nvmlSystemGetProcessName(pid): return "python3"
''')


def _run(tmp_path: Path, interval: str, lines: int, moving: bool) -> tuple[list[dict], list[str], float, float]:
    (tmp_path / "pynvml.py").write_text(FAKE_PYNVML)
    counts = tmp_path / "counts"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "COUNTS": str(counts), "MOVING": "1" if moving else ""}
    before = time.time()
    proc = subprocess.Popen([sys.executable, "-u", "-c", SAMPLER_SOURCE, interval], env=env,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        got = [parse_sampler_line(proc.stdout.readline()) for _ in range(lines + 1)]
    finally:
        proc.kill()
        proc.wait(30)
    after = time.time()
    events = counts.read_text().split()
    return got[1:], events, before, after


def _clocks_per_sample(events: list[str]) -> list[int]:
    """The clock reads between one memory read and the next (the sample's loop turn), the setup's
    and the last, cut short by the kill, left out."""
    turns: list[int] = []
    for event in events[events.index("sample"):]:
        if event == "sample":
            turns.append(0)
        else:
            turns[-1] += 1
    return turns[1:-1]


def test_a_still_sample_reads_the_clock_once(tmp_path: Path) -> None:
    records, events, before, after = _run(tmp_path, "0.01", 3, moving=False)
    turns = _clocks_per_sample(events)
    assert len(turns) >= 150, len(turns)  # three heartbeats at 100 samples a second
    # Every turn that sent no line read the clock once; the turns that sent one (the heartbeats, and
    # a whole line's new reading of the wall clock) read it at most four times.
    assert sorted(turns)[len(turns) - 3 - 1] == 1, turns
    assert max(turns) <= 4, turns
    assert all(before <= r["t"] <= after for r in records), (before, [r["t"] for r in records], after)


def test_a_sample_that_sends_a_line_reads_the_clock_twice(tmp_path: Path) -> None:
    # At 10 samples a second the power is read every sample (POWER_S) and moves each time, so each
    # turn sends a line: the clock read at its start and its end; a whole line (every 60th) reads the
    # wall clock again.
    records, events, before, after = _run(tmp_path, "0.1", 30, moving=True)
    turns = _clocks_per_sample(events)
    assert len(turns) >= 25, len(turns)
    assert sorted(turns)[: len(turns) - 3] == [2] * (len(turns) - 3), turns
    assert max(turns) <= 4, turns
    times = [r["t"] for r in records]
    assert all(before <= t <= after for t in times), (before, times, after)
    assert times == sorted(times)
