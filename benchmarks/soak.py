"""A soak: the demo for hours with a shared core and two attached consoles; is anything growing?

Starts what users run, each its own process with its own temporary XDG dirs: the shared core
(`gpuconsole serve --demo --socket S`, recording on, the simulated host in its own process) and
two consoles attached to it (`gpuconsole attach S`, each in its own tmux session of 120x40).
Every `--sample-s` (60) it writes one JSON line: each process's RSS (VmRSS) and CPU % over the
interval (utime + stime from /proc/PID/stat), the simulator's, the recording's bytes on disk, the
load average. At the end: memory flat means every process's RSS at the end is at most +10 % of
its RSS at `--settle-min` (10) minutes. `--hours` (4) or `--minutes` for a shorter run.

The story loops: the core's simulated host goes back to the story's start every `--loop-s` (300)
scenario seconds (`serve --demo-loop`): the new service stops and the old one serves again, then
the swap plays once more. The soak is itself a third client of the core, attached first (so it
drives; the two consoles observe): every `--bench-every-min` (5) it asks for the quick benchmark,
and at every sample the core's `stats` (its events, log lines, the state's sizes, the recording's
events and bytes). Nothing lost, counted at every sample: the events the core applied vs the events
this client received between two stats replies (the core sends both in order), vs the events the
recording wrote; the lines the simulated journal of the two units holds vs the lines the core
was given (a gap that stays the same is lines in flight; one that grows is lost).

`--trace-core`: the core runs under tracemalloc (benchmarks/core_tracemalloc.py): each sample also
says the heap its Python objects hold, and the summary whether a growing RSS is objects kept or
the allocator's (the core's CPU is then tracemalloc's too: not the console's figure).

    nice .venv/bin/python benchmarks/soak.py --minutes 60 --out /tmp/soak.jsonl
    .venv/bin/python benchmarks/soak.py --summary /tmp/soak.jsonl     # the README's table from a run
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return found


def simulator_pid(core: int) -> int | None:
    for child in children(core):
        try:
            if b"console.demo.hostsim.process" in Path(f"/proc/{child}/cmdline").read_bytes():
                return child
        except OSError:
            continue
    return None


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


class SoakClient:
    """A client of the core's socket (the protocol of console/share/protocol.py, by hand: the soak
    measures the console's processes, not itself): a thread reads every line, counting events."""

    def __init__(self, sock: Path, name: str = "soak") -> None:
        self.conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.conn.settimeout(30)
        self.conn.connect(str(sock))
        self.file = self.conn.makefile("rb")
        self.conn.sendall(json.dumps({"t": "hello", "version": 2, "name": name}).encode() + b"\n")
        welcome = json.loads(self.file.readline())
        if welcome.get("t") != "welcome":
            raise RuntimeError(f"the core refused the soak's client: {welcome}")
        self.role = welcome.get("role")
        self.conn.settimeout(None)
        self.events = 0
        self.gone: str | None = None
        self._ids = 0
        self._lock = threading.Lock()
        self._replies: dict[int, tuple[threading.Event, list[Any]]] = {}
        threading.Thread(target=self._read, name="soak-client", daemon=True).start()

    def _read(self) -> None:
        try:
            for line in self.file:
                kind = line[:16]
                if kind.startswith(b'{"t":"event"'):
                    self.events += 1
                    continue
                msg = json.loads(line)
                if msg.get("t") == "reply":
                    with self._lock:
                        waiting = self._replies.pop(int(msg["id"]), None)
                    if waiting is not None:
                        # the events received before this reply, with it (the core sends in order)
                        waiting[1].extend([msg, self.events])
                        waiting[0].set()
        except (OSError, ValueError) as exc:
            self.gone = str(exc) or type(exc).__name__
        self.gone = self.gone or "the core closed the connection"

    def request(self, t: str, timeout_s: float = 30, **fields: Any) -> tuple[dict[str, Any] | None, int]:
        """(the reply or None if none came, the events received before it)."""
        with self._lock:
            self._ids += 1
            rid = self._ids
            done: tuple[threading.Event, list[Any]] = (threading.Event(), [])
            self._replies[rid] = done
        try:
            self.conn.sendall(json.dumps({"t": t, "id": rid, **fields}).encode() + b"\n")
        except OSError as exc:
            self.gone = str(exc)
            return None, self.events
        if not done[0].wait(timeout_s):
            with self._lock:
                self._replies.pop(rid, None)
            return None, self.events
        return done[1][0], done[1][1]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.close()


