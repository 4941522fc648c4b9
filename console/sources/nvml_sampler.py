"""The NVML sampler: stdlib and pynvml only, so the same file runs in-process or on the host.

On the host it is started once as `python3 -u -c <this file> INTERVAL_S` over an SSH stream and
prints one JSON line per sample; NVML queries cost microseconds (1-6 us measured on an H200)
where a `nvidia-smi` process costs 30-40 ms. If NVML cannot start it prints {"fatal": reason}
and exits 3, and the console falls back to nvidia-smi.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _proc_name(pynvml: Any, pid: int) -> str:
    """NVML's own name for the process (what nvidia-smi prints), else /proc."""
    try:
        name = _text(pynvml.nvmlSystemGetProcessName(pid))
        if name:
            return name
    except Exception:  # noqa: BLE001 - not supported, no permission, or gone
        pass
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
        name = argv[0].decode(errors="replace") if argv and argv[0] else ""
        if name:
            return name
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return "?"


def mib(n_bytes: int) -> int:
    """MiB as nvidia-smi prints them: rounded up. Measured on an H200 (driver 580.159.04): of 20
    memory states, ceil(used bytes / MiB) gave nvidia-smi's memory.used in all 20, the nearest MiB
    in 10 (tests/data/h200/rounding.json)."""
    return -(-int(n_bytes) // (1 << 20))


def _call(fn: Any, *args: Any) -> Any:
    """An NVML call whose 'not supported' becomes None; other errors propagate."""
    import pynvml

    try:
        return fn(*args)
    except pynvml.NVMLError as exc:
        if exc.value in (pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_NO_PERMISSION):
            return None
        raise


def sample(pynvml: Any, handles: list[Any]) -> dict[str, Any]:
    gpus: list[dict[str, Any]] = []
    for index, handle in enumerate(handles):
        try:
            try:
                mem = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
            except (AttributeError, TypeError, pynvml.NVMLError):
                mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
            util = _call(pynvml.nvmlDeviceGetUtilizationRates, handle)
            power = _call(pynvml.nvmlDeviceGetPowerUsage, handle)
            limit = _call(pynvml.nvmlDeviceGetEnforcedPowerLimit, handle)
            procs = _call(pynvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
            gpus.append({
                "index": index,
                "name": _text(pynvml.nvmlDeviceGetName(handle)),
                "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
                "memory_used_mib": mib(mem.used),
                "memory_total_mib": mib(mem.total),
                "utilization_pct": None if util is None else util.gpu,
                "temperature_c": _call(pynvml.nvmlDeviceGetTemperature, handle, pynvml.NVML_TEMPERATURE_GPU),
                "power_w": None if power is None else power / 1000.0,
                "power_limit_w": None if limit is None else limit / 1000.0,
                "processes": [
                    [p.pid, _proc_name(pynvml, p.pid),
                     None if p.usedGpuMemory is None else mib(p.usedGpuMemory)]
                    for p in procs
                ],
            })
        except pynvml.NVMLError as exc:
            gpus.append({"index": index, "error": str(exc)})
    return {"t": time.time(), "gpus": gpus}


def open_nvml() -> tuple[Any, list[Any], str]:
    import pynvml

    pynvml.nvmlInit()
    count = pynvml.nvmlDeviceGetCount()
    handles = []
    for i in range(count):
        handles.append(pynvml.nvmlDeviceGetHandleByIndex(i))
    return pynvml, handles, _text(pynvml.nvmlSystemGetDriverVersion())


def main(argv: list[str]) -> int:
    interval = float(argv[0]) if argv else 1.0
    try:
        pynvml, handles, driver = open_nvml()
    except ImportError as exc:
        print(json.dumps({"fatal": f"pynvml is not importable by the host's python3 ({exc}); "
                                   "pip install nvidia-ml-py"}))
        return 3
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
        print(json.dumps({"fatal": f"NVML did not start: {exc}"}))
        return 3
    print(json.dumps({"driver": driver, "count": len(handles)}), flush=True)
    while True:
        started = time.perf_counter()
        record = sample(pynvml, handles)
        record["cost_us"] = round((time.perf_counter() - started) * 1e6, 1)
        print(json.dumps(record), flush=True)
        time.sleep(max(0.0, interval - (time.perf_counter() - started)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
