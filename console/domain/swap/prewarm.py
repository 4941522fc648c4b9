"""Pre-warm: read the new model's shards into the host's page cache while the old model still
serves, so the restart's weights phase reads memory instead of disk (issue 24).

Shown with its exact commands first (console.domain.swap.actions' pattern): every path is absolute and
`shlex.quote`d, follows `--` where a tool takes options, and the whole script runs under
`timeout -k`. It reads at idle I/O priority (`nice -n 19`, `ionice -c 3` where the host has it),
rate-limited, one chunk at a time, and checks MemAvailable (`free -b`) before every chunk: below
the margin it stops and says so (exit 4) — the page cache must never push the serving model's
host into swapping. It runs detached (setsid nohup) with a log whose last line is its progress.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from console.domain.swap import actions as act
from console.host.transport.base import quote

CHUNK_MIB = 1024
DEFAULT_RATE_MBPS = 1000  # MB/s: a share of a fast NVMe, leaving the serving model's I/O alone
DEFAULT_MARGIN_GIB = 32  # MemAvailable below this stops the pre-warm
EXIT_LOW_MEMORY = 4
PROGRESS_RE = re.compile(r"^prewarm: (\d+)/(\d+) bytes")
STOPPED_RE = re.compile(r"^prewarm: stopped: (.*)$")
DONE_RE = re.compile(r"^prewarm: done (\d+) bytes")


def _work(model_dir: str) -> tuple[str, str, str]:
    work = f"{model_dir.rstrip('/')}/.cache/gpuconsole"
    return work, f"{work}/prewarm.log", f"{work}/prewarm.pid"


def shard_paths(model_dir: str, names: Sequence[str]) -> list[str]:
    """Absolute paths of the shards: plain names only (no `/`, no `..`), so nothing outside the
    model directory is ever read."""
    model_dir = act.check_path(model_dir, "model directory").rstrip("/")
    out = []
    for name in names:
        if not name or "/" in name or name in (".", "..") or "\x00" in name or "\n" in name:
            raise act.ActionError(f"not a shard file name: {name!r}")
        out.append(f"{model_dir}/{name}")
    if not out:
        raise act.ActionError("no shards to pre-warm")
    return out


def script(files: Sequence[str], total_bytes: int, *, rate_mbps: int = DEFAULT_RATE_MBPS,
           margin_gib: int = DEFAULT_MARGIN_GIB, chunk_mib: int = CHUNK_MIB) -> str:
    """The reader itself (POSIX sh). Progress lines: `prewarm: DONE/TOTAL bytes`."""
    for f in files:
        act.check_path(f, "shard")
    if rate_mbps <= 0 or margin_gib < 0 or chunk_mib <= 0:
        raise act.ActionError("pre-warm rate, margin and chunk must be positive")
    rate = int(rate_mbps) * 1_000_000
    margin = int(margin_gib) << 30
    chunk = int(chunk_mib) << 20
    q = quote
    lines = [
        "set -u",
        'IO=""; if command -v ionice >/dev/null 2>&1; then IO="ionice -c 3"; fi',
        "command -v free >/dev/null 2>&1 || { echo 'prewarm: stopped: free is not on the host: MemAvailable "
        "cannot be watched'; exit 3; }",
        f"margin={margin}; rate={rate}; chunk={chunk}; total={int(total_bytes)}; done_b=0; start=$(date +%s)",
        f"for f in {' '.join(q(f) for f in files)}; do",
        '  size=$(stat -c %s -- "$f") || { echo "prewarm: stopped: cannot read $f"; exit 1; }',
        "  n=$(( (size + chunk - 1) / chunk )); i=0",
        '  while [ "$i" -lt "$n" ]; do',
        "    avail=$(free -b | awk '/^Mem:/{print $7}')",
        '    if [ "${avail:-0}" -lt "$margin" ]; then echo "prewarm: stopped: MemAvailable ${avail:-?} B is below '
        f'the margin $margin B"; exit {EXIT_LOW_MEMORY}; fi',
        f'    nice -n 19 $IO dd if="$f" of=/dev/null bs=1M skip=$((i * {int(chunk_mib)})) count={int(chunk_mib)} '
        'status=none || { echo "prewarm: stopped: reading $f failed"; exit 1; }',
        "    i=$((i + 1)); left=$((size - (i - 1) * chunk)); [ \"$left\" -gt \"$chunk\" ] && left=$chunk",
        "    done_b=$((done_b + left))",
        '    echo "prewarm: $done_b/$total bytes"',
        "    ahead=$(( done_b / rate - ($(date +%s) - start) )); [ \"$ahead\" -gt 0 ] && sleep \"$ahead\"",
        "  done",
        "done",
        'echo "prewarm: done $done_b bytes"',
    ]
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class PrewarmPlan:
    files: tuple[str, ...]
    total_bytes: int
    rate_mbps: int
    margin_gib: int

    @property
    def eta_s(self) -> float:
        return self.total_bytes / (self.rate_mbps * 1_000_000)


def prewarm(model_dir: str, names: Sequence[str], total_bytes: int, *, rate_mbps: int = DEFAULT_RATE_MBPS,
            margin_gib: int = DEFAULT_MARGIN_GIB, timeout_s: int | None = None) -> act.Action:
    """Start the pre-warm detached (its own session, its log and pid file beside the download's)."""
    files = shard_paths(model_dir, names)
    body = script(files, total_bytes, rate_mbps=rate_mbps, margin_gib=margin_gib)
    work, log, pid = _work(act.check_path(model_dir, "model directory"))
    # Generous: twice the time the rate allows, and at least ten minutes.
    bound = int(timeout_s or max(600, 2 * total_bytes / (rate_mbps * 1_000_000)))
    q = quote
    launcher = "\n".join([
        f"if [ -f {q(pid)} ] && kill -0 \"$(cat {q(pid)})\" 2>/dev/null; then "
        f"echo \"already running: pid $(cat {q(pid)})\"; exit 0; fi",
        f"mkdir -p -- {q(work)}",
        f"setsid nohup {act.bounded(['sh', '-c', body], bound)} >{q(log)} 2>&1 </dev/null &",
        f"echo $! > {q(pid)}; echo \"started: pid $!, log {log}\"",
    ])
    return act.Action("prewarm", "Pre-warm the new model's shards into the page cache",
                      (act.RemoteCommand(launcher, 30, f"read {len(files)} shards into the page cache, detached"),),
                      waits_for=f"every shard read ({total_bytes / 1e9:.0f} GB at ≤ {rate_mbps} MB/s), "
                                f"stopping if MemAvailable falls below {margin_gib} GiB")


def stop_prewarm(model_dir: str) -> act.Action:
    _, _, pid = _work(act.check_path(model_dir, "model directory"))
    q = quote
    body = (f"if [ -f {q(pid)} ] && kill -0 \"$(cat {q(pid)})\" 2>/dev/null; then "
            f"kill -TERM -- \"-$(cat {q(pid)})\" 2>/dev/null || kill -TERM \"$(cat {q(pid)})\"; rm -f -- {q(pid)}; "
            "echo stopped; else echo 'no pre-warm running'; fi")
    return act.Action("stop_prewarm", "Stop the pre-warm", (act.RemoteCommand(body, 20, "stop the pre-warm"),))


def progress_check(model_dir: str) -> str:
    """`running`/`stopped` on the first line, then the log's last line."""
    _, log, pid = _work(act.check_path(model_dir, "model directory"))
    q = quote
    return (f"if [ -f {q(pid)} ] && kill -0 \"$(cat {q(pid)})\" 2>/dev/null; then echo running; else echo stopped; "
            f"fi; {act.bounded(['tail', '-n', '2', '--', log], 10)} 2>/dev/null || true")


@dataclass(frozen=True, slots=True)
class PrewarmProgress:
    running: bool
    done_bytes: int
    total_bytes: int
    finished: bool
    stopped_reason: str | None

    def text(self) -> str:
        pct = 100 * self.done_bytes / self.total_bytes if self.total_bytes else 0
        if self.stopped_reason:
            return f"pre-warm stopped at {self.done_bytes / 1e9:.0f} GB ({pct:.0f} %): {self.stopped_reason}"
        if self.finished:
            return f"pre-warmed {self.done_bytes / 1e9:.0f} GB (100 %)"
        return f"pre-warming: {self.done_bytes / 1e9:.0f} of {self.total_bytes / 1e9:.0f} GB ({pct:.0f} %)"


def parse_progress(text: str, total_bytes: int) -> PrewarmProgress:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    running = bool(lines) and lines[0] == "running"
    last = lines[-1] if len(lines) > 1 else ""
    done, finished, stopped = 0, False, None
    for line in lines[1:]:  # the last progress line before a stop still says how far it got
        if m := PROGRESS_RE.match(line):
            done = int(m.group(1))
    if m := DONE_RE.match(last):
        done, finished = int(m.group(1)), True
    elif m := STOPPED_RE.match(last):
        stopped = m.group(1)[:200]
    if not running and not finished and stopped is None:
        stopped = "the pre-warm is no longer running" + (f" (last: {last[:120]})" if last else "")
    return PrewarmProgress(running, done, total_bytes, finished, stopped)


def fincore_command(files: Sequence[str]) -> str:
    """Page-cache residency of the shards; prints NO_FINCORE (exit 127) where util-linux lacks it."""
    for f in files:
        act.check_path(f, "shard")
    return ("command -v fincore >/dev/null 2>&1 || { echo NO_FINCORE; exit 127; }\n"
            + act.bounded(["fincore", "--bytes", "--noheadings", "--output", "RES,SIZE,FILE", "--", *files], 60))


__all__ = ["PrewarmPlan", "PrewarmProgress", "fincore_command", "parse_progress", "prewarm", "progress_check",
           "script", "shard_paths", "stop_prewarm"]
