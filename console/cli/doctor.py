"""`gpuconsole doctor`: what works on the host, and how fast a command comes back."""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from console.config import HostProfile
from console.domain.paths import host_named
from console.host.sources.base import describe_error
from console.host.transport.base import Transport, operand


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str


def percentile(values: list[float], pct: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * pct / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def path_probe_script(path: str) -> str:
    return f"ls -ld -- {operand(path)} >/dev/null && echo present"


async def _probe(transport: Transport, name: str, script: str, ok_detail: str | None = None) -> Check:
    try:
        result = await transport.run(script, timeout=15)
    except Exception as exc:  # noqa: BLE001 - every failure is a failed check, not a crash
        return Check(name, False, describe_error(exc))
    out = result.text.strip().splitlines()
    first = out[0] if out else ""
    if result.ok:
        return Check(name, True, ok_detail or first or "ok")
    return Check(name, False, (result.error_text.splitlines() or [first or f"exit {result.exit_status}"])[-1])


def _first_line(script: str) -> str:
    """The script's first output line, keeping its exit status (sh has no pipefail)."""
    return f'__o=$({script}) || exit $?; printf "%s\\n" "$__o" | head -n 1'


async def measure_rtt(transport: Transport, runs: int = 50) -> dict[str, dict[str, float]]:
    async def timed(fresh: bool) -> list[float]:
        samples = []
        for _ in range(runs):
            started = time.perf_counter()
            if fresh:
                await transport.run_fresh("true", timeout=10)
            else:
                await transport.run("true", timeout=10)
            samples.append((time.perf_counter() - started) * 1000)
        return samples

    await transport.run("true", timeout=10)  # open the shell first: the pool's start is not a poll
    persistent = await timed(False)
    fresh = await timed(True)

    def summary(xs: list[float]) -> dict[str, float]:
        return {"p50": round(statistics.median(xs), 3), "p95": round(percentile(xs, 95), 3)}

    return {"persistent": summary(persistent), "exec_channel": summary(fresh)}


async def run_doctor(transport: Transport, profile: HostProfile, *, runs: int = 50) -> dict[str, Any]:
    checks: list[Check] = [Check("ssh" if profile.host else "local", True, transport.state.describe())]
    checks.append(await _probe(transport, "shell", "echo $0 ok", "persistent shell answers"))
    try:
        st = await transport.stat("/", timeout=10)
        checks.append(Check("sftp" if profile.host else "files", st.is_dir, "stat / ok"))
    except Exception as exc:  # noqa: BLE001
        checks.append(Check("sftp" if profile.host else "files", False, describe_error(exc)))
    checks.append(await _probe(transport, "python3", "python3 -c 'import sys; print(sys.version.split()[0])'"))
    checks.append(await _probe(
        transport, "pynvml",
        "python3 -c 'import pynvml; pynvml.nvmlInit(); "
        "print(\"driver\", pynvml.nvmlSystemGetDriverVersion(), \"gpus\", pynvml.nvmlDeviceGetCount())'"))
    checks.append(await _probe(
        transport, "nvidia-smi",
        _first_line("nvidia-smi --query-gpu=driver_version,name --format=csv,noheader")))
    checks.append(await _probe(transport, "systemctl", _first_line("systemctl --version")))
    checks.append(await _probe(transport, "journalctl", _first_line("journalctl --version")))
    for unit in (profile.unit, profile.compare_unit):
        if unit:
            checks.append(await _unit_check(transport, unit))
    if profile.server_port and not profile.container:
        checks.append(await _server_check(transport, profile.server_port))
    paths = [p for p in (profile.model_dir, profile.log_file, *profile.disk_paths) if p]
    for path in paths:
        # named as the host names it (the demo's sandbox left out: "path /shared", not "path
        # /tmp/gpusim-2wb_k623/shared"); the probe reads the exact path
        checks.append(await _probe(transport, f"path {host_named(path, profile.host_root)}",
                                   path_probe_script(path)))
    try:
        rtt = await measure_rtt(transport, runs)
    except Exception as exc:  # noqa: BLE001
        checks.append(Check("rtt", False, describe_error(exc)))
        rtt = {}
    return {"host": transport.label, "checks": [asdict(c) for c in checks], "rtt_ms": rtt}


async def _unit_check(transport: Transport, unit: str) -> Check:
    """The unit as systemd knows it (`systemctl show -p LoadState -p ActiveState`) and whether the SSH
    user reads its journal (`journalctl -u UNIT`: without the systemd-journal or adm group it shows
    nothing and says so). A unit not installed yet is no failure: the swap plan installs it."""
    name = f"unit {unit}"
    try:
        result = await transport.run(f"systemctl show -p LoadState -p ActiveState --value -- {operand(unit)}; "
                                     f"journalctl -u {operand(unit)} -n 1 --no-pager -q -o cat 2>&1 | head -n 5",
                                     timeout=15)
    except Exception as exc:  # noqa: BLE001 - every failure is a failed check, not a crash
        return Check(name, False, describe_error(exc))
    lines = result.text.splitlines()
    load, active, journal = (lines[0].strip() if lines else ""), (lines[1].strip() if len(lines) > 1 else ""), \
        " ".join(lines[2:]).lower()
    if not load:
        return Check(name, False, (result.error_text.splitlines() or ["systemctl show answered nothing"])[-1])
    if load == "not-found":
        return Check(name, True, "not installed yet (the swap plan's i installs it)")
    if "insufficient permissions" in journal or "not seeing messages" in journal:
        return Check(name, False, f"{load}, {active}; its journal is not readable by this user "
                                  "(add it to the systemd-journal or adm group, or log in as root)")
    return Check(name, True, f"{load}, {active}; journal readable")


async def _server_check(transport: Transport, port: int) -> Check:
    """The server's port as the console reaches it: /health through the SSH forward."""
    name = "server"
    try:
        base = await transport.http_base_url(port)
        async with httpx.AsyncClient(base_url=base, timeout=5.0) as client:
            r = await client.get("/health")
    except Exception as exc:  # noqa: BLE001
        return Check(name, False, f"nothing answers on the host's :{port}/health ({describe_error(exc)}); "
                                  "the server's port is --server-port or server_port")
    return Check(name, True, f":{port}/health answered {r.status_code}")


def format_doctor(report: dict[str, Any]) -> str:
    lines = [f"gpuconsole doctor: {report['host']}"]
    width = max((len(c["name"]) for c in report["checks"]), default=10)
    for c in report["checks"]:
        mark = "ok  " if c["ok"] else "FAIL"
        lines.append(f"  {mark} {c['name']:<{width}}  {c['detail']}")
    rtt = report.get("rtt_ms") or {}
    if rtt:
        p, e = rtt["persistent"], rtt["exec_channel"]
        ratio = e["p50"] / p["p50"] if p["p50"] else float("nan")
        lines.append(f"  round-trip of `true`: persistent shell p50 {p['p50']:.2f} ms, p95 {p['p95']:.2f} ms;"
                     f" new exec channel p50 {e['p50']:.2f} ms, p95 {e['p95']:.2f} ms ({ratio:.0f}x)")
    return "\n".join(lines)
