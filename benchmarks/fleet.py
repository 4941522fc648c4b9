"""The fleet's cost, in the console's own process (the hosts run in another process).

    python benchmarks/fleet.py ssh --hosts 50 --seconds 60        # 50 simulated hosts over SSH
    python benchmarks/fleet.py ssh --hosts 1 --seconds 60         # the single-host baseline
    python benchmarks/fleet.py prometheus --hosts 500 --cycles 12 # 500 generated hosts from a real Prometheus

ssh: N simulated hosts in a child process: by default all served from that one process
(console.demo.hostsim.multihost: quiet hosts, each its own port and host key), or with `--sim story`
the demo's story hosts (console.demo.fleet_demo.FleetSimulator). This process runs the fleet (one
HostState + SSH session + runner per host, the default cadences) under the fleet screen,
headless at 120x40. After `--warmup` s it measures for `--seconds` s: CPU of this process
(/proc/self/stat), RSS (VmRSS, VmHWM), the round trip of every polled command per host
(SshTransport.run), the fleet screen's refresh time, the time until every host is connected and
has a GPU reading, one row's freshness (the age of each host's GPU reading, looked at once a
second) and the simulator's own CPU beside it.

prometheus: a child process serves a dcgm-exporter-format page for N hosts x 8 GPUs plus SGLang
gauges (a `host` label each), a real Prometheus scrapes it every 5 s; this process runs
PrometheusFleet (one instant query per metric a cycle) under the fleet screen and measures each
cycle (the queries, decoding, the states), the console's and Prometheus's CPU per cycle, the
screen's refresh, and CPU over the cycles; `--variants now,main` runs main's queries beside.

Prints one JSON object. Goals (issue 14): ssh 50 hosts <= 25 % of one core, <= 400 MiB, p99 poll
latency <= 2x a single host's; prometheus 500 hosts <= 1 s a cycle and <= 5 % of one core.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SIM = r"""
import json, logging, sys
logging.getLogger("asyncio").setLevel(logging.ERROR)
sys.path.insert(0, sys.argv[2])
from dataclasses import asdict
from console.demo.fleet_demo import FleetSimulator
sim = FleetSimulator(int(sys.argv[1]), exporters=False, first_index=int(sys.argv[3]))
profiles = sim.start()
print(json.dumps([asdict(p) for p in profiles]), flush=True)
sys.stdin.read()
sim.stop()
"""

GEN = r"""
import asyncio, math, sys, time
sys.path.insert(0, sys.argv[3])
from console.demo.hostsim.dcgm_exporter import DcgmExporter
hosts, gpus = int(sys.argv[1]), int(sys.argv[2])
def page():
    t = time.time()
    out = []
    for field in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE"):
        out.append(f"# TYPE {field} gauge")
        for h in range(hosts):
            for g in range(gpus):
                used = 60000 + (h * 37 + g * 11) % 20000
                v = {"DCGM_FI_DEV_FB_USED": used, "DCGM_FI_DEV_FB_FREE": 143771 - used,
                     "DCGM_FI_DEV_GPU_UTIL": int(50 + 45 * math.sin(t / 30 + h + g)),
                     "DCGM_FI_DEV_POWER_USAGE": round(300 + 200 * math.sin(t / 20 + h), 3)}[field]
                out.append(f'{field}{{gpu="{g}",UUID="GPU-{h:04x}-{g:04x}",device="nvidia{g}",'
                           f'modelName="NVIDIA H200",Hostname="gen-{h:04d}"}} {v}')
    for name in ("sglang:gen_throughput", "sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage"):
        out.append(f"# TYPE {name} gauge")
        for h in range(hosts):
            out.append(f'{name}{{model_name="qwen3.5-122b",tp_rank="0",host="gen-{h:04d}"}} {(h * 13 + t) % 900:.1f}')
    return "\n".join(out) + "\n"
async def main():
    e = DcgmExporter(page)
    await e.start()
    print(e.port, flush=True)
    await asyncio.to_thread(sys.stdin.read)
