"""A simulated `pynvml` for the simulated host's python3: the subset the NVML sampler uses."""

import json
import os
import time

from console.demo.hostsim import drive, story

NVML_TEMPERATURE_GPU = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
nvmlMemory_v2 = 0x02000028


class NVMLError(Exception):
    def __init__(self, value=999):
        super().__init__(f"NVML error {value}")
        self.value = value


class _Memory:
    def __init__(self, used_mib, total_mib):
        self.total = total_mib * (1 << 20)
        self.used = used_mib * (1 << 20)
        self.free = self.total - self.used


class _Util:
    def __init__(self, gpu):
        self.gpu = gpu
        self.memory = gpu // 2


class _Proc:
    def __init__(self, pid, mem_mib):
        self.pid = pid
        self.usedGpuMemory = mem_mib * (1 << 20)


def _t():
    with open(os.path.join(os.environ["GPUSIM_ROOT"], ".sim", "state.json")) as fh:
        state = json.load(fh)
    return (time.time() - state["start_s"]) * state["speed"]


def _gpu(handle):
    return drive.gpu_states_now(_t())[handle]


def nvmlInit():
    pass


def nvmlShutdown():
    pass


def nvmlSystemGetDriverVersion():
    return "580.95.05"


def nvmlDeviceGetCount():
    return len(drive.gpu_states_now(_t()))  # the scenario's count (issue 24: an 8-GPU host)


def nvmlDeviceGetHandleByIndex(i):
    if not 0 <= i < nvmlDeviceGetCount():
        raise NVMLError(2)
    return i


def nvmlDeviceGetName(h):
    return story.GPU_NAME


def nvmlDeviceGetUUID(h):
    return _gpu(h).uuid


def nvmlDeviceGetMemoryInfo(h, version=None):
    return _Memory(_gpu(h).used_mib, story.GPU_TOTAL_MIB)


def nvmlDeviceGetUtilizationRates(h):
    return _Util(_gpu(h).util_pct)


def nvmlDeviceGetTemperature(h, sensor):
    return _gpu(h).temp_c


def nvmlDeviceGetPowerUsage(h):
    return int(_gpu(h).power_w * 1000)


def nvmlDeviceGetEnforcedPowerLimit(h):
    return int(story.POWER_LIMIT_W * 1000)


def nvmlDeviceGetComputeRunningProcesses(h):
    return [_Proc(pid, mem) for pid, _name, mem in _gpu(h).processes]


def nvmlSystemGetProcessName(pid):
    for gpu in drive.gpu_states_now(_t()):
        for p, name, _mem in gpu.processes:
            if p == pid:
                return name
    raise NVMLError(6)
