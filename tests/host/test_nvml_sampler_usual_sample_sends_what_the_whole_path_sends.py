"""The sampler on the host puts the usual sample (only utilization or power moved) into its line
without building the whole sample (`Sampler.step`); what it sends must be exactly what the whole
path (`Delta.record(Sampler.sample(...))`) sends, sample by sample, for every kind of move: memory
that moves by less than a MiB or more, processes that come and go, slow fields on their clocks, a
power reading NVML does not support for a while, a GPU that errors and comes back."""

from __future__ import annotations

import json
import random
from collections import Counter
from types import SimpleNamespace

import pytest

from console.host.sources import nvml_sampler

GPUS, SAMPLES = 3, 1600
ENCODE = json.JSONEncoder(separators=(",", ":")).encode  # the sampler's own


class NVMLError(Exception):
    def __init__(self, value: int, text: str) -> None:
        super().__init__(text)
        self.value = value


def _script(seed: int) -> list[list[dict]]:
    """Each sample's truth per GPU, drawn once so that both paths are shown the same host."""
    rng = random.Random(seed)
    state = [{"used": (20_000 + 1000 * g) << 20, "util": 0, "power": 118_000, "temp": 40, "limit": 700_000,
              "pids": [100 + g]} for g in range(GPUS)]
    script = []
    for _ in range(SAMPLES):
        row = []
        for st in state:
            if rng.random() < 0.05:  # memory moves: by bytes within a MiB, or by MiBs with a process
                if rng.random() < 0.3:
                    st["used"] += rng.randint(1, 4095)
                else:
                    st["used"] += rng.randint(-500, 500) << 20
                    if rng.random() < 0.5:
                        st["pids"] = sorted(rng.sample(range(100, 110), rng.randint(0, 3)))
            if rng.random() < 0.005:  # a process list that changed with memory as it was (rare)
                st["pids"] = sorted(rng.sample(range(100, 110), rng.randint(0, 3)))
            if rng.random() < 0.3:
                st["util"] = rng.randint(0, 100)
            if rng.random() < 0.6:
                st["power"] = rng.randint(100_000, 700_000)
            if rng.random() < 0.1:
                st["temp"] = rng.randint(30, 80)
            if rng.random() < 0.005:
                st["limit"] = rng.choice([500_000, 600_000, 700_000])
            truth = dict(st, pids=list(st["pids"]))
            truth["fail"] = rng.choices(["", "memory", "utilization", "power_unsupported"],
                                        [0.985, 0.005, 0.005, 0.005])[0]
            row.append(truth)
        script.append(row)
    return script


class ScriptedNVML:
    """A pynvml whose every answer is the script's for the current sample `k` (set by the test),
    however many calls are made: the two paths see the same host."""

    NVML_TEMPERATURE_GPU = 0
    NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION = 3, 4
    nvmlMemory_v2 = 0x02000028
    NVMLError = NVMLError

    def __init__(self, script: list[list[dict]]) -> None:
        self.script, self.k = script, 0
        self.calls: Counter[str] = Counter()

    def _at(self, h: int, call: str) -> dict:
        self.calls[call] += 1
        truth = self.script[self.k][h]
        if truth["fail"] == call:
            raise NVMLError(999, "GPU is lost")
        return truth

    def nvmlDeviceGetMemoryInfo(self, h, version=None):  # noqa: N802
        return SimpleNamespace(used=self._at(h, "memory")["used"], total=143771 << 20)

    def nvmlDeviceGetUtilizationRates(self, h):  # noqa: N802
        return SimpleNamespace(gpu=self._at(h, "utilization")["util"], memory=0)

    def nvmlDeviceGetPowerUsage(self, h):  # noqa: N802
        truth = self._at(h, "power")
        if truth["fail"] == "power_unsupported":
            raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED, "Not Supported")
        return truth["power"]

    def nvmlDeviceGetEnforcedPowerLimit(self, h):  # noqa: N802
        return self._at(h, "limit")["limit"]

    def nvmlDeviceGetTemperature(self, h, sensor):  # noqa: N802
        return self._at(h, "temperature")["temp"]

    def nvmlDeviceGetComputeRunningProcesses(self, h):  # noqa: N802
        return [SimpleNamespace(pid=pid, usedGpuMemory=(pid - 90) << 20)
                for pid in self._at(h, "processes")["pids"]]

    def nvmlSystemGetProcessName(self, pid):  # noqa: N802
        self.calls["process_name"] += 1
        return f"/usr/bin/python3 worker-{pid}"

    def nvmlDeviceGetName(self, h):  # noqa: N802
        return "NVIDIA H200"

    def nvmlDeviceGetUUID(self, h):  # noqa: N802
        return f"GPU-{h}"


def _without_time(line: dict | None) -> str | None:
    return None if line is None else json.dumps({k: v for k, v in line.items() if k != "t"})


