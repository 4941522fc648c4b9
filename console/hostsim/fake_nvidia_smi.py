"""A simulated `nvidia-smi` that answers the queries gpuconsole uses exactly as the real tool does
(recorded H200 output, driver 580: fields joined by ", ", `[N/A]` for unsupported ones)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from console.hostsim import drive, story

DRIVER = "580.95.05"


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
    out(f"NVIDIA-SMI {DRIVER}  (simulated by gpuconsole's hostsim; use --query-gpu)")
    return 0


def _speed() -> float:
    from console.hostsim.tools import load_state

    return float(load_state().get("speed", 1.0))
