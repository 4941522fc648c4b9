"""The GPU sampler on the host (issue 36 item 4): what does not change is read once (a GPU's
name and UUID, a process's name per pid) and each line carries only what changed since the last,
which the console merges back into the whole sample."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from console.host.parsers.nvml import gpus_from_sample, merge_sample, parse_sampler_line
from console.host.sources import nvml_sampler
from console.host.sources.gpu import SAMPLER_SOURCE

# A pynvml of one GPU and one process whose memory grows by 1 MiB every third sample; every call
# the sampler makes is counted in $COUNTS (one line per call: the function's name).
FAKE_PYNVML = textwrap.dedent('''
    import os
    NVML_TEMPERATURE_GPU = 0
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_NO_PERMISSION = 4
    nvmlMemory_v2 = 0x02000028
    class NVMLError(Exception):
        value = 999
    _n = [0]
    def _count(name):
        with open(os.environ["COUNTS"], "a") as fh:
            fh.write(name + "\\n")
    class _O:
        def __init__(self, **kw):
            self.__dict__.update(kw)
    def nvmlInit(): pass
    def nvmlSystemGetDriverVersion(): return "580.159.04"
    def nvmlDeviceGetCount(): return 1
    def nvmlDeviceGetHandleByIndex(i): return i
    def nvmlDeviceGetName(h):
        _count("name")
        return "NVIDIA H200"
    def nvmlDeviceGetUUID(h):
        _count("uuid")
        return "GPU-1081cd7b-52eb-fd89-c0b1-ba91b23923dd"
    def nvmlDeviceGetMemoryInfo(h, version=None):
        k = _n[0]
        _n[0] += 1
        return _O(used=(1000 + (0 if os.environ.get("STILL") else k // 3)) << 20, total=143771 << 20)
    def nvmlDeviceGetUtilizationRates(h): return _O(gpu=0, memory=0)
    def nvmlDeviceGetPowerUsage(h): return 118776
    def nvmlDeviceGetEnforcedPowerLimit(h): return 700000
    def nvmlDeviceGetTemperature(h, sensor): return 40
    def nvmlDeviceGetComputeRunningProcesses(h):
        return [_O(pid=4242, usedGpuMemory=(990 + (0 if os.environ.get("STILL") else (_n[0] - 1) // 3)) << 20)]
    def nvmlSystemGetProcessName(pid):
        _count("process_name")
        return "/opt/torch/.venv/bin/python3"
''')


def _sampler_lines(tmp_path: Path, count: int, still: bool = False) -> tuple[list[str], list[str]]:
    (tmp_path / "pynvml.py").write_text(FAKE_PYNVML)
    counts = tmp_path / "counts"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "COUNTS": str(counts), "STILL": "1" if still else ""}
    proc = subprocess.Popen([sys.executable, "-u", "-c", SAMPLER_SOURCE, "0.01"], env=env,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    try:
        lines = [proc.stdout.readline() for _ in range(count + 1)]
    finally:
        proc.kill()
        proc.wait(30)
    return lines, counts.read_text().split()


def test_the_host_sampler_names_a_process_once_and_sends_only_what_changed(tmp_path: Path) -> None:
    lines, calls = _sampler_lines(tmp_path, 30)
    assert parse_sampler_line(lines[0]) == {"driver": "580.159.04", "count": 1}
    # A GPU's name and UUID, and the process's name, asked once for 30 samples (not 30 times).
    assert calls.count("name") == 1 and calls.count("uuid") == 1
    assert calls.count("process_name") == 1
    # Each line after the first carries only what changed (the memory moves every third sample,
    # and with it the process's): never the name, the UUID or a figure that stayed; the samples
    # between, where nothing moved, send no line.
    for line in lines[2:]:
        (gpu,) = parse_sampler_line(line)["gpus"]
        assert set(gpu) == {"index", "delta", "memory_used_mib", "processes"}, line
    # ...and the console puts every sample back together as the host saw it.
    known: dict[int, dict] = {}
    for k, line in enumerate(lines[1:]):
        gpus, problems = gpus_from_sample(merge_sample(known, parse_sampler_line(line)))
        assert problems == ()
        (gpu,) = gpus
        assert (gpu.name, gpu.uuid) == ("NVIDIA H200", "GPU-1081cd7b-52eb-fd89-c0b1-ba91b23923dd")
        assert gpu.memory_used_mib == 1000 + k and gpu.memory_total_mib == 143771
        assert gpu.power_w == 118.776 and gpu.temperature_c == 40
        assert [(p.pid, p.name, p.memory_mib) for p in gpu.processes] == [
            (4242, "/opt/torch/.venv/bin/python3", 990 + k)]


def test_a_still_host_sends_a_line_a_second_not_one_a_sample(tmp_path: Path) -> None:
    """At 100 samples a second on a GPU where nothing moves, the sampler reads every sample but
    writes a line only once a second (the heartbeat that keeps the console's reading fresh),
    each still saying the whole GPU after the merge."""
    lines, _calls = _sampler_lines(tmp_path, 4, still=True)
    records = [parse_sampler_line(line) for line in lines[1:]]
    assert "delta" not in records[0] and all(r["delta"] == 1 and r["gpus"] == [] for r in records[1:])
    times = [r["t"] for r in records]
    assert all(b - a >= 0.95 for a, b in zip(times, times[1:])), times  # not 0.01 s apart
    known: dict[int, dict] = {}
    for record in records:
        (gpu,), _ = gpus_from_sample(merge_sample(known, record))
        assert gpu.memory_used_mib == 1000 and gpu.power_w == 118.776


def _gpu(index: int, used: int, procs: list[list], **extra: object) -> dict:
    return {"index": index, "name": "NVIDIA H200", "uuid": f"GPU-{index}", "memory_used_mib": used,
            "memory_total_mib": 143771, "utilization_pct": 0, "temperature_c": 40, "power_w": 118.0,
            "power_limit_w": 700.0, "processes": procs, **extra}


def test_a_gpu_that_errors_and_comes_back_reads_as_the_host_says_after_the_merge() -> None:
    samples = [
        [_gpu(0, 10, []), _gpu(1, 20, [])],
        [_gpu(0, 10, []), _gpu(1, 20, [[7, "python3", 5]])],
        [_gpu(0, 11, []), {"index": 1, "error": "GPU is lost"}],
        [_gpu(0, 11, []), {"index": 1, "error": "GPU is lost"}],
        [_gpu(0, 11, []), _gpu(1, 25, [])],
        [_gpu(0, 12, [], power_w=None), _gpu(1, 25, [])],
    ] * 3
    delta = nvml_sampler.Delta(full_every=7)
    known: dict[int, dict] = {}
    for t, gpus in enumerate(samples):
        line = json.dumps(delta.record({"t": float(t), "gpus": gpus}))
        merged = merge_sample(known, parse_sampler_line(line))
        assert merged["gpus"] == gpus and merged["t"] == float(t)


def test_a_reused_pid_is_named_again_once_the_old_process_left_the_gpu() -> None:
    names = iter(["first", "second"])
    alive = [[4242], [4242], [], [4242], [4242]]

    class Fake:
        class NVMLError(Exception):
            value = 999

        NVML_TEMPERATURE_GPU = NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NO_PERMISSION = nvmlMemory_v2 = 0

        def __init__(self) -> None:
            self.k = -1

        def nvmlDeviceGetMemoryInfo(self, h, version=None):  # noqa: N802
            self.k += 1
            return type("M", (), {"used": 0, "total": 1 << 30})()

        def nvmlDeviceGetComputeRunningProcesses(self, h):  # noqa: N802
            return [type("P", (), {"pid": pid, "usedGpuMemory": 1 << 20})() for pid in alive[self.k]]

        def nvmlSystemGetProcessName(self, pid):  # noqa: N802
            return next(names)

        def __getattr__(self, name):  # every other reading: a constant
            return lambda *a, **k: type("V", (), {"gpu": 0})() if "Utilization" in name else 1

    sampler = nvml_sampler.Sampler(Fake(), [0])
    seen = [[p[1] for p in sampler.sample()["gpus"][0]["processes"]] for _ in alive]
    assert seen == [["first"], ["first"], [], ["second"], ["second"]]
    assert sampler.name_lookups == 2