@pytest.mark.parametrize("interval_s", [1.0, 0.05])
def test_the_usual_sample_sends_exactly_what_the_whole_path_sends(interval_s: float) -> None:
    script = _script(seed=36)
    fast_nvml, whole_nvml = ScriptedNVML(script), ScriptedNVML(script)
    fast = nvml_sampler.Sampler(fast_nvml, list(range(GPUS)), interval_s=interval_s)
    whole = nvml_sampler.Sampler(whole_nvml, list(range(GPUS)), interval_s=interval_s)
    fast_delta, whole_delta = nvml_sampler.Delta(), nvml_sampler.Delta()
    sent, rng = 0, random.Random(7)
    for k in range(SAMPLES):
        fast_nvml.k = whole_nvml.k = k
        got = fast.step(fast_delta)
        record = whole.sample(only_moved=not whole_delta.full_due)
        want = None if record is None else whole_delta.record(record)
        assert _without_time(got) == _without_time(want), f"sample {k}"
        for record in (got, want):  # the line written is the encoder's, also where formatted directly
            if record is not None:
                record["cost_us"] = round(rng.uniform(5, 900), 1)
                assert nvml_sampler.line(record, ENCODE) == ENCODE(record)
        sent += got is not None
        # what each path keeps for the next sample is the same
        assert fast.last == whole.last and fast.names == whole.names and fast_delta.sent == whole_delta.sent
        assert fast_delta.count == whole_delta.count
    # the fast path made no NVML call more or less than the whole path
    assert fast_nvml.calls == whole_nvml.calls and fast.calls == whole.calls
    # both kinds of sample were there: most took the fast path, the moves took the whole one
    assert SAMPLES // 2 < fast.usual < SAMPLES - 100 and whole.usual == 0
    assert 0 < sent < SAMPLES  # lines were sent, and some samples sent none


def test_a_still_host_takes_the_fast_path_and_sends_nothing() -> None:
    script = _script(seed=1)
    for row in script:
        for g, truth in enumerate(row):
            truth.update(script[0][g], fail="")
    nvml = ScriptedNVML(script)
    sampler, delta = nvml_sampler.Sampler(nvml, list(range(GPUS)), interval_s=1.0), nvml_sampler.Delta()
    lines = []
    for k in range(59):  # the 60th line is the whole resync
        nvml.k = k
        lines.append(sampler.step(delta))
    assert lines[0] is not None and "delta" not in lines[0]
    assert lines[1:] == [None] * 58 and sampler.usual >= 50


@pytest.mark.parametrize("record", [
    {"t": 1796379802.755883, "gpus": [], "delta": 1, "cost_us": 41.0},
    {"t": 1.5, "gpus": [{"utilization_pct": 100, "power_w": 118.776, "index": 0, "delta": 1},
                        {"power_w": None, "index": 7, "delta": 1}], "delta": 1, "cost_us": 1e-05},
    {"t": 1.5, "gpus": [{"utilization_pct": None, "index": 1, "delta": 1}], "delta": 1, "cost_us": 3.0},
    {"t": 1.5, "gpus": [{"power_w": float("nan"), "index": 0, "delta": 1}], "delta": 1, "cost_us": 3.0},
    {"t": 1.5, "gpus": [{"power_w": float("inf"), "index": 0, "delta": 1}], "delta": 1, "cost_us": 3.0},
    {"t": 1.5, "gpus": [{"utilization_pct": True, "index": 0, "delta": 1}], "delta": 1, "cost_us": 3.0},
    {"t": 1.5, "gpus": [{"memory_used_mib": 5, "processes": [[7, "py\"th\\on", 1]], "index": 0, "delta": 1}],
     "delta": 1, "cost_us": 3.0},
    {"t": 1.5, "gpus": [{"index": 0, "error": "GPU is lost"}], "delta": 1, "cost_us": 3.0},
    {"t": 1.5, "gpus": [{"index": 0, "name": "NVIDIA H200", "power_w": 1.0}], "cost_us": 3.0},
    {"t": 1.5, "gpus": [], "delta": 2, "cost_us": 3.0},
    {"t": 1, "gpus": [], "delta": 1, "cost_us": 3.0},
])
def test_a_line_formatted_directly_is_what_the_encoder_writes(record: dict) -> None:
    assert nvml_sampler.line(record, ENCODE) == ENCODE(record)


def test_a_gpu_whose_last_line_was_an_error_is_sent_whole_not_as_a_change() -> None:
    """The fast path writes changes against the GPU's last line; where that line was an error
    (a Delta that saw one the sampler did not: one Delta fed by two loops) the GPU is sent whole."""
    script = _script(seed=2)
    nvml = ScriptedNVML(script)
    sampler, delta = nvml_sampler.Sampler(nvml, [0], interval_s=1.0), nvml_sampler.Delta()
    for k in range(3):
        nvml.k = k
        sampler.step(delta)
    delta.sent[0] = {"index": 0, "error": "GPU is lost"}
    for k in range(3, 40):
        nvml.k = k
        record = sampler.step(delta)
        if record is not None:
            break
    assert record is not None and record["gpus"][0]["name"] == "NVIDIA H200"