asyncio.run(main())
"""


def cpu_s() -> float:
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pid_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib() -> tuple[float, float]:
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def summary_ms(values: list[float]) -> dict[str, Any]:
    return {"count": len(values), "p50": _ms(pct(values, 50)), "p99": _ms(pct(values, 99)),
            "max": _ms(max(values) if values else None)}


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 2)


async def loop_lag(samples: list[float], period_s: float = 0.1) -> None:
    """How late this process's event loop wakes (what the console adds to every reading's way)."""
    while True:
        started = time.perf_counter()
        await asyncio.sleep(period_s)
        samples.append(max(0.0, time.perf_counter() - started - period_s))


async def run_app(app: Any) -> asyncio.Task[Any]:
    task = asyncio.ensure_future(app.run_async(headless=True, size=(120, 40)))
    while not app.is_running:
        await asyncio.sleep(0.05)
    return task


async def handshake_cost(profiles: list[Any], sim_pids: list[int], count: int) -> dict[str, Any]:
    """Is the key exchange what limits connecting (issue 23 item 5)? `count` hosts connected one
    after another before the fleet starts: wall, this process's CPU and the simulator's, per host."""
    from console.host.session import make_transport

    done = []
    c0, s0, w0 = cpu_s(), sum(pid_cpu_s(p) for p in sim_pids), time.perf_counter()
    for profile in profiles[:count]:
        t = make_transport(profile)
        await t.connect()
        done.append(t)
    c1, s1, w1 = cpu_s(), sum(pid_cpu_s(p) for p in sim_pids), time.perf_counter()
    for t in done:
        await t.close()
    n = max(1, len(done))
    return {"hosts": len(done), "wall_ms_per_host": round(1000 * (w1 - w0) / n, 1),
            "console_cpu_ms_per_host": round(1000 * (c1 - c0) / n, 1),
            "simulator_cpu_ms_per_host": round(1000 * (s1 - s0) / n, 1)}


async def bench_ssh(hosts: int, warmup: float, seconds: float, sim_procs: int, sim: str = "quiet",
                    max_connecting: int | None = None, handshakes: int = 0) -> dict[str, Any]:
    from console.config import HostProfile
    from console.domain.fleet.hosts import Fleet
    from console.ui.app import FleetApp
    from console.host.transport.ssh import SshTransport

    if sim == "quiet":
        # Every host in ONE process (console.demo.hostsim.multihost): its own port, host key and
        # sandbox; tools are `sh` scripts over files, so the hosts cost this machine little.
        procs = 1
        sims = [subprocess.Popen([sys.executable, "-m", "console.demo.hostsim.multihost", str(hosts)], cwd=ROOT,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)]
    else:
        # The story's hosts (a Python process per tool call, a simulated SGLang each), in several
        # processes (each simulator process is one event loop).
        procs = max(1, min(hosts, sim_procs))
        sizes = [hosts // procs + (1 if i < hosts % procs else 0) for i in range(procs)]
        sims = [subprocess.Popen([sys.executable, "-c", SIM, str(n), str(ROOT), str(sum(sizes[:i]))],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                for i, n in enumerate(sizes)]
    try:
        profiles = []
        for proc in sims:
            assert proc.stdout is not None
            profiles += [HostProfile(**{k: tuple(v) if isinstance(v, list) else v for k, v in p.items()})
                         for p in json.loads(proc.stdout.readline())]
        # As the demo does: the Hub's answer for the simulated repo comes from a local cache.
        from console.demo.hostsim.downloader import DownloadPlan
        from console.demo.hostsim.scenario import write_hub_cache

        cache = Path(tempfile.mkdtemp(prefix="fleet-bench-cache-"))
        os.environ["GPUCONSOLE_CACHE_DIR"] = str(cache)
        write_hub_cache(cache, DownloadPlan())
        latencies: dict[str, list[float]] = {}
        measuring = False
        original = SshTransport.run

        async def timed_run(self: SshTransport, script: str, *, timeout: float = 10.0) -> Any:
            started = time.perf_counter()
            try:
                return await original(self, script, timeout=timeout)
            finally:
                if measuring:
                    latencies.setdefault(self.label, []).append(time.perf_counter() - started)

        handshake = await handshake_cost(profiles, [p.pid for p in sims], handshakes) if handshakes else None
        SshTransport.run = timed_run  # type: ignore[method-assign]
        from console.domain.fleet.hosts import MAX_CONNECTING

        fleet = Fleet(profiles, demo=sim != "quiet", max_connecting=max_connecting or MAX_CONNECTING)
        marks: dict[str, float] = {}

        def timed_close() -> Any:  # when the app's quit reached the fleet's close, and its end
            # Called as the app calls the CLI's `fleet.close`: its synchronous part (the aborts) at
            # once, the coroutine it returns in the app's close task.
            marks.setdefault("close_started", time.monotonic())
            closing = fleet.close()

            async def finish() -> None:
                try:
                    await closing
                finally:
                    marks.setdefault("close_returned", time.monotonic())

            return finish()

        app = FleetApp(fleet.states, start=fleet.start, close=timed_close, title="bench")
        cpu_start, rss_start = cpu_s(), rss_mib()[0]
        started = time.monotonic()
        task = await run_app(app)

        def connected_count() -> int:
            return sum(1 for s in fleet.states if s.connection is not None and s.connection.status == "connected")

        def gpu_read_count() -> int:
            return sum(1 for s in fleet.states if s.data("gpu") is not None)

        all_connected_s = all_gpus_s = None
        warm_lag: list[float] = []  # the loop's lateness while the hosts connect
        warm_lag_task = asyncio.ensure_future(loop_lag(warm_lag))
        while time.monotonic() - started < warmup:
            if all_connected_s is None and connected_count() == hosts:
                all_connected_s = time.monotonic() - started
            if all_gpus_s is None and gpu_read_count() == hosts:
                all_gpus_s = time.monotonic() - started
            await asyncio.sleep(0.1)
        warm_lag_task.cancel()
        cpu_warmup = cpu_s() - cpu_start
        connected = connected_count()
        screen = app.fleet_screen
        screen.refresh_times_s.clear()
        measuring = True
        lag: list[float] = []
        lag_task = asyncio.ensure_future(loop_lag(lag))
        profile = None
        if os.environ.get("FLEET_BENCH_PROFILE"):
            import cProfile

            profile = cProfile.Profile()
            profile.enable()
        sim_pids = [p.pid for p in sims]
        cpu0, t0, sim0 = cpu_s(), time.monotonic(), sum(pid_cpu_s(p) for p in sim_pids)
        load0 = os.getloadavg()[0]
        # One row's freshness: how old each host's GPU reading is, looked at once a second.
        ages: list[float] = []
        while time.monotonic() - t0 < seconds:
            await asyncio.sleep(1.0)
            if all_connected_s is None and connected_count() == hosts:
                all_connected_s = time.monotonic() - started  # after the warm-up, still said
            now = time.time()
            for state in fleet.states:
                reading = state.reading("gpu")
                if reading is not None and reading.ok_at_s is not None:
                    ages.append(max(0.0, now - reading.ok_at_s))
        cpu1, t1, sim1 = cpu_s(), time.monotonic(), sum(pid_cpu_s(p) for p in sim_pids)
        load1 = os.getloadavg()[0]
        if profile is not None:
            profile.disable()
            profile.dump_stats(os.environ["FLEET_BENCH_PROFILE"])
        measuring = False
        lag_task.cancel()
        connected_end = connected_count()
        rss, hwm = rss_mib()
        refresh = list(screen.refresh_times_s)
        every = [x for v in latencies.values() for x in v]
        per_host_p99 = [pct(v, 99) for v in latencies.values() if v]
        result = {
            "mode": "ssh", "sim": sim, "hosts": hosts, "simulator_processes": procs,
            "connected_after_warmup": connected, "seconds": seconds,
            "all_connected_s": None if all_connected_s is None else round(all_connected_s, 2),
            "all_gpus_read_s": None if all_gpus_s is None else round(all_gpus_s, 2),
            "warmup_cpu_s": round(cpu_warmup, 2), "rss_mib_before_fleet": round(rss_start, 1),
            "max_connecting": fleet.max_connecting, "handshake": handshake,
            "warmup_event_loop_lag_ms": summary_ms(warm_lag),
            "cpu_pct_of_one_core": round(100 * (cpu1 - cpu0) / (t1 - t0), 1),
            "simulator_cpu_pct_of_one_core": round(100 * (sim1 - sim0) / (t1 - t0), 1),
            "rss_mib": round(rss, 1), "peak_rss_mib": round(hwm, 1),
            "gpu_reading_age_ms": summary_ms(ages),
            "poll_latency_ms": summary_ms(every),
            "worst_host_p99_ms": _ms(max(x for x in per_host_p99 if x is not None)) if per_host_p99 else None,
            "fleet_refresh_ms": summary_ms(refresh), "event_loop_lag_ms": summary_ms(lag),
            "connected_at_end": connected_end,
            "not_connected_why": dict(collections.Counter(
                f"{s.connection.status}: {s.connection.detail}" if s.connection else "no connection yet"
                for s in fleet.states if s.connection is None or s.connection.status != "connected")),
            "load_average_1m": [round(load0, 2), round(load1, 2)],
        }
        print(json.dumps(result), file=sys.stderr, flush=True)  # the figures, even if the exit hangs
        ports = {p.port for p in profiles}
        result["connections_before_exit"] = open_connections(ports)
        close_profile = None
        if os.environ.get("FLEET_BENCH_CLOSE_PROFILE"):  # cProfile of the quit, from `q` to the app's end
            import cProfile

            close_profile = cProfile.Profile()
            close_profile.enable()
        app.exit()
        closing, cpu_closing = time.monotonic(), cpu_s()
        try:
            try:
                await asyncio.wait_for(asyncio.shield(task), 2.0)
            except asyncio.TimeoutError:
                # The goal's bound passed: what is still running, by where each task waits.
                result["connections_open_after_2s"] = open_connections(ports)
                result["tasks_left_after_2s"] = tasks_left(task)
            await asyncio.wait_for(task, 120)
            result["exit_s"] = round(time.monotonic() - closing, 2)
        except asyncio.TimeoutError:
            result["exit_s"] = "did not exit within 120 s"
        result["exit_cpu_s"] = round(cpu_s() - cpu_closing, 2)
        if close_profile is not None:
            close_profile.disable()
            close_profile.dump_stats(os.environ["FLEET_BENCH_CLOSE_PROFILE"])
        result["exit_timeline_s"] = {k: round(v - closing, 2) for k, v in marks.items()}
        result["connections_open_after_exit"] = open_connections(ports)
        result["load_average_1m_at_exit"] = round(os.getloadavg()[0], 2)
        SshTransport.run = original  # type: ignore[method-assign]
        return result
    finally:
        for proc in sims:
            if proc.stdin:
                proc.stdin.close()
        for proc in sims:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()


def open_connections(ports: set[int]) -> int:
    """This process's TCP connections to the simulated hosts' ports still open (any state but
    closed: an ESTABLISHED or a half-closed one still holds the host's sshd session)."""
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port in ports and fields[9] in inodes and fields[3] != "07":  # 07: TCP_CLOSE
                count += 1
    return count


def _awaited_frames(coro: Any) -> list[Any]:
    """The frames below a task's own: what its coroutine awaits, down the chain (through the
    async generator an `async for` is in, found among what its `asend` refers to)."""
    frames: list[Any] = []
    seen = 0
    while coro is not None and seen < 50:
        seen += 1
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        frames.append(frame)
        awaited = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None) \
            or getattr(coro, "gi_yieldfrom", None)
        if awaited is not None and type(awaited).__name__ in ("async_generator_asend", "async_generator_athrow"):
            awaited = next((v for v in gc.get_referents(awaited) if type(v).__name__ == "async_generator"), None)
        coro = awaited
    return frames[1:]


