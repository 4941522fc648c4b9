"""The NVML sampler: stdlib and pynvml only, so the same file runs in-process or on the host.

On the host it is started once as `python3 -u -c <this file> INTERVAL_S` over an SSH stream and
prints one JSON line per sample where something moved (and one a second regardless). On the lent
H200 (gVisor) a 1 Hz sample cost the whole process 316-318 µs of CPU, 70-73x below a one-shot
`nvidia-smi` (22-24 ms); of it the process's wake-up ~74 µs and the first memory query of a
wake-up ~111 (tests/data/h200/sampler_cost/s13). Under Firecracker (session 14) it cost 265-281 µs
side by side with main's 236-299, 73-78x below one-shot nvidia-smi's 20.6 ms; a stand-in that
reads memory, utilization and power through pynvml and sends a line cost 245-257 µs, one that reads
memory alone the cheapest way and sends nothing 153-170 (tests/data/h200/sampler_cost/s14). If NVML
cannot start it prints {"fatal": reason} and exits 3, and the console falls back to nvidia-smi.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
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


# How old a slow field may get (seconds) before it is read again: the GPU's temperature moves by
# degrees over seconds, its enforced power limit only when an operator sets it. Memory is read every
# sample. A GPU's processes are read again whenever its memory moved (a process that starts, grows
# or leaves moves it: a CUDA context alone is hundreds of MiB) and at least every PROCS_S, a
# minute, while it is still: the list was the dearest call of a sample on the H200 (~195 µs, where
# memory cost 41-81). Utilization and power are figures NVML computes
# on its own clock: utilization is "the percent of time over the past sample period" (1/6 s to 1 s
# by product; the GPU says which through nvmlDeviceGetSamples' timestamps: 200 ms on the H200), and
# the power reading moved every 100 ms on the H200 under a duty-cycled load
# (tests/data/h200/sampler_cost/s9/periods.json). Read more often, they return the same figure, so
# each is read once per its own period.
SLOW_S = 5.0
LIMIT_S = 60.0
PROCS_S = 60.0
POWER_S = 0.1
# With nothing moved, a line is still sent this often (the console marks the GPUs stale after 5 s).
HEARTBEAT_S = 1.0
UTIL_MIN_S, UTIL_MAX_S = 1 / 6, 1.0  # NVML's documented range for the utilization sample period


def utilization_period_s(pynvml: Any, handle: Any) -> float:
    """The GPU's utilization sample period: the median gap between the samples NVML keeps (its
    own timestamps, µs), within the documented 1/6 s .. 1 s; the shortest where it cannot say."""
    try:
        _kind, samples = pynvml.nvmlDeviceGetSamples(handle, pynvml.NVML_GPU_UTILIZATION_SAMPLES, 0)
        stamps = sorted(int(s.timeStamp) for s in samples)
        gaps = sorted(b - a for a, b in zip(stamps, stamps[1:], strict=False) if b > a)
        if not gaps:
            return UTIL_MIN_S
        return min(UTIL_MAX_S, max(UTIL_MIN_S, gaps[len(gaps) // 2] / 1e6))
    except Exception:  # noqa: BLE001 - not supported, an old pynvml, no samples yet
        return UTIL_MIN_S


def _direct_memory(pynvml: Any, count: int) -> tuple[Any, list[Any], list[Any]] | None:
    """NVML's v2 memory call as pynvml makes it, its function found and each GPU's struct made once:
    pynvml's own call makes a struct, looks the function up under a lock and checks the answer each
    time. On the H200 a process reading memory so once a second cost 135-165 µs where pynvml's call
    cost 187-192 (stand-ins; in the whole sampler the gain was within the run's noise,
    tests/data/h200/sampler_cost/s14).
    None where this pynvml has no such struct or function (its public call is used)."""
    try:
        fn = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetMemoryInfo_v2")
        structs = [pynvml.c_nvmlMemory_v2_t() for _ in range(count)]
        for struct in structs:
            struct.version = pynvml.nvmlMemory_v2
        return fn, structs, [ctypes.byref(struct) for struct in structs]
    except Exception:  # noqa: BLE001 - an old or stand-in pynvml, no v2 call in this driver
        return None


class Sampler:
    """One host's samples, what does not change read once: a GPU's name and UUID when its
    handle first answers, a process's name once per pid (forgotten when the pid leaves the GPU's
    list, so a reused pid is named again), whether NVML takes the v2 memory struct.

    With `interval_s` (the sampler on the host), the slow fields are read only as often as they
    can move (SLOW_S, LIMIT_S, PROCS_S above): each NVML call is an ioctl, and on the H200 the
    ioctls, not Python, were most of a sample's cost. Without it every field is read every sample."""

    def __init__(self, pynvml: Any, handles: list[Any], *, interval_s: float | None = None) -> None:
        self.pynvml, self.handles = pynvml, handles
        self.static: dict[int, tuple[str, str]] = {}
        self.names: dict[int, str] = {}
        self.memory_v2 = True
        self.direct: Any = None  # _direct_memory's, False where pynvml offers no way (made at the first read)
        self.name_lookups = 0  # how many process names were asked of NVML or /proc (tests count them)
        every = (lambda s: 1) if interval_s is None else (lambda s: max(1, round(s / max(interval_s, 1e-3))))
        self.slow_every, self.limit_every, self.procs_every = every(SLOW_S), every(LIMIT_S), every(PROCS_S)
        self.power_every = every(POWER_S)
        self.every, self.interval_s = every, interval_s
        self.util_every: dict[int, int] = {}  # per GPU, from its own utilization period (1 without interval_s)
        self.count = 0
        self.last: dict[int, dict[str, Any]] = {}  # per GPU: the slow fields as last read, the memory then
        self.calls = 0  # NVML calls made by sample() (tests and benchmarks count them)
        self.unsupported = (pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_NO_PERMISSION)
        self.usual = 0  # samples that step() put in the line without the whole path (tests count them)

    def _get(self, fn: Any, *args: Any) -> Any:
        """An NVML call whose 'not supported' or 'no permission' is None; other errors propagate."""
        try:
            return fn(*args)
        except self.pynvml.NVMLError as exc:
            if exc.value in self.unsupported:
                return None
            raise

    def _memory(self, index: int, handle: Any) -> Any:
        pynvml = self.pynvml
        if self.memory_v2:
            if self.direct is None:
                self.direct = _direct_memory(pynvml, len(self.handles)) or False
            if self.direct:
                fn, structs, refs = self.direct
                if fn(handle, refs[index]) == 0:
                    return structs[index]
                # an error: pynvml's own call again, which raises it or steps down to the v1 struct
            try:
                return pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
            except (AttributeError, TypeError, pynvml.NVMLError):
                self.memory_v2 = False
        return pynvml.nvmlDeviceGetMemoryInfo(handle)

    def _name(self, pid: int) -> str:
        name = self.names.get(pid)
        if name is None:
            self.name_lookups += 1
            name = self.names[pid] = _proc_name(self.pynvml, pid)
        return name

    def _read(self, index: int, handle: Any, last: dict[str, Any] | None) -> tuple[Any, ...]:
        """One GPU's fields as of this sample: each read when due (every one where `last` is None:
        the first sample, or the first after an error), else as last read. NVMLError propagates."""
        pynvml = self.pynvml
        mem = self._memory(index, handle)
        self.calls += 1
        count = self.count
        util_every = self.util_every.get(index)
        if util_every is None:
            util_every = self.util_every[index] = (
                1 if self.interval_s is None else self.every(utilization_period_s(pynvml, handle)))
        if last is None or count % util_every == 0:
            util = self._get(pynvml.nvmlDeviceGetUtilizationRates, handle)
            util = None if util is None else util.gpu
            self.calls += 1
        else:
            util = last["util"]
        if last is None or count % self.power_every == 0:
            power = self._get(pynvml.nvmlDeviceGetPowerUsage, handle)
            self.calls += 1
        else:
            power = last["power"]
        if last is None or count % self.limit_every == 0:
            limit = self._get(pynvml.nvmlDeviceGetEnforcedPowerLimit, handle)
            self.calls += 1
        else:
            limit = last["limit"]
        if last is None or count % self.slow_every == 0:
            temperature = self._get(pynvml.nvmlDeviceGetTemperature, handle, pynvml.NVML_TEMPERATURE_GPU)
            self.calls += 1
        else:
            temperature = last["temperature"]
        if last is None or mem.used != last["used"] or count % self.procs_every == 0:
            procs = self._get(pynvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
            self.calls += 1
            rows = [[p.pid, self._name(p.pid), None if p.usedGpuMemory is None else mib(p.usedGpuMemory)]
                    for p in procs]
        else:
            rows = last["processes"]
        return mem, util, power, limit, temperature, rows

    def sample(self, only_moved: bool = False, readings: list[Any] | None = None,
               t: float | None = None) -> dict[str, Any] | None:
        """One sample of every GPU. With `only_moved`, None when no GPU's figures moved since the
        sample before (nothing is built for a still host: the sampler's loop sends nothing).
        `readings`: each GPU's fields already read for this sample (`_read`'s, or its NVMLError)."""
        pynvml = self.pynvml
        moved = False
        gpus: list[dict[str, Any]] = []
        seen: set[int] = set()
        for index, handle in enumerate(self.handles):
            last = self.last.get(index)
            try:
                if readings is None:
                    reading = self._read(index, handle, last)
                elif isinstance(readings[index], pynvml.NVMLError):
                    raise readings[index]
                else:
                    reading = readings[index]
                mem, util, power, limit, temperature, rows = reading
                if (only_moved and last is not None and mem.used == last["used"] and util == last["util"]
                        and power == last["power"] and limit == last["limit"]
                        and temperature == last["temperature"] and rows == last["processes"]):
                    seen.update(row[0] for row in rows)
                    continue  # still: nothing to build
                moved = True
                static = self.static.get(index)
                if static is None:
                    static = self.static[index] = (_text(pynvml.nvmlDeviceGetName(handle)),
                                                   _text(pynvml.nvmlDeviceGetUUID(handle)))
                self.last[index] = {"limit": limit, "temperature": temperature, "used": mem.used,
                                    "processes": rows, "util": util, "power": power}
                seen.update(row[0] for row in rows)
                gpus.append({
                    "index": index,
                    "name": static[0],
                    "uuid": static[1],
                    "memory_used_mib": mib(mem.used),
                    "memory_total_mib": mib(mem.total),
                    "utilization_pct": util,
                    "temperature_c": temperature,
                    "power_w": None if power is None else power / 1000.0,
                    "power_limit_w": None if limit is None else limit / 1000.0,
                    "processes": rows,
                })
            except pynvml.NVMLError as exc:
                self.last.pop(index, None)  # back from an error: every field read again
                gpus.append({"index": index, "error": str(exc)})
                moved = True
        self.count += 1
        for pid in [pid for pid in self.names if pid not in seen]:
            del self.names[pid]
        if only_moved and not moved:
            return None
        return {"t": time.time() if t is None else t, "gpus": gpus}

    def step(self, delta: Delta, t: float | None = None) -> dict[str, Any] | None:
        """The next line the console reads: what `delta.record(self.sample(...))` makes, or None
        where nothing moved and no whole line is due. The usual sample of a host at work (every
        GPU read before and answering, no slow field due, its memory and processes as last read)
        moves only utilization or power: those go into the line as they are, with no whole sample
        built and compared field by field (on the H200 the fast path and the process list read once a
        minute took a 1 Hz sample from 397-430 µs of CPU to 331-353, tests/data/h200/sampler_cost/s13).
        Anything else takes the whole path with the fields already read. `t`: the line's time (the
        sampler's loop gives the one clock read it made; else the wall clock is read)."""
        if delta.full_due:
            return delta.record(self.sample(t=t))  # type: ignore[arg-type] - never None when whole
        readings: list[Any] = []
        usual = True
        lasts = self.last
        error = self.pynvml.NVMLError
        for index, handle in enumerate(self.handles):
            last = lasts.get(index)
            try:
                reading = self._read(index, handle, last)
            except error as exc:
                readings.append(exc)
                usual = False
                continue
            readings.append(reading)
            if (last is None or reading[0].used != last["used"] or reading[3] != last["limit"]
                    or reading[4] != last["temperature"] or reading[5] != last["processes"]
                    or "power_w" not in delta.sent.get(index, ())):
                usual = False
        if not usual:
            record = self.sample(only_moved=True, readings=readings, t=t)
            return None if record is None else delta.record(record)
        items: list[dict[str, Any]] = []
        moved = False
        for index, (_mem, util, power, _limit, _temperature, _rows) in enumerate(readings):
            last = lasts[index]
            if util == last["util"] and power == last["power"]:
                continue
            moved = True
            last["util"], last["power"] = util, power
            before = delta.sent[index]
            power_w = None if power is None else power / 1000.0
            item: dict[str, Any] = {}
            if before["utilization_pct"] != util:
                item["utilization_pct"] = util
            if before["power_w"] != power_w:
                item["power_w"] = power_w
            before["utilization_pct"], before["power_w"] = util, power_w  # the line sent before is gone
            if item:
                item["index"], item["delta"] = index, 1
                items.append(item)
        self.count += 1
        self.usual += 1
        if not moved:
            return None
        delta.count += 1
        return {"t": time.time() if t is None else t, "gpus": items, "delta": 1}

def sample(pynvml: Any, handles: list[Any]) -> dict[str, Any]:
    """One full sample with nothing cached (see Sampler for the loop's)."""
    return Sampler(pynvml, handles).sample()


class Delta:
    """A sample as the line the console reads: only what changed since the line before. A GPU
    whose fields are all as last sent is left out; one with some changed is sent as those fields
    with "delta": 1; the line itself says "delta": 1 when GPUs it omits are unchanged. Every
    `full_every`-th line is whole (a resync), and so is a GPU whose fields differ in kind (an
    error, or back from one). `console.host.parsers.nvml.merge_sample` puts them back together."""

    def __init__(self, full_every: int = 60) -> None:
        self.full_every = max(1, full_every)
        self.sent: dict[int, dict[str, Any]] = {}
        self.count = 0

    @property
    def full_due(self) -> bool:
        """The next line is whole: give it a whole sample."""
        return self.count % self.full_every == 0

    def record(self, record: dict[str, Any]) -> dict[str, Any]:
        full = self.full_due
        self.count += 1
        items: list[dict[str, Any]] = []
        for item in record["gpus"]:
            index = item["index"]
            before = self.sent.get(index)
            self.sent[index] = item
            if full or before is None or before.keys() != item.keys():
                items.append(item)
                continue
            changed = {k: v for k, v in item.items() if before[k] != v}
            if changed:
                changed["index"] = index
                changed["delta"] = 1
                items.append(changed)
        out: dict[str, Any] = {"t": record["t"], "gpus": items}
        if not full:
            out["delta"] = 1
        return out


def open_nvml() -> tuple[Any, list[Any], str]:
    import pynvml

    pynvml.nvmlInit()
    count = pynvml.nvmlDeviceGetCount()
    handles = []
    for i in range(count):
        handles.append(pynvml.nvmlDeviceGetHandleByIndex(i))
    return pynvml, handles, _text(pynvml.nvmlSystemGetDriverVersion())


_LINE_KEYS = ("t", "gpus", "delta", "cost_us")
_ITEM_KEYS = frozenset({"utilization_pct", "power_w", "index", "delta"})


def line(record: dict[str, Any], encode: Any) -> str:
    """The line as `encode` (compact JSON) writes it. The usual line (utilization or power that
    moved, or a still host's heartbeat: numbers only) is formatted directly: on the H200 the
    JSON encoder cost ~67 µs of CPU a line at 1 Hz, a format ~20 (s13/profile.json). Any other
    line, or a number JSON would not write as Python's repr, goes through `encode`."""
    if tuple(record) != _LINE_KEYS or record["delta"] != 1:
        return encode(record)
    t, cost = record["t"], record["cost_us"]
    if type(t) is not float or type(cost) is not float or t - t != 0.0 or cost - cost != 0.0:
        return encode(record)
    items = []
    for item in record["gpus"]:
        if not _ITEM_KEYS.issuperset(item):
            return encode(record)
        fields = []
        for key, value in item.items():
            if value is None:
                fields.append(f'"{key}":null')
            elif type(value) is int or (type(value) is float and value - value == 0.0):
                fields.append(f'"{key}":{value!r}')
            else:  # a bool, NaN or infinity: as the encoder writes it
                return encode(record)
        items.append("{" + ",".join(fields) + "}")
    gpus = ",".join(items)
    return f'{{"t":{t!r},"gpus":[{gpus}],"delta":1,"cost_us":{cost!r}}}'


def write(line: str) -> None:
    """The line and its newline in one write(2) (print() under -u makes two)."""
    data = (line + "\n").encode()
    while data:
        data = data[os.write(1, data):]


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
    sampler, delta = Sampler(pynvml, handles, interval_s=interval), Delta()
    encode = json.JSONEncoder(separators=(",", ":")).encode
    write(encode({"driver": driver, "count": len(handles)}))
    # One clock read a still sample, two a sample that sends a line (the start, and the end for
    # cost_us): each read cost 6-14 µs of a 1 Hz sample on the Firecracker H200, ~5-7 under gVisor
    # (tests/data/h200/sampler_cost/s14). The line's time is the start's monotonic reading set on the
    # wall clock as read at the last whole line (a minute at most, so a step of the wall clock is
    # taken up within a minute). The heartbeat is counted in samples: a still sample sleeps the
    # whole interval, so HEARTBEAT_S worth of them is never less than HEARTBEAT_S.
    heartbeat_every = max(1, math.ceil(HEARTBEAT_S / interval - 1e-9))
    wall_at, perf_at = time.time(), time.perf_counter()
    still = 0  # samples since the last line
    while True:
        started = time.perf_counter()
        # A still host (no figure moved) costs a read and no line, but for a line a second that
        # says so (the GPUs' readings stay fresh); every delta.full_every-th line is whole.
        t = wall_at + (started - perf_at)
        record = sampler.step(delta, t)
        if record is None:
            still += 1
            if still < heartbeat_every:
                time.sleep(interval)  # the read's µs not made up: a 1 Hz sample takes ~0.3 ms longer
                continue
            record = delta.record({"t": t, "gpus": []})
        still = 0
        took = time.perf_counter() - started
        record["cost_us"] = round(took * 1e6, 1)
        write(line(record, encode))  # one write per line
        if "delta" not in record:  # a whole line: the wall clock read again for the next minute's
            wall_at, perf_at = time.time(), time.perf_counter()
        time.sleep(max(0.0, interval - took))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
