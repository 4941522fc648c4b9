"""What the cost benchmarks share: a real host on loopback (OpenSSH's sshd, a fake `nvidia-smi`
on its PATH that prints recorded real output, a model dir, a log), the console in its own
process (headless Textual at 120x40 through `ConsoleApp.for_session`), and its CPU read from
/proc/PID/stat (utime + stime, every thread) over a window: CPU time, not wall time, so other
work on a shared machine does not count against the console (it can still slow it a little).

Run as a script, this module is the console process: `hostkit.py CONFIG_JSON`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"

# The recorded real output (tests/data/PROVENANCE.md: an NVIDIA H200, driver 580.159.04). The
# recording is of one GPU; GPU i repeats it with its index and the UUID's last digits changed.
FAKE_NVIDIA_SMI = r'''#!/usr/bin/python3 -S
"""A fake nvidia-smi for gpuconsole's cost benchmarks: recorded real output, N GPUs."""
import os, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
N = int(open(os.path.join(HERE, "gpus")).read())
GPU = [f.strip() for f in open(os.path.join(HERE, "query_gpu.txt")).read().strip().split(",")]
APPS = [f.strip() for f in open(os.path.join(HERE, "apps.txt")).read().strip().split(",")]
FIELDS = "index,name,uuid,memory.used,memory.total,utilization.gpu,temperature.gpu,power.draw,power.limit"
APP_FIELDS = "gpu_uuid,pid,process_name,used_memory"

def uuid(i):
    return GPU[2] if i == 0 else GPU[2][:-4] + format(i, "04x")

def gpus():
    return "".join(", ".join([str(i), GPU[1], uuid(i)] + GPU[3:]) + "\n" for i in range(N))

args = sys.argv[1:]
opts = dict(a.split("=", 1) for a in args if "=" in a)
if opts.get("--format") != "csv,noheader,nounits":
    sys.exit("fake nvidia-smi: only --format=csv,noheader,nounits was recorded")
if "--query-compute-apps" in opts:
    if opts["--query-compute-apps"] != APP_FIELDS:
        sys.exit("fake nvidia-smi: these apps fields were not recorded")
    sys.stdout.write(", ".join(APPS) + "\n")
    sys.exit(0)
if opts.get("--query-gpu") != FIELDS:
    sys.exit("fake nvidia-smi: these GPU fields were not recorded")
if "-lms" not in args:
    sys.stdout.write(gpus())
    sys.exit(0)
interval = int(args[args.index("-lms") + 1]) / 1000
start = time.monotonic()
n = 0
while True:
    sys.stdout.write(gpus())
    sys.stdout.flush()
    n += 1
    time.sleep(max(0.0, start + n * interval - time.monotonic()))