def tasks_left(app_task: asyncio.Task[Any]) -> dict[str, int]:
    """The loop's tasks still pending (the app's own left out), counted by the innermost frame of
    the console's code each waits in ("console/host/sources/gpu.py:59 _lines")."""
    where: collections.Counter[str] = collections.Counter()
    for t in asyncio.all_tasks():
        if t is app_task or t is asyncio.current_task() or t.done():
            continue
        frames = t.get_stack(limit=50) + _awaited_frames(t.get_coro())
        ours = [f for f in frames if "/console/" in f.f_code.co_filename]
        f = (ours or frames or [None])[-1]
        if f is None:
            where["(no frame)"] += 1
            continue
        path = f.f_code.co_filename.split("/console/", 1)[-1]
        where[f"{path}:{f.f_lineno} {f.f_code.co_name}"] += 1
    return dict(where.most_common(12))


def main_queries(fleet: Any) -> None:
    """Make `fleet` query as main did at d2e6719: one `__name__=~"A|B|C|D"` regex selector per
    family, no total deadline or size cap (for the before/after in one run)."""
    from console.domain.fleet.prom import decode_answer, selector

    async def family(names: tuple[str, ...]) -> list[Any]:
        response = await fleet._client.get("/api/v1/query", params={
            "query": selector(names, fleet.match), "timeout": f"{fleet.timeout_s:g}s"})
        return decode_answer(response.content)

    fleet._within_deadline = family