def sim_root(base: Path) -> Path | None:
    """The simulated host's sandbox (in the soak's own TMPDIR): the first made, as the core's simulator
    made it at the start. A program started later through the soak's tmux server inherits that
    server's TMPDIR and may make a second one there (a demo walked by hand made one for 3 minutes
    in session 14's run, read by name order instead: the journal's count fell from 5,962 to 19)."""
    found = sorted((base / "tmp").glob("gpusim-*/.sim/state.json"), key=lambda p: p.parent.parent.stat().st_ctime)
    return found[0].parent.parent if found else None


def count_lines(path: Path) -> int | None:
    try:
        with path.open("rb") as fh:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    except OSError:
        return None


PROCS = ("core", "ana", "ben", "simulator")


def last_line(path: Path) -> dict[str, Any] | None:
    """The last whole JSON line of a file another process appends to (None if none yet)."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            return dict(json.loads(line))
        except ValueError:
            continue  # a line being written
    return None


def summarize(records: list[dict[str, Any]], settle_min: float = 10.0) -> str:
    """The README's table from a run's JSON lines (its samples; a summary line is skipped)."""
    samples = [r for r in records if "minute" in r and not r.get("summary")]
    if not samples:
        return "no samples"
    settle = next((r for r in samples if r["minute"] >= settle_min), samples[0])
    end = samples[-1]
    after = [r for r in samples if r["minute"] >= settle["minute"]]
    rows = [f"Samples: {len(samples)}, minute {samples[0]['minute']} to {end['minute']}; load "
            f"{min(r['load'] for r in samples):.1f}-{max(r['load'] for r in samples):.1f}; "
            f"loops of the story done: {end.get('loops')}; benchmarks asked {end.get('benches_asked', 0)}, "
            f"started {end.get('benches_started', 0)}; all alive at every sample: "
            f"{all(all(r['alive'].values()) for r in samples)}.",
            "",
            f"| process | RSS at minute {settle['minute']} → {end['minute']} (MiB) | growth | "
            f"CPU % after minute {settle['minute']}, min / mean / max |",
            "|---|---|---|---|"]
    for name in PROCS:
        a, b = settle.get(f"{name}_rss_mib"), end.get(f"{name}_rss_mib")
        cpus = [c for c in (r.get(f"{name}_cpu_pct") for r in after) if c is not None]
        growth = f"{100 * (b - a) / a:+.1f} %" if a and b else "–"
        cpu = f"{min(cpus):.2f} / {sum(cpus) / len(cpus):.2f} / {max(cpus):.2f}" if cpus else "–"
        rows.append(f"| {name} | {a} → {b} | {growth} | {cpu} |")
    # The log the core and each console hold fills up to its cap (5,000 lines) first: memory from
    # the minute it is full, when every bounded collection is.
    full = next((r for r in samples if (r.get("sizes") or {}).get("log_lines", 0)
                 >= max((x.get("sizes") or {}).get("log_lines", 0) for x in samples)), None)
    if full is not None and full is not end and full["minute"] > settle["minute"]:
        grown = []
        for name in PROCS:
            a, b = full.get(f"{name}_rss_mib"), end.get(f"{name}_rss_mib")
            if a and b:
                grown.append(f"{name} {a} → {b} ({100 * (b - a) / a:+.1f} %)")
        rows += ["", f"From minute {full['minute']}, when the log held its most "
                 f"({full['sizes']['log_lines']} lines), to the end: RSS " + ", ".join(grown) + "."]
    minutes = end["minute"] - settle["minute"]
    ra, rb = settle.get("recording_bytes", 0), end.get("recording_bytes", 0)
    rows += ["", f"Recording: {ra / 1e6:.2f} MB at minute {settle['minute']} → {rb / 1e6:.2f} MB at minute "
             f"{end['minute']} ({(rb - ra) / 1e3 / minutes if minutes > 0 else 0:.1f} kB a minute)."]
    ha, hb = settle.get("core_heap_mib"), end.get("core_heap_mib")
    if ha is not None and hb is not None:
        grew = ", ".join(f"{g['at']} {g['grew_bytes'] / 1e3:+.1f} kB"
                         for g in (end.get("core_heap_grew_most") or [])[:5])
        rows.append(f"The core's Python heap (tracemalloc) at minute {settle['minute']} → {end['minute']}: "
                    f"{ha} → {hb} MiB ({hb - ha:+.3f} MiB) beside its RSS "
                    f"{settle.get('core_rss_mib')} → {end.get('core_rss_mib')} MiB"
                    + (f"; grew most since its own settle: {grew}" if grew else "") + ".")
    sa, sb = settle.get("sizes") or {}, end.get("sizes") or {}
    if sb:
        changed = [f"{k} {sa.get(k)} → {v}" for k, v in sorted(sb.items()) if v]
        rows.append(f"The core's state at minute {settle['minute']} → {end['minute']}: " + ", ".join(changed) + ".")
    lost = {k: end.get(k) for k in ("client_events_lost", "recording_events_lost", "log_lines_gap")}
    gaps = [r.get("log_lines_gap") for r in after if r.get("log_lines_gap") is not None]
    rows.append(f"Nothing lost: events the core applied but this client did not receive: "
                f"{lost['client_events_lost']}; events applied but not recorded: {lost['recording_events_lost']}; "
                f"journal lines of the two units not (yet) in the core: {lost['log_lines_gap']} at the end"
                + (f" (min {min(gaps)}, max {max(gaps)} after minute {settle['minute']})" if gaps else "")
                + f"; core events {end.get('core_events')}, log lines {end.get('core_log_lines_total')}, "
                f"clients dropped {end.get('dropped')}, subscriber/derive errors {end.get('errors')}.")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=4.0)
    ap.add_argument("--minutes", type=float, help="instead of --hours")
    ap.add_argument("--sample-s", type=float, default=60.0)
    ap.add_argument("--settle-min", type=float, default=10.0, help="the memory baseline's minute")
    ap.add_argument("--out", type=Path, help="append the JSON lines here too")
    ap.add_argument("--loop-s", type=float, default=300.0, help="the story again every this many scenario seconds")
    ap.add_argument("--bench-every-min", type=float, default=5.0, help="the quick benchmark this often (0: never)")
    ap.add_argument("--summary", type=Path, metavar="JSONL", help="print the table of a run's JSON lines and exit")
    ap.add_argument("--trace-core", action="store_true",
                    help="the core under tracemalloc: its heap beside its RSS (its CPU is then not the console's)")
    args = ap.parse_args()
    if args.summary is not None:
        try:
            records = [json.loads(line) for line in args.summary.read_text().splitlines() if line.strip()]
        except (OSError, ValueError) as exc:
            print(f"soak: cannot read {args.summary}: {exc}", file=sys.stderr)
            return 2
        print(summarize(records, args.settle_min))
        return 0
    total_s = (args.minutes if args.minutes is not None else args.hours * 60) * 60
    if total_s <= 0 or args.sample_s <= 0 or args.loop_s <= 0 or args.bench_every_min < 0:
        print("soak: the run and the sample interval must be positive", file=sys.stderr)
        return 2
    # A soak stopped early (`kill`, the session's end) still takes its consoles, core and tmux
    # sessions down: SIGTERM runs the `finally` below (Python's default ends at once, leaving them).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    base = Path(tempfile.mkdtemp(prefix="gc-soak-"))
    env = {**os.environ, "TERM": "xterm-256color", "HOME": str(base / "home"),
           "XDG_DATA_HOME": str(base / "data"), "XDG_STATE_HOME": str(base / "state"),
           "XDG_CONFIG_HOME": str(base / "config"), "XDG_CACHE_HOME": str(base / "cache"),
           "XDG_RUNTIME_DIR": str(base / "run"), "TMPDIR": str(base / "tmp")}
    for key in ("HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR",
                "TMPDIR"):
        Path(env[key]).mkdir(parents=True, exist_ok=True, mode=0o700)
    env.pop("GPUCONSOLE_CONFIG", None)
    sock = base / "run" / "core.sock"
    heap = base / "core-heap.jsonl"  # --trace-core: the core's heap, written by the core itself
    procs: dict[str, subprocess.Popen[bytes]] = {}
    pids: dict[str, int] = {}
    tmux = [f"gc-soak-{os.getpid()}-{name}" for name in ("ana", "ben")]
    out = args.out.open("a") if args.out else None
    client: SoakClient | None = None

    def emit(record: dict) -> None:
        line = json.dumps(record)
        print(line, flush=True)
        if out is not None:
            out.write(line + "\n")
            out.flush()

    try:
        with (base / "core.err").open("wb") as err:
            serve = ["serve", "--demo", "--demo-loop", repr(args.loop_s), "--socket", str(sock)]
            traced = [str(ROOT / "benchmarks" / "core_tracemalloc.py"), "--out", str(heap), "--every-s",
                      repr(args.sample_s), "--settle-s", repr(60 * args.settle_min), "--"]
            procs["core"] = subprocess.Popen(
                [sys.executable, *(traced if args.trace_core else ["-m", "console"]), *serve],
                cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        pids["core"] = procs["core"].pid
        deadline = time.time() + 120
        while not sock.exists() and time.time() < deadline and procs["core"].poll() is None:
            time.sleep(0.5)
        if not sock.exists():
            print(f"soak: the core did not serve within 120 s (see {base / 'core.err'})", file=sys.stderr)
            return 1
        client = SoakClient(sock)  # attached first: it drives (asks for the benchmarks); the consoles observe
        for name, session in zip(("ana", "ben"), tmux, strict=True):
            # A console needs a terminal: each in its own tmux session (the environment passed
            # with -e, the command exec'd so the pane's pid is the console's).
            command = " ".join(shlex.quote(x) for x in [
                "exec", sys.executable, "-m", "console", "attach", str(sock), "--name", name])
            subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40", "-c", str(ROOT),
                            *[f"-e{k}={env[k]}" for k in ("TERM", "HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
                                                          "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR")],
                            command], check=True, env=env)
            pane = subprocess.run(["tmux", "list-panes", "-t", session, "-F", "#{pane_pid}"],
                                  capture_output=True, text=True, check=True)
            pids[name] = int(pane.stdout.split()[0])
        started = time.time()
        sim = None
        last = {k: (cpu_s(pid), time.time()) for k, pid in pids.items()}
        samples: list[dict] = []
        first, seen = client.request("stats")
        prev = (json.loads(first["said"])["events"], seen) if first and first.get("said") else None
        client_lost = 0
        benches = {"benches_asked": 0, "benches_started": 0}
        bench_refusals: dict[str, int] = {}
        next_bench = started + 60 * args.bench_every_min if args.bench_every_min else float("inf")
        while time.time() - started < total_s:
            time.sleep(args.sample_s)
            if time.time() >= next_bench:
                next_bench += 60 * args.bench_every_min
                reply, _ = client.request("bench", kind="quick")
                benches["benches_asked"] += 1
                if reply is not None and not reply.get("error"):
                    benches["benches_started"] += 1
                else:
                    why = "no reply" if reply is None else str(reply["error"])[:80]
                    bench_refusals[why] = bench_refusals.get(why, 0) + 1
            sim = sim or simulator_pid(procs["core"].pid)
            now = time.time()
            record: dict = {"minute": round((now - started) / 60, 2),
                            "load": os.getloadavg()[0], "recording_bytes": dir_bytes(base / "data" / "gpuconsole"),
                            "alive": {k: Path(f"/proc/{pid}").exists() for k, pid in pids.items()}}
            reply, seen = client.request("stats")
            stats = json.loads(reply["said"]) if reply and reply.get("said") else None
            if stats is not None:
                if prev is not None:
                    client_lost += (stats["events"] - prev[0]) - (seen - prev[1])
                prev = (stats["events"], seen)
                rec = stats.get("recording") or {}
                record.update(core_events=stats["events"], core_log_lines_total=stats["log_lines_total"],
                              sizes=stats["sizes"], dropped=stats["dropped"], clients=stats["clients"],
                              errors=stats["subscriber_errors"] + stats["derive_errors"],
                              recorded_events=rec.get("events"), recording_error=rec.get("error"),
                              client_events_lost=client_lost,
                              recording_events_lost=stats["events"] - rec["events"] if "events" in rec else None)
            else:
                record["stats_error"] = client.gone or "no reply to stats"
            root = sim_root(base)
            if root is not None:
                try:
                    record["loops"] = json.loads((root / ".sim" / "state.json").read_text()).get("loops")
                except (OSError, ValueError):
                    pass
                # the two units the core's log follows (the new one and the one it replaces)
                counts = [count_lines(root / ".sim" / "journal" / f"{unit}.jsonl")
                          for unit in ("sglang-qwen122b.service", "sglang-qwen397b.service")]
                journal = sum(c for c in counts if c is not None) if any(c is not None for c in counts) else None
                record["journal_lines"] = journal
                if journal is not None and stats is not None:
                    record["log_lines_gap"] = journal - stats["log_lines_total"]
            if args.trace_core and (traced_now := last_line(heap)) is not None:
                record.update(core_heap_mib=traced_now.get("heap_mib"),
                              core_heap_peak_mib=traced_now.get("heap_peak_mib"),
                              core_heap_grew_most=traced_now.get("grew_most"))
            record.update(benches)
            if bench_refusals:
                record["bench_refusals"] = dict(bench_refusals)
            if sim:
                pids["simulator"] = sim
                last.setdefault("simulator", (cpu_s(sim), started))
            for name, pid in pids.items():
                cpu, at = cpu_s(pid), now
                before, t0 = last.get(name, (None, now))
                record[f"{name}_rss_mib"] = None if rss_mib(pid) is None else round(rss_mib(pid) or 0, 1)
                record[f"{name}_cpu_pct"] = (None if cpu is None or before is None or at <= t0
                                             else round(100 * (cpu - before) / (at - t0), 2))
                last[name] = (cpu, at)
            samples.append(record)
            emit(record)
        settle = next((s for s in samples if s["minute"] >= args.settle_min), None)
        end = samples[-1] if samples else None
        verdict: dict = {"summary": True, "minutes": round((time.time() - started) / 60, 1),
                         "settle_minute": settle["minute"] if settle else None, "dir": str(base)}
        if settle and end and settle is not end:
            growth = {}
            for name in ("core", "ana", "ben", "simulator"):
                a, b = settle.get(f"{name}_rss_mib"), end.get(f"{name}_rss_mib")
                if a and b:
                    growth[name] = round(100 * (b - a) / a, 1)
            verdict["rss_growth_pct_after_settle"] = growth
            verdict["memory_flat"] = all(g <= 10 for g in growth.values())
            verdict["all_alive"] = all(end["alive"].values())
            for name in ("core", "ana", "ben", "simulator"):
                cpus = [s.get(f"{name}_cpu_pct") for s in samples if s["minute"] >= args.settle_min]
                cpus = [c for c in cpus if c is not None]
                if cpus:
                    verdict[f"{name}_cpu_pct_after_settle"] = [min(cpus), round(sum(cpus) / len(cpus), 2), max(cpus)]
            if settle.get("core_heap_mib") is not None and end.get("core_heap_mib") is not None:
                verdict["core_heap_mib"] = [settle["core_heap_mib"], end["core_heap_mib"]]
            verdict["recording_bytes"] = [settle["recording_bytes"], end["recording_bytes"]]
            verdict["loops"] = end.get("loops")
            verdict["client_events_lost"] = end.get("client_events_lost")
            verdict["recording_events_lost"] = end.get("recording_events_lost")
        else:
            verdict["memory_flat"] = None
            verdict["note"] = f"shorter than the settle time ({args.settle_min:g} min): no memory verdict"
        emit(verdict)
        return 0
    finally:
        if client is not None:
            client.close()
        for session in tmux:
            subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, check=False)
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if out is not None:
            out.close()
        if not os.environ.get("SOAK_KEEP"):
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
