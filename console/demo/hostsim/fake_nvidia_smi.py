"""A simulated `nvidia-smi` that answers the queries gpuconsole uses exactly as the real tool does
(recorded H200 output, driver 580: fields joined by ", ", `[N/A]` for unsupported ones), and prints
the plain table in the driver 580 layout (`render_table`, checked byte for byte against the table
recorded on an H200 in tests/data/h200/holders/)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

from console.demo.hostsim import drive, story
from console.demo.hostsim.simstate import load_state
from console.host.parsers.nvidia_smi_table import TableGpu, TableProcess

DRIVER = "580.95.05"
CUDA = "13.0"
_RULE = "+" + "-" * 89 + "+"
_GPU_RULE = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
_GPU_HEAD = (
    _GPU_RULE,
    "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
    "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
    "|                                         |                        |               MIG M. |",
    "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|",
)
_PROC_HEAD = (
    "",
    _RULE,
    "| Processes:                                                                              |",
    "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
    "|        ID   ID                                                               Usage      |",
    "|" + "=" * 89 + "|",
)


def _na(value: int | None, unit: str = "") -> str:
    return "N/A" if value is None else f"{value}{unit}"


def _fit(text: str, width: int, left: bool) -> str:
    """nvidia-smi's truncation: a long GPU name keeps its start and ends in '...'; a long process
    name keeps its end after '...' (seen in public outputs: 'NVIDIA RTX PRO 6000 Blac...',
    '...s\\Python\\Python311\\python.exe')."""
    if len(text) <= width:
        return text
    return text[: width - 3] + "..." if left else "..." + text[-(width - 3):]


def render_table(stamp: str, driver: str, cuda: str, gpus: Sequence[TableGpu],
                 processes: Sequence[TableProcess]) -> list[str]:
    """The plain `nvidia-smi` table of driver 580 (column widths read off the recorded H200 table)."""
    lines = [f"{stamp}       ", _RULE,
             f"| NVIDIA-SMI {driver:<23}Driver Version: {driver:<15}CUDA Version: {cuda:<9}|", *_GPU_HEAD]
    for g in gpus:
        power = f"{_na(g.power_w, 'W')} / {_na(g.power_cap_w, 'W'):>5}"
        memory = f"{_na(g.memory_used_mib, 'MiB'):>11} / {_na(g.memory_total_mib, 'MiB'):>9}"
        lines += [
            f"|{g.index:>4}  {_fit(g.name, 27, True):<29}{g.persistence:>4}  |"
            f"{g.bus_id:>19} {g.display_active:>3} |{g.ecc:>21} |",
            f"| {g.fan:<3}{_na(g.temperature_c, 'C'):>6}    {g.perf:<2}{power:>24} |"
            f"{memory:>23} |{_na(g.utilization_pct, '%'):>8}{g.compute_mode:>13} |",
            f"|{'':41}|{'':24}|{g.mig:>21} |",
            _GPU_RULE,
        ]
    lines += _PROC_HEAD
    if not processes:
        lines.append(f"|  {'No running processes found':<87}|")
    for p in processes:
        # An unknown size sits under "GPU Memory" as "N/A", left of where "NNNNNMiB" ends.
        memory = f"{p.memory_mib}MiB".rjust(14) + " " if p.memory_mib is not None else f"{'N/A':>9}      "
        lines.append(f"|{p.gpu:>5}{p.gi:>6}{p.ci:>5}{p.pid:>16}{p.type:>7}   {_fit(p.name, 32, False):<32}{memory}|")
    lines.append(_RULE)
    return lines


def _sim_table(t: float) -> list[str]:
    gpus = drive.gpu_states_now(t)
    rows = [TableGpu(g.index, story.GPU_NAME, "On", f"00000000:{g.index + 1:02X}:00.0", "Off", "0", "N/A",
                     g.temp_c, "P0" if g.util_pct else "P8", int(g.power_w), int(story.POWER_LIMIT_W),
                     g.used_mib, story.GPU_TOTAL_MIB, g.util_pct, "Default", "Disabled") for g in gpus]
    procs = [TableProcess(g.index, "N/A", "N/A", pid, "C", name, mem)
             for g in gpus for pid, name, mem in g.processes]
    return render_table(time.strftime("%a %b %e %H:%M:%S %Y"), DRIVER, CUDA, rows, procs)


def _gpu_value(g: story.SimGpu, field: str, units: bool) -> str:
    def u(value: str, unit: str) -> str:
        return f"{value} {unit}" if units else value

    table: dict[str, Callable[[], str]] = {
        "index": lambda: str(g.index),
        "name": lambda: story.GPU_NAME,
        "uuid": lambda: g.uuid,
        "gpu_uuid": lambda: g.uuid,
        "driver_version": lambda: DRIVER,
        "memory.used": lambda: u(str(g.used_mib), "MiB"),
        "memory.total": lambda: u(str(story.GPU_TOTAL_MIB), "MiB"),
        "memory.free": lambda: u(str(story.GPU_TOTAL_MIB - g.used_mib), "MiB"),
        "utilization.gpu": lambda: u(str(g.util_pct), "%"),
        "utilization.memory": lambda: u(str(g.util_pct // 2), "%"),
        "temperature.gpu": lambda: str(g.temp_c),
        "power.draw": lambda: u(f"{g.power_w:.2f}", "W"),
        "power.limit": lambda: u(f"{story.POWER_LIMIT_W:.2f}", "W"),
        "pstate": lambda: "P0" if g.util_pct else "P8",
        "mig.mode.current": lambda: "[N/A]",
    }
    if field not in table:
        raise KeyError(field)
    return table[field]()


def _header(fields: list[str], units: bool) -> str:
    unit = {"memory.used": " [MiB]", "memory.total": " [MiB]", "memory.free": " [MiB]",
            "utilization.gpu": " [%]", "utilization.memory": " [%]", "power.draw": " [W]",
            "power.limit": " [W]", "used_memory": " [MiB]"}
    return ", ".join(f + (unit.get(f, "") if units else "") for f in fields)


def main(args: list[str], t: float, out: Callable[[str], None]) -> int:
    opts = dict(a.split("=", 1) if "=" in a else (a, "") for a in args)
    fmt = opts.get("--format", "")
    noheader, units = "noheader" in fmt, "nounits" not in fmt
    if "-L" in args:
        for g in drive.gpu_states_now(t):
            out(f"GPU {g.index}: {story.GPU_NAME} (UUID: {g.uuid})")
        return 0
    if "--query-compute-apps" in opts:
        fields = opts["--query-compute-apps"].split(",")
        if not noheader:
            out(_header(fields, units))
        for g in drive.gpu_states_now(t):
            for pid, name, mem in g.processes:
                vals = {"gpu_uuid": g.uuid, "pid": str(pid), "process_name": name,
                        "used_memory": f"{mem} MiB" if units else str(mem),
                        "gpu_bus_id": f"00000000:{g.index + 1:02X}:00.0"}
                try:
                    out(", ".join(vals[f] for f in fields))
                except KeyError as exc:
                    print(f'Field "{exc.args[0]}" is not a valid field to query.', file=sys.stderr)
                    return 2
        return 0
    if "--query-gpu" in opts:
        fields = opts["--query-gpu"].split(",")
        loop_ms = int(opts.get("-lms", "0") or 0) if "-lms" in args else 0
        if "-lms" in args:
            loop_ms = int(args[args.index("-lms") + 1])
        while True:
            if not noheader:
                out(_header(fields, units))
            for g in drive.gpu_states_now(t):
                try:
                    out(", ".join(_gpu_value(g, f, units) for f in fields))
                except KeyError as exc:
                    print(f'Field "{exc.args[0]}" is not a valid field to query.', file=sys.stderr)
                    return 2
            if not loop_ms:
                return 0
            time.sleep(loop_ms / 1000)
            t += loop_ms / 1000 * _speed()
    if any(a.startswith("-") for a in args):
        print(f"{args[0]}: not simulated by gpuconsole's hostsim (the CSV queries, -L and the plain table are)",
              file=sys.stderr)
        return 2
    for line in _sim_table(t):
        out(line)
    return 0


def _speed() -> float:
    return float(load_state().get("speed", 1.0))