async def prometheus_variant(url: str, variant: str, cycles: int, interval: float,
                             server_pid: int) -> dict[str, Any]:
    from console.domain.fleet.prom import PrometheusFleet
    from console.ui.app import FleetApp

    fleet = PrometheusFleet(url, interval_s=interval, timeout_s=10)
    if variant == "main":
        main_queries(fleet)
    app = FleetApp([], title="bench")

    def new_hosts(states: Any) -> None:
        app.fleet_screen.add_states(states)

    fleet.on_new_hosts = new_hosts
    task = await run_app(app)
    await fleet.poll_once()  # the first cycle creates the states (measured apart)
    first_cycle = fleet.cycle_times_s[-1]
    await asyncio.sleep(interval)
    screen = app.fleet_screen
    screen.refresh_times_s.clear()
    fleet.cycle_times_s.clear()
    fleet.query_times_s.clear()
    profile = None
    if os.environ.get("FLEET_BENCH_PROFILE"):  # where the CPU goes, for whoever tunes this
        import cProfile

        profile = cProfile.Profile()
        profile.enable()
    cpu0, t0, server0 = cpu_s(), time.monotonic(), pid_cpu_s(server_pid)
    loads = [os.getloadavg()[0]]
    cycle_cpu: list[float] = []
    server_cpu: list[float] = []
    for _ in range(cycles):
        started = time.monotonic()
        # CPU seconds, not wall: on a shared 2-core machine the wall time of a cycle is mostly
        # waiting for a core; this process's CPU during the cycle (the UI's share included) and
        # Prometheus's own CPU for the queries are what the load does not change.
        c0, s0 = cpu_s(), pid_cpu_s(server_pid)
        await fleet.poll_once()
        cycle_cpu.append(cpu_s() - c0)
        server_cpu.append(pid_cpu_s(server_pid) - s0)
        await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))
    cpu1, t1, server1 = cpu_s(), time.monotonic(), pid_cpu_s(server_pid)
    loads.append(os.getloadavg()[0])
    if profile is not None:
        profile.disable()
        profile.dump_stats(f"{os.environ['FLEET_BENCH_PROFILE']}.{variant}")
    rss, hwm = rss_mib()
    refresh = list(screen.refresh_times_s)
    cycle = list(fleet.cycle_times_s)
    rows = len(screen.rows)
    app.exit()
    await asyncio.wait_for(task, 30)
    await fleet.close()
    return {
        "variant": variant, "rows": rows, "cycles": cycles, "first_cycle_ms": _ms(first_cycle),
        "cycle_ms": summary_ms(cycle), "query_wait_ms": summary_ms(list(fleet.query_times_s)),
        "cycle_console_cpu_ms": summary_ms(cycle_cpu), "cycle_prometheus_cpu_ms": summary_ms(server_cpu),
        "fleet_refresh_ms": summary_ms(refresh),
        "cycle_plus_refresh_p99_ms": _ms((pct(cycle, 99) or 0) + (pct(refresh, 99) or 0)),
        "cpu_pct_of_one_core": round(100 * (cpu1 - cpu0) / (t1 - t0), 1),
        "prometheus_cpu_pct_of_one_core": round(100 * (server1 - server0) / (t1 - t0), 1),
        "rss_mib": round(rss, 1), "peak_rss_mib": round(hwm, 1),
        "mean_cycle_ms": _ms(statistics.mean(cycle)) if cycle else None,
        "load_average_1m": [round(x, 2) for x in loads],
    }


