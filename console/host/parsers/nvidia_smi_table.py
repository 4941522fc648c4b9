"""The plain `nvidia-smi` table (driver 5xx layout, 91 columns), read back into values.

The console polls the CSV queries, never this table; the table is what an operator pastes and
what the simulator must print faithfully. This parser is how the tests compare a table with the
CSV of the same moment (`tests/data/h200/holders/`: both recorded on an H200). Lines it does not
know are skipped: the table is for people, its layout changes between drivers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADER = re.compile(r"NVIDIA-SMI\s+(\S+)\s+Driver Version:\s+(\S+)\s+CUDA Version:\s+(\S+)")
_ROW1 = re.compile(r"^\|\s*(\d+)\s+(.+?)\s+(On|Off|N/A)\s+\|\s*(\S+)\s+(On|Off|N/A)\s+\|\s*(.*?)\s*\|$")
_ROW2 = re.compile(r"^\|\s*(\S+)\s+(\S+?)C?\s+(P\d+|N/A)\s+(\S+?)W?\s*/\s*(\S+?)W?\s+\|"
                   r"\s*(\d+|N/A)(?:MiB)?\s*/\s*(\d+|N/A)(?:MiB)?\s+\|\s*(\d+|N/A)%?\s+(.+?)\s*\|$")
_ROW3 = re.compile(r"^\|\s+\|\s+\|\s*(.*?)\s*\|$")
_PROC = re.compile(r"^\|\s*(\d+)\s+(\S+)\s+(\S+)\s+(\d+)\s+(C\+G|C|G|M|M\+C)\s+(.+?)\s+(\d+MiB|N/A)\s*\|$")


@dataclass(frozen=True, slots=True)
class TableGpu:
    index: int
    name: str
    persistence: str
    bus_id: str
    display_active: str
    ecc: str
    fan: str
    temperature_c: int | None
    perf: str
    power_w: int | None
    power_cap_w: int | None
    memory_used_mib: int | None
    memory_total_mib: int | None
    utilization_pct: int | None
    compute_mode: str
    mig: str = ""


@dataclass(frozen=True, slots=True)
class TableProcess:
    gpu: int
    gi: str
    ci: str
    pid: int
    type: str
    name: str
    memory_mib: int | None


@dataclass(frozen=True, slots=True)
class SmiTable:
    version: str | None
    driver: str | None
    cuda: str | None
    gpus: tuple[TableGpu, ...]
    processes: tuple[TableProcess, ...]
    no_processes: bool


def _int(text: str) -> int | None:
    digits = text.rstrip("CWM%iB")
    return int(digits) if digits.isdigit() else None


def parse_table(text: str) -> SmiTable:
    version = driver = cuda = None
    gpus: list[TableGpu] = []
    procs: list[TableProcess] = []
    pending: dict[str, str | int | None] | None = None
    in_procs = no_procs = False
    for line in text.splitlines():
        line = line.rstrip()
        m = _HEADER.search(line)
        if m:
            version, driver, cuda = m.groups()
            continue
        if "Processes:" in line:
            in_procs = True
            continue
        if in_procs:
            if "No running processes found" in line:
                no_procs = True
            p = _PROC.match(line)
            if p:
                gpu, gi, ci, pid, kind, name, mem = p.groups()
                procs.append(TableProcess(int(gpu), gi, ci, int(pid), kind, name, _int(mem)))
            continue
        m1 = _ROW1.match(line)
        if m1 and pending is None:
            index, name, pers, bus, disp, ecc = m1.groups()
            pending = {"index": int(index), "name": name, "persistence": pers, "bus_id": bus,
                       "display_active": disp, "ecc": ecc}
            continue
        m2 = _ROW2.match(line)
        if m2 and pending is not None and "fan" not in pending:
            fan, temp, perf, power, cap, used, total, util, mode = m2.groups()
            pending.update({"fan": fan, "temperature_c": _int(temp), "perf": perf, "power_w": _int(power),
                            "power_cap_w": _int(cap), "memory_used_mib": _int(used),
                            "memory_total_mib": _int(total), "utilization_pct": _int(util), "compute_mode": mode})
            continue
        m3 = _ROW3.match(line)
        if m3 and pending is not None and "fan" in pending:
            gpus.append(TableGpu(mig=m3.group(1), **pending))  # type: ignore[arg-type]
            pending = None
    return SmiTable(version, driver, cuda, tuple(gpus), tuple(procs), no_procs)