'''


def fake_gpu_bin(directory: Path, gpus: int) -> Path:
    """A bin directory with the fake nvidia-smi for `gpus` GPUs."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "gpus").write_text(str(gpus))
    (directory / "query_gpu.txt").write_text((DATA / "h200" / "nvidia_smi_query_gpu.txt").read_text())
    (directory / "apps.txt").write_text((DATA / "h200" / "nvidia_smi_apps.txt").read_text())
    smi = directory / "nvidia-smi"
    smi.write_text(FAKE_NVIDIA_SMI)
    smi.chmod(0o755)
    return directory


def finished_model_dir(directory: Path, files: int, total_bytes: int = 250 * 10**9) -> Path:
    """A finished `hf download --local-dir` layout: `files - 2` sparse shards (no disk used), the
    index that names them, config.json."""
    directory.mkdir(parents=True, exist_ok=True)
    shards = max(1, files - 2)
    size = total_bytes // shards
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    for name in names:
        with open(directory / name, "wb") as fh:
            fh.truncate(size)
    index = {"metadata": {"total_size": size * shards}, "weight_map": {f"w{i}": n for i, n in enumerate(names)}}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    (directory / "config.json").write_text("{}")
    return directory


def quiet_log(path: Path) -> Path:
    """A log that does not grow: real SGLang lines (tests/data/sglang_real_lines.txt)."""
    path.write_text((DATA / "sglang_real_lines.txt").read_text())
    return path


LOG_WRITER = r"""
import sys, time
path, rate, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
sys.path.insert(0, sys.argv[4])
from benchmarks.log_flood import mix
lines = [l + "\n" for l in mix(5000)]
batch = max(1, rate // 20)
t0 = time.time(); n = 0
with open(path, "a") as fh:
    while time.time() - t0 < seconds:
        chunk = "".join(lines[(n + i) % len(lines)] for i in range(batch))
        fh.write(chunk); fh.flush(); n += batch
        time.sleep(max(0.0, t0 + n / rate - time.time()))
print(n)
"""


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class Host:
    """sshd on 127.0.0.1 with the fake GPUs first on its sessions' PATH, and the host's files."""

    sshd: Any
    directory: Path
    model_dir: Path | None
    log_file: Path | None

    def stop(self) -> None:
        self.sshd.stop()


def start_host(gpus: int = 2, model_files: int | None = 60, log: bool = True) -> Host:
    from console.demo.sshd import start_sshd

    d = Path(tempfile.mkdtemp(prefix="gpuconsole-cost-"))
    bin_dir = fake_gpu_bin(d / "bin", gpus)
    path = f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"
    sshd = start_sshd(d / "sshd", extra_config=f"SetEnv PATH={path}\n")
    model = finished_model_dir(d / "model", model_files) if model_files else None
    log_file = quiet_log(d / "sglang.log") if log else None
    return Host(sshd, d, model, log_file)


def console_config(host: Host, *, seconds: float, record: bool = False) -> dict[str, Any]:
    s = host.sshd
    return {"port": s.port, "user": s.user, "identity": str(s.client_key), "known_hosts": str(s.known_hosts),
            "model_dir": str(host.model_dir) if host.model_dir else None,
            "log_file": str(host.log_file) if host.log_file else None,
            "seconds": seconds, "record": record, "record_dir": str(host.directory / "recordings")}


def measure(config: dict[str, Any], warmup_s: float, window_s: float,
            during: Any = None, tree: Path | None = None) -> dict[str, Any]:
    """Start the console process, wait `warmup_s`, read its CPU over `window_s` (calling
    `during(pid)` at the start of the window, e.g. to start a log writer), then let it exit.
    `tree`: run the console of another checkout (a base for an interleaved A/B; this file is
    copied into it, so both sides are measured by the same instrument)."""
    config = {**config, "seconds": warmup_s + window_s + 1.0, "window_s": window_s + 1.0}
    env = {**os.environ, "XDG_DATA_HOME": tempfile.mkdtemp(), "TERM": "xterm-256color"}
    env.pop("GPUCONSOLE_CONFIG", None)
    script, cwd = Path(__file__).resolve(), ROOT
    if tree is not None:
        cwd = tree.resolve()
        (cwd / "benchmarks").mkdir(exist_ok=True)
        script = cwd / "benchmarks" / "hostkit_ab.py"
        script.write_text(Path(__file__).read_text())
    proc = subprocess.Popen([sys.executable, str(script), json.dumps(config)], cwd=cwd,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(warmup_s)
        extra = during(proc.pid) if during else None
        c0, w0 = cpu_s(proc.pid), time.monotonic()
        rss = [rss_mib(proc.pid)]
        while time.monotonic() - w0 < window_s:
            time.sleep(min(1.0, window_s - (time.monotonic() - w0)))
            rss.append(rss_mib(proc.pid))
        c1, w1 = cpu_s(proc.pid), time.monotonic()
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            out, err = "", ""  # still working through a backlog a minute after it was asked to exit
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode not in (0, -9):
        raise RuntimeError(f"console exited {proc.returncode}: {err.strip()[-2000:]}")
    seen = (json.loads(out.strip().splitlines()[-1]) if out.strip()
            else {"exit": "killed: not done a minute after it was asked to exit (a backlog)"})
    return {"cpu_pct": 100 * (c1 - c0) / (w1 - w0), "rss_mib_start": rss[0], "rss_mib_end": rss[-1],
            "rss_mib_max": max(rss), "seen": seen, "extra": extra}


def median_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    cpu = [r["cpu_pct"] for r in runs]
    return {"cpu_pct_median": round(statistics.median(cpu), 2), "cpu_pct_runs": [round(c, 2) for c in cpu],
            "rss_mib_median": round(statistics.median(r["rss_mib_end"] for r in runs), 1),
            "seen": runs[-1]["seen"]}


# -- the console process ---------------------------------------------------------------------
def _console(config: dict[str, Any]) -> None:
    import asyncio

    sys.path.insert(0, os.getcwd())  # the tree under test (this checkout, or a base's: `measure(tree=)`)
    from console.ui.app import ConsoleApp
    from console.config import HostProfile
    from console.host.session import HostSession, make_transport

    profile = HostProfile(name="bench", host="127.0.0.1", port=config["port"], user=config["user"],
                          identity=config["identity"], known_hosts=config["known_hosts"],
                          model_dir=config["model_dir"], log_file=config["log_file"])
    app = ConsoleApp.for_session(HostSession(profile, make_transport(profile)), record=config["record"],
                                 record_dir=Path(config["record_dir"]))

    counts = _count_repaints(config["seconds"] - config.get("window_s", 0.0)) if config.get("counts") else None

    profiler = None
    if config.get("cprofile"):  # the UI thread's profile over the window only
        import cProfile

        profiler = cProfile.Profile()

    stacks = _StackSampler() if config.get("stacks") else None

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(config["seconds"], app.exit, 0)
        if profiler is not None:
            loop.call_later(config["seconds"] - config.get("window_s", 0.0), profiler.enable)
        if stacks is not None:
            loop.call_later(config["seconds"] - config.get("window_s", 0.0), stacks.start)
        if counts is not None:  # the screen's flushes by cause, over the window (a tree that counts them)
            def causes_at_start() -> None:
                screen = getattr(app, "host_screen", None)
                counts["flush_causes_at_start"] = dict(getattr(screen, "flush_causes", {}))
            loop.call_later(config["seconds"] - config.get("window_s", 0.0), causes_at_start)
        await app.run_async(headless=True, size=(120, 40))

    asyncio.run(main())
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(config["cprofile"])
    if stacks is not None:
        stacks.stop(config["stacks"])
    state = app.state
    if counts is not None and "flush_causes_at_start" in counts:
        start_causes = counts.pop("flush_causes_at_start")
        end_causes = dict(getattr(getattr(app, "host_screen", None), "flush_causes", {}))
        counts["flush_causes"] = {k: n - start_causes.get(k, 0) for k, n in sorted(end_causes.items())
                                  if n - start_causes.get(k, 0)}
    gpu, download = state.data("gpu"), state.data("download")
    # What the console saw, so a run that saw nothing cannot pass for a quiet one.
    print(json.dumps({"gpus": len(gpu.gpus) if gpu else 0, "gpu_path": gpu.source if gpu else None,
                      "download_complete": getattr(download, "complete", None),
                      "download_files": getattr(download, "files_done", None),
                      "log_lines": state.log_lines_total,
                      "connection": state.connection.status if state.connection else None,
                      **({"counts": counts} if counts is not None else {})}))


class _StackSampler:
    """The UI thread's stack every millisecond of the process's CPU time (SIGPROF): where the
    CPU went, with far less overhead than cProfile (which multiplies a quiet console's cost ~3.5x
    and hides what a coroutine's step costs). A sample taken while another thread holds the CPU
    shows the UI thread waiting (`select`). Written collapsed: `frame;frame;... count` per line."""

    def __init__(self) -> None:
        from collections import Counter

        self.counts: Counter[str] = Counter()

    def start(self) -> None:
        import signal

        signal.signal(signal.SIGPROF, self._sample)
        signal.setitimer(signal.ITIMER_PROF, 0.001, 0.001)

    def _sample(self, _signum: int, frame: Any) -> None:
        names = []
        while frame is not None:
            code = frame.f_code
            names.append(f"{Path(code.co_filename).name}:{code.co_name}")
            frame = frame.f_back
        self.counts[";".join(reversed(names))] += 1

    def stop(self, out: str) -> None:
        import signal

        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        Path(out).write_text("".join(f"{stack} {n}\n" for stack, n in self.counts.most_common()))


def _count_repaints(after_s: float) -> dict[str, Any]:
    """What the console drew after `after_s` (the window): compositor updates (frames sent), whole
    layouts, and `refresh()` calls by widget class. A benchmark's own instrument (`--counts`)."""
    from collections import Counter

    from textual.dom import DOMNode
    from textual.screen import Screen
    from textual.widget import Widget

    start = time.monotonic() + after_s
    counts: dict[str, Any] = {"frames": 0, "layouts": 0, "refresh_by_widget": Counter()}
    frame, layout, refresh = Screen._compositor_refresh, Screen._refresh_layout, Widget.refresh

    def counted_frame(self: Any) -> None:
        if time.monotonic() >= start:
            counts["frames"] += 1
        frame(self)

    def counted_layout(self: Any, *a: Any, **k: Any) -> None:
        if time.monotonic() >= start:
            counts["layouts"] += 1
        layout(self, *a, **k)

    counts["scrollbar_refresh_by_caller"] = Counter()

    def counted_refresh(self: Any, *a: Any, **k: Any) -> Any:
        if time.monotonic() >= start:
            counts["refresh_by_widget"][f"{type(self).__name__}#{self.id}"] += 1
            if type(self).__name__ == "ScrollBar":  # whose bar, and which calls asked for it
                callers = " < ".join(f"{f.name}" for f in traceback.extract_stack(limit=16)[-16:-1][::-1])
                owner = self.parent
                counts["scrollbar_refresh_by_caller"][f"{type(owner).__name__}#{owner.id}: {callers}"] += 1
        return refresh(self, *a, **k)

    Screen._compositor_refresh, Screen._refresh_layout, Widget.refresh = counted_frame, counted_layout, counted_refresh  # type: ignore[method-assign]
    # Classes that really changed (each re-applies the CSS to the node and all under it).
    counts["class_changes"] = Counter()
    add, remove = DOMNode.add_class, DOMNode.remove_class

    def counted_add(self: Any, *names: str, update: bool = True) -> Any:
        if time.monotonic() >= start and not self._classes.issuperset(names):
            counts["class_changes"][f"{type(self).__name__}#{self.id} +{' '.join(names)}"] += 1
        return add(self, *names, update=update)

    def counted_remove(self: Any, *names: str, update: bool = True) -> Any:
        if time.monotonic() >= start and self._classes.intersection(names):
            counts["class_changes"][f"{type(self).__name__}#{self.id} -{' '.join(names)}"] += 1
        return remove(self, *names, update=update)

    DOMNode.add_class, DOMNode.remove_class = counted_add, counted_remove  # type: ignore[method-assign]
    return counts


if __name__ == "__main__":
    _console(json.loads(sys.argv[1]))