async def bench_prometheus(hosts: int, gpus: int, cycles: int, interval: float,
                           variants: list[str]) -> dict[str, Any]:
    from console.demo.promserver import ScrapeTarget, start_prometheus

    gen = subprocess.Popen([sys.executable, "-c", GEN, str(hosts), str(gpus), str(ROOT)], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    tmp = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    server = None
    try:
        assert gen.stdout is not None
        port = int(gen.stdout.readline())
        server = await asyncio.to_thread(start_prometheus, tmp, [ScrapeTarget("gen", f"127.0.0.1:{port}")],
                                         interval_s=interval)
        await asyncio.to_thread(server.wait_for_series, "DCGM_FI_DEV_FB_USED", hosts * gpus, 90)
        await asyncio.to_thread(server.wait_for_series, "sglang:gen_throughput", hosts, 60)
        runs = [await prometheus_variant(server.url, v, cycles, interval, server.process.pid) for v in variants]
        result: dict[str, Any] = {
            "mode": "prometheus", "hosts": hosts, "gpus_per_host": gpus, "series_per_cycle": hosts * (gpus * 4 + 4),
            "interval_s": interval, "runs": runs,
        }
        if len(runs) == 1:
            result.update(runs[0])
        else:
            for v in dict.fromkeys(variants):
                p50s = [r["cycle_ms"]["p50"] for r in runs if r["variant"] == v]
                result[f"{v}_cycle_p50_ms_median"] = statistics.median(p50s)
                result[f"{v}_cycle_p50_ms_runs"] = p50s
                cpus = [r["cycle_console_cpu_ms"]["p50"] for r in runs if r["variant"] == v]
                result[f"{v}_cycle_console_cpu_p50_ms_median"] = statistics.median(cpus)
                cpus = [r["cycle_prometheus_cpu_ms"]["p50"] for r in runs if r["variant"] == v]
                result[f"{v}_cycle_prometheus_cpu_p50_ms_median"] = statistics.median(cpus)
        return result
    finally:
        if server is not None:
            server.stop()
        if gen.stdin:
            gen.stdin.close()
        gen.wait(10)


def main() -> None:
    import logging

    logging.getLogger("asyncio").setLevel(logging.ERROR)
    logging.getLogger("asyncssh").setLevel(logging.ERROR)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    ssh = sub.add_parser("ssh")
    ssh.add_argument("--hosts", type=int, default=50)
    ssh.add_argument("--warmup", type=float, default=30.0)
    ssh.add_argument("--seconds", type=float, default=60.0)
    ssh.add_argument("--sim-procs", type=int, default=max(1, (os.cpu_count() or 2) // 2),
                     help="processes the story's hosts run in (--sim story; default: half the cores)")
    ssh.add_argument("--max-connecting", type=int, default=None, help="SSH handshakes in flight at once (the fleet's)")
    ssh.add_argument("--handshakes", type=int, default=10,
                     help="hosts connected one after another before the fleet: each handshake's CPU (0: none)")
    ssh.add_argument("--sim", choices=("quiet", "story"), default="quiet",
                     help="quiet: every host in one process (console.demo.hostsim.multihost, cheap sh tools); "
                          "story: the demo's story hosts (a Python process per tool call)")
    prom = sub.add_parser("prometheus")
    prom.add_argument("--hosts", type=int, default=500)
    prom.add_argument("--gpus", type=int, default=8)
    prom.add_argument("--cycles", type=int, default=12)
    prom.add_argument("--interval", type=float, default=5.0)
    prom.add_argument("--variants", default="now",
                      help="comma-separated, run in turn against the same Prometheus: now (this code), main "
                           "(main's regex queries at d2e6719); e.g. now,main,now,main for a before/after")
    args = parser.parse_args()
    if args.mode == "ssh":
        result = asyncio.run(bench_ssh(args.hosts, args.warmup, args.seconds, args.sim_procs, args.sim,
                                     args.max_connecting, args.handshakes))
    else:
        result = asyncio.run(bench_prometheus(args.hosts, args.gpus, args.cycles, args.interval,
                                              args.variants.split(",")))
    result["machine"] = f"{os.cpu_count()} cores, python {sys.version.split()[0]}"
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
