"""The sampler reads a GPU's memory through NVML's v2 call with its function found and the GPU's
struct made once, not through pynvml's wrapper (which makes a struct and looks the function up each
call): the same figures, and an error still read as pynvml's own call reads it."""

from __future__ import annotations

import ctypes
from collections import Counter
from types import SimpleNamespace

from console.host.sources import nvml_sampler


class FakeNVML:
    """pynvml as the sampler sees it: its public memory call, and the ctypes pieces under it."""

    NVML_TEMPERATURE_GPU = 0
    NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION, NVML_ERROR_GPU_IS_LOST = 3, 4, 15
    nvmlMemory_v2 = 0x02000028

    class NVMLError(Exception):
        def __init__(self, value: int) -> None:
            super().__init__(f"NVML error {value}")
            self.value = value

    class c_nvmlMemory_v2_t(ctypes.Structure):  # noqa: N801 - pynvml's name
        _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong), ("reserved", ctypes.c_ulonglong),
                    ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]

    def __init__(self, used: dict[int, list[int]], lost: set[tuple[int, int]] = frozenset()) -> None:
        self.used, self.lost = used, lost  # per GPU, MiB per sample; (gpu, sample) pairs that error
        self.n = 0  # the sample being taken (the test sets it): every call within it answers the same
        self.calls: Counter[str] = Counter()

    def _figures(self, h: int) -> tuple[int, int] | None:
        if (h, self.n) in self.lost:
            return None
        return self.used[h][self.n] << 20, 143771 << 20

    def _nvmlGetFunctionPointer(self, name: str):  # noqa: N802
        assert name == "nvmlDeviceGetMemoryInfo_v2"

        def fn(h, ref) -> int:
            self.calls["direct"] += 1
            struct = ref._obj
            assert struct.version == self.nvmlMemory_v2
            figures = self._figures(h)
            if figures is None:
                return self.NVML_ERROR_GPU_IS_LOST
            struct.used, struct.total = figures
            struct.free, struct.reserved = struct.total - struct.used, 0
            return 0

        return fn

    def nvmlDeviceGetMemoryInfo(self, h, version=None):  # noqa: N802
        self.calls["public"] += 1
        figures = self._figures(h)
        if figures is None:
            raise self.NVMLError(self.NVML_ERROR_GPU_IS_LOST)
        return SimpleNamespace(used=figures[0], total=figures[1])

    def nvmlDeviceGetUtilizationRates(self, h):  # noqa: N802
        return SimpleNamespace(gpu=7, memory=1)

    def nvmlDeviceGetPowerUsage(self, h):  # noqa: N802
        return 118_776

    def nvmlDeviceGetEnforcedPowerLimit(self, h):  # noqa: N802
        return 700_000

    def nvmlDeviceGetTemperature(self, h, sensor):  # noqa: N802
        return 40

    def nvmlDeviceGetComputeRunningProcesses(self, h):  # noqa: N802
        return []

    def nvmlSystemGetProcessName(self, pid):  # noqa: N802
        return "python3"

    def nvmlDeviceGetName(self, h):  # noqa: N802
        return "NVIDIA H200"

    def nvmlDeviceGetUUID(self, h):  # noqa: N802
        return f"GPU-{h}"


class PublicOnly(FakeNVML):
    """The same NVML through pynvml's public call alone (an older pynvml)."""

    def __getattribute__(self, name: str):
        if name in ("_nvmlGetFunctionPointer", "c_nvmlMemory_v2_t"):
            raise AttributeError(name)
        return super().__getattribute__(name)


def _samples(nvml: FakeNVML, n: int) -> list[list[dict]]:
    sampler = nvml_sampler.Sampler(nvml, [0, 1], interval_s=1.0)
    out = []
    for k in range(n):
        nvml.n = k
        record = sampler.sample()
        assert record is not None
        out.append(record["gpus"])
    return out


USED = {0: [1000, 1000, 3048, 3048, 5000], 1: [1, 2, 3, 4, 5]}


def test_memory_is_read_through_the_struct_made_once_with_the_public_calls_figures() -> None:
    direct, public = FakeNVML(USED), PublicOnly(USED)
    assert _samples(direct, 5) == _samples(public, 5)
    assert direct.calls == Counter(direct=10)  # two GPUs, five samples: never pynvml's wrapper
    assert public.calls == Counter(public=10)
    assert [gpu["memory_used_mib"] for gpus in _samples(FakeNVML(USED), 5) for gpu in gpus] == [
        1000, 1, 1000, 2, 3048, 3, 3048, 4, 5000, 5]


def test_an_error_of_the_direct_call_reads_as_pynvmls_own_call_reads_it() -> None:
    lost = {(1, 2)}
    direct, public = FakeNVML(USED, lost), PublicOnly(USED, lost)
    got, expected = _samples(direct, 4), _samples(public, 4)
    assert got == expected
    assert got[2][1] == {"index": 1, "error": "NVML error 15"}
    assert got[2][0]["memory_used_mib"] == 3048 and got[3][1]["memory_used_mib"] == 4
