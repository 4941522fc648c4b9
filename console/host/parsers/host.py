"""The host summary: hostname, kernel, uptime, load, CPUs and the disks of the watched paths."""

from __future__ import annotations

from collections.abc import Sequence

from console.model import DiskUsage, HostSummary
from console.host.parsers import ParseError, split_sections
from console.host.transport.base import operands


def host_summary_script(paths: Sequence[str]) -> str:
    """One round-trip: every section is printed after an `@@name` line, and all of it in one
    write: each `echo` and command wrote on its own, ~11 SSH packets a poll for the console to
    decrypt and wake up for, every 5 s (issue 36 item 2). The text is collected in a variable
    (the sections are text: losing the trailing newlines changes nothing) and printed at once."""
    sections = (
        "echo @@hostname; hostname; echo @@kernel; uname -r; "
        "echo @@uptime; cat /proc/uptime; echo @@loadavg; cat /proc/loadavg; "
        "echo @@nproc; nproc 2>/dev/null || getconf _NPROCESSORS_ONLN; "
        f"echo @@df; df -P -B1 -- {operands(paths)} 2>/dev/null; true"
    )
    return f"__gc_o=$({sections}); printf '%s\n' \"$__gc_o\""


def parse_df(text: str, paths: Sequence[str]) -> tuple[DiskUsage, ...]:
    """`df -P -B1 PATH...`: a header, then one line per path that exists (in order)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines and lines[0].startswith("Filesystem"):
        lines = lines[1:]
    disks: list[DiskUsage] = []
    for line_no, line in enumerate(lines, 2):
        parts = line.split()
        if len(parts) < 6:
            raise ParseError(f"df: expected 6 fields, got {len(parts)}: {line!r}", line_no=line_no)
        try:
            size, used, avail = int(parts[1]), int(parts[2]), int(parts[3])
        except ValueError:
            raise ParseError(f"df: sizes are not numbers: {line!r}", line_no=line_no) from None
        mount = " ".join(parts[5:])
        disks.append(DiskUsage("", mount, size, used, avail))
    # df drops paths that do not exist; match the survivors back to the paths by position only
    # when every path was answered.
    if len(disks) == len(paths):
        disks = [DiskUsage(p, d.mount, d.size_bytes, d.used_bytes, d.avail_bytes)
                 for p, d in zip(paths, disks, strict=True)]
    return tuple(disks)


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse_host_summary(text: str, paths: Sequence[str]) -> HostSummary:
    s = split_sections(text)
    if "hostname" not in s:
        raise ParseError("host summary: no hostname section in the output")
    up = s.get("uptime", "").split()
    load = s.get("loadavg", "").split()
    cpus = s.get("nproc", "").strip()
    return HostSummary(
        hostname=s["hostname"].strip() or "?",
        kernel=s.get("kernel", "").strip() or None,
        uptime_s=_float(up[0]) if up else None,
        load_1m=_float(load[0]) if len(load) > 2 else None,
        load_5m=_float(load[1]) if len(load) > 2 else None,
        load_15m=_float(load[2]) if len(load) > 2 else None,
        cpus=int(cpus) if cpus.isdigit() else None,
        disks=parse_df(s.get("df", ""), paths),
    )
