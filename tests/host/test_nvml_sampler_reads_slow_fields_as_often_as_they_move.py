"""The sampler on the host reads a GPU's slow fields only as often as they can move: memory every
sample; utilization once per NVML's own utilization sample period (from its samples' timestamps)
and power once a second (NVML's 1 s average); the temperature at most SLOW_S old; the enforced
power limit at most LIMIT_S old; the processes whenever the GPU's memory moved and at least every
PROCS_S (a minute). Each NVML call is an ioctl, and on the H200 the ioctls were most of a sample's cost."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

from console.host.sources import nvml_sampler


class FakeNVML:
    NVML_TEMPERATURE_GPU = 0
    NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION = 3, 4
    nvmlMemory_v2 = 0x02000028

    class NVMLError(Exception):
        value = 999

    def __init__(self, used: list[int], pids: list[list[int]]) -> None:
        self.used, self.pids, self.k = used, pids, -1
        self.calls: Counter[str] = Counter()
        self.temperature = 40

    def nvmlDeviceGetMemoryInfo(self, h, version=None):  # noqa: N802
        self.k += 1
        self.calls["memory"] += 1
        return SimpleNamespace(used=self.used[self.k] << 20, total=143771 << 20)

    def nvmlDeviceGetUtilizationRates(self, h):  # noqa: N802
        self.calls["utilization"] += 1
        return SimpleNamespace(gpu=50, memory=10)

    def nvmlDeviceGetPowerUsage(self, h):  # noqa: N802
        self.calls["power"] += 1
        return 300_000 + self.k

    def nvmlDeviceGetEnforcedPowerLimit(self, h):  # noqa: N802
        self.calls["limit"] += 1
        return 700_000

    def nvmlDeviceGetTemperature(self, h, sensor):  # noqa: N802
        self.calls["temperature"] += 1
        return self.temperature + self.k

    def nvmlDeviceGetComputeRunningProcesses(self, h):  # noqa: N802
        self.calls["processes"] += 1
        return [SimpleNamespace(pid=pid, usedGpuMemory=1 << 20) for pid in self.pids[self.k]]

    def nvmlSystemGetProcessName(self, pid):  # noqa: N802
        return f"proc-{pid}"

    def nvmlDeviceGetName(self, h):  # noqa: N802
        return "NVIDIA H200"

    def nvmlDeviceGetUUID(self, h):  # noqa: N802
        return "GPU-0"


def test_a_still_gpu_costs_three_calls_a_sample_and_its_slow_fields_are_read_on_their_clock() -> None:
    n = 120
    fake = FakeNVML(used=[1000] * n, pids=[[7]] * n)
    sampler = nvml_sampler.Sampler(fake, [0], interval_s=1.0)
    samples = [sampler.sample()["gpus"][0] for _ in range(n)]
    assert fake.calls["memory"] == fake.calls["utilization"] == fake.calls["power"] == n
    # at 1 s a sample: the temperature every 5th sample; the processes of a GPU whose memory stays
    # put every 60th, as the limit
    assert fake.calls["temperature"] == n // 5
    assert fake.calls["processes"] == n // 60 and fake.calls["limit"] == n // 60
    assert sampler.calls == 3 * n + n // 5 + n // 60 * 2
    # what a sample says is never older than its clock: the temperature read at k - k % 5
    for k, gpu in enumerate(samples):
        assert gpu["temperature_c"] == 40 + (k - k % 5)
        assert gpu["power_w"] == (300_000 + k) / 1000.0
        assert gpu["power_limit_w"] == 700.0 and gpu["processes"] == [[7, "proc-7", 1]]


class SampledNVML(FakeNVML):
    """A GPU that keeps utilization samples NVML-style: one every `period_us` (its timestamps)."""

    NVML_GPU_UTILIZATION_SAMPLES = 1

    def __init__(self, *args, period_us: int, **kw) -> None:
        super().__init__(*args, **kw)
        self.period_us = period_us

    def nvmlDeviceGetSamples(self, h, kind, last_seen):  # noqa: N802
        self.calls["samples"] += 1
        return 1, [SimpleNamespace(timeStamp=1_000_000 + i * self.period_us, sampleValue=0) for i in range(20)]


def test_at_twenty_samples_a_second_utilization_and_power_are_read_once_per_their_own_period() -> None:
    n = 120
    fake = SampledNVML(used=[1000] * n, pids=[[7]] * n, period_us=166_667)  # 1/6 s, as an H100 says
    sampler = nvml_sampler.Sampler(fake, [0], interval_s=0.05)
    samples = [sampler.sample()["gpus"][0] for _ in range(n)]
    assert fake.calls["memory"] == n and fake.calls["samples"] == 1  # the period asked once per GPU
    assert fake.calls["utilization"] == n // 3 and fake.calls["power"] == n // 2  # power moves every 100 ms
    for k, gpu in enumerate(samples):  # a figure never older than its own period
        assert gpu["power_w"] == (300_000 + (k - k % 2)) / 1000.0 and gpu["utilization_pct"] == 50
    assert sampler.calls < 2 * n  # was 3 a sample: memory, utilization, power every time


def test_a_gpu_whose_utilization_period_is_a_second_reads_it_once_a_second() -> None:
    fake = SampledNVML(used=[1000] * 40, pids=[[7]] * 40, period_us=1_000_000)
    sampler = nvml_sampler.Sampler(fake, [0], interval_s=0.05)
    for _ in range(40):
        sampler.sample()
    assert fake.calls["utilization"] == 2


def test_a_gpu_that_cannot_say_its_period_is_read_at_the_shortest_nvml_documents() -> None:
    fake = FakeNVML(used=[1000] * 30, pids=[[7]] * 30)  # no nvmlDeviceGetSamples: an old pynvml
    sampler = nvml_sampler.Sampler(fake, [0], interval_s=0.05)
    for _ in range(30):
        sampler.sample()
    assert fake.calls["utilization"] == 10  # every 3rd sample: 0.15 s, inside 1/6 s


def test_a_still_gpu_builds_nothing_when_asked_only_for_what_moved() -> None:
    fake = FakeNVML(used=[1000, 1000, 1000, 1200, 1200], pids=[[7]] * 5)
    fake.nvmlDeviceGetPowerUsage = lambda h: 300_000  # a GPU at rest: nothing moves
    sampler = nvml_sampler.Sampler(fake, [0], interval_s=1.0)
    fake.temperature = 40
    fake.nvmlDeviceGetTemperature = lambda h, sensor: 40
    got = [sampler.sample(only_moved=True) for _ in range(5)]
    assert got[0] is not None and got[1] is None and got[2] is None  # the first is whole; then still
    assert got[3] is not None and got[3]["gpus"][0]["memory_used_mib"] == 1200 and got[4] is None


def test_the_processes_are_read_again_the_sample_the_gpu_memory_moves() -> None:
    # memory moves at sample 2 (a process starts) and at sample 3 (it leaves): read both times
    used = [1000, 1000, 5000, 1000, 1000]
    pids = [[7], [7], [7, 8], [7], [7]]
    fake = FakeNVML(used=used, pids=pids)
    sampler = nvml_sampler.Sampler(fake, [0], interval_s=1.0)
    got = [[row[0] for row in sampler.sample()["gpus"][0]["processes"]] for _ in used]
    assert got == pids
    assert fake.calls["processes"] == 3  # samples 0, 2 and 3: not 1 or 4, where nothing moved
    assert "proc-8" not in sampler.names.values()  # the pid that left is forgotten


def test_without_an_interval_every_field_is_read_every_sample() -> None:
    fake = FakeNVML(used=[1000] * 7, pids=[[7]] * 7)
    sampler = nvml_sampler.Sampler(fake, [0])
    for _ in range(7):
        sampler.sample()
    assert set(fake.calls.values()) == {7}


def test_a_gpu_back_from_an_error_has_every_field_read_again() -> None:
    fake = FakeNVML(used=[1000] * 6, pids=[[7]] * 6)
    failing = {2}
    real_utilization = fake.nvmlDeviceGetUtilizationRates

    def utilization(h):
        if fake.k in failing:
            raise fake.NVMLError("GPU is lost")
        return real_utilization(h)

    fake.nvmlDeviceGetUtilizationRates = utilization
    sampler = nvml_sampler.Sampler(fake, [0], interval_s=1.0)
    out = [sampler.sample()["gpus"][0] for _ in range(5)]
    assert out[2] == {"index": 0, "error": "GPU is lost"}
    # samples 0 and 3 read everything (the first, and the first after the error); 1 and 4 do not
    assert fake.calls["temperature"] == 2 and fake.calls["limit"] == 2 and fake.calls["processes"] == 2
