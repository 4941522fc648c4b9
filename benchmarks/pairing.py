"""Pairing: what attached clients cost the core and the host, and how late they show a reading.

Three kinds of process, all on loopback:
  - the simulated host (demo story running) in its own process; it answers "stats" on stdin with
    its SSH connections (ever opened, open now) and the remote processes it is running;
  - one `gpuconsole serve` (the core) connected to it over SSH like to a real host;
  - 0, then 1, then 10 headless attached consoles (`SharedConsoleApp`, 120x40), each its own
    process, recording for every GPU reading the time from the core's sample (`Reading.ok_at_s`,
    set when the core parsed it) to the client's screen refresh that drew it.

For each phase: the core's CPU (utime+stime from /proc/PID/stat over the window), the host's
connections and processes, and the clients' latency percentiles.

    .venv/bin/python benchmarks/pairing.py [--seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SIM = r"""
import asyncio, json, logging, sys
logging.getLogger("asyncio").setLevel(logging.ERROR)
sys.path.insert(0, sys.argv[1])
from console.demo.hostsim import HostSimulator
from console.demo.hostsim.scenario import start_scenario, demo_profile
async def main():
    sim = HostSimulator()
    await sim.start()
    await start_scenario(sim)
    p = demo_profile(sim)
    print(json.dumps({"port": p.port, "identity": p.identity, "known_hosts": p.known_hosts,
                      "model_dir": p.model_dir, "server_port": p.server_port, "unit": p.unit,
                      "compare_unit": p.compare_unit, "forbidden": p.forbidden_prefixes[0]}), flush=True)
    while True:
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            break
        print(json.dumps({"connections": sim.connections, "open": len(sim.open_connections),
                          "processes": len(sim._children)}), flush=True)
    await sim.stop()
asyncio.run(main())
"""


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- one attached client ----------------------------------------------------------------------
async def client_main(sock: str, seconds: float, out: str, name: str, from_wall: float) -> None:
    from console.core.state import ReadingChanged
    from console.ui.attach_app import SharedConsoleApp
    from console.share.client import RemoteControl, attach

    client = await attach(sock, name=name)
    latencies: list[float] = []
    arrivals: list[float] = []  # the same, up to the event landing in the client's mirror state

    def landed(event: object) -> None:
        if (isinstance(event, ReadingChanged) and event.source == "gpu" and event.reading.error is None
                and event.reading.ok_at_s >= from_wall):
            arrivals.append(time.time() - event.reading.ok_at_s)

    client.on_event_applied = landed

    control = RemoteControl(client)
    app = SharedConsoleApp(client.state, control, seat=control, start=client.pump, close=client.close, mode="attach")
    screen = app.host_screen
    pending: list[float] = []
    flush = screen.flush

    def timed_flush() -> None:  # the host screen's one refresh path: a reading is shown after its flush
        flush()
        for sampled in pending:
            app.call_after_refresh(lambda sampled=sampled: latencies.append(time.time() - sampled))
        pending.clear()

    screen.flush = timed_flush  # type: ignore[method-assign]

    def shown(event: object) -> None:
        if (isinstance(event, ReadingChanged) and event.source == "gpu" and event.reading.error is None
                and event.reading.ok_at_s >= from_wall):  # the window, not the attach and first draw
            pending.append(event.reading.ok_at_s)

    client.state.subscribe(shown)

    async def stop() -> None:
        await asyncio.sleep(seconds)
        app.exit(0)

    asyncio.get_running_loop().create_task(stop())
    await app.run_async(headless=True, size=(120, 40))
    Path(out).write_text(json.dumps({"display": latencies, "arrival": arrivals}))


async def raw_clients(sock: str, n: int, seconds: float) -> list[float]:
    """`n` protocol clients with no UI, in this process: the core's fan-out alone."""
    from console.core.state import ReadingChanged
    from console.share.client import attach

    arrivals: list[float] = []
    late: dict[float, int] = {}  # a sample's core time -> how many clients got it more than 100 ms late

    def landed(event: object) -> None:
        if isinstance(event, ReadingChanged) and event.source == "gpu" and event.reading.error is None:
            arrivals.append(time.time() - event.reading.ok_at_s)
            if arrivals[-1] > 0.1:
                late[event.reading.ok_at_s] = late.get(event.reading.ok_at_s, 0) + 1

    clients = [await attach(sock, name=f"raw{i}") for i in range(n)]
    pumps = [asyncio.ensure_future(client.pump()) for client in clients]
    await asyncio.sleep(2)  # the snapshots (a reading up to a second old) are not what we measure
    for client in clients:
        client.on_event_applied = landed
    lags: list[float] = []

    async def tick() -> None:  # this process's own event-loop lag: is a late sample ours or the core's?
        while True:
            t = time.monotonic()
            await asyncio.sleep(0.05)
            lags.append(time.monotonic() - t - 0.05)

    ticker = asyncio.ensure_future(tick())
    await asyncio.sleep(seconds)
    ticker.cancel()
    print(f"  the clients' own loop lag: max {max(lags) * 1000:.0f} ms", flush=True)
    for client in clients:
        await client.close()
    await asyncio.gather(*pumps)
    if late:
        print(f"  samples late (>100 ms) to some client: {len(late)}, to how many clients each: "
              f"{sorted(late.values(), reverse=True)}", flush=True)
    return arrivals


# -- the benchmark ----------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0, help="measurement window per phase")
    parser.add_argument("--clients", default="0,1,10")
    parser.add_argument("--raw", type=int, default=10, help="then this many protocol clients with no UI")
    parser.add_argument("--client", nargs=5, metavar=("SOCK", "SECONDS", "OUT", "NAME", "FROM"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        sock, seconds, out, name, from_wall = args.client
        asyncio.run(client_main(sock, float(seconds), out, name, float(from_wall)))
        return

    load_before = f"{os.getloadavg()[0]:.2f}"
    work = Path(tempfile.mkdtemp(prefix="gcb-"))
    env = {**os.environ, "GPUCONSOLE_CONFIG": "", "XDG_CONFIG_HOME": "/nonexistent", "XDG_DATA_HOME": str(work)}
    sim = subprocess.Popen([sys.executable, "-c", SIM, str(ROOT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True, env=env)
    assert sim.stdout is not None and sim.stdin is not None
    info = json.loads(sim.stdout.readline())

    def host_stats() -> dict[str, int]:
        assert sim.stdin is not None and sim.stdout is not None
        sim.stdin.write("stats\n")
        sim.stdin.flush()
        return json.loads(sim.stdout.readline())  # type: ignore[no-any-return]

    sock = work / "core.sock"
    serve = subprocess.Popen(
        [sys.executable, "-m", "console", "--no-record", "serve", "--socket", str(sock),
         "--host", "127.0.0.1", "--port", str(info["port"]), "--user", "root", "--identity", info["identity"],
         "--known-hosts", info["known_hosts"], "--model-dir", info["model_dir"], "--unit", info["unit"],
         "--compare-unit", info["compare_unit"], "--server-port", str(info["server_port"])],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT)
    results = []
    try:
        assert serve.stdout is not None
        while not serve.stdout.readline().startswith("  attach:"):
            pass
        time.sleep(10)  # the core connected, every source running
        for n in [int(x) for x in args.clients.split(",")]:
            outs = [work / f"lat-{n}-{i}.json" for i in range(n)]
            window = time.time() + 6  # attached and drawn by then (startup is not what we measure)
            clients = [subprocess.Popen([sys.executable, __file__, "--client", str(sock), str(args.seconds + 8),
                                         str(out), f"c{i}", str(window)], env=env, cwd=ROOT)
                       for i, out in enumerate(outs)]
            time.sleep(max(0.0, window - time.time()))
            before, t0 = cpu_s(serve.pid), time.monotonic()
            clients_before = sum(cpu_s(c.pid) for c in clients)
            time.sleep(args.seconds)
            elapsed = time.monotonic() - t0
            core_cpu = (cpu_s(serve.pid) - before) / elapsed * 100
            clients_cpu = (sum(cpu_s(c.pid) for c in clients) - clients_before) / elapsed * 100
            stats = host_stats()
            for c in clients:
                try:
                    c.wait(args.seconds + 120)
                except subprocess.TimeoutExpired:  # a starved client: its figures are missing, said below
                    c.kill()
                    c.wait(10)
            got = [json.loads(out.read_text()) for out in outs if out.exists()]
            lat = [x * 1000 for g in got for x in g["display"]]
            arr = [x * 1000 for g in got for x in g["arrival"]]
            row = {"clients": n, "reported": len(got), "core_cpu_pct": round(core_cpu, 2),
                   "clients_cpu_pct": round(clients_cpu, 1), "host": stats,
                   "latency_ms": {"n": len(lat), "p50": round(pct(lat, 0.5), 1), "p99": round(pct(lat, 0.99), 1),
                                  "max": round(max(lat), 1) if lat else None},
                   "arrival_ms": {"p50": round(pct(arr, 0.5), 1), "p99": round(pct(arr, 0.99), 1)}}
            results.append(row)
            print(json.dumps(row), flush=True)
            time.sleep(3)
        base = results[0]["core_cpu_pct"]
        for row in results[1:]:
            per = (row["core_cpu_pct"] - base) / row["clients"]
            print(f"{row['clients']} clients: core CPU {row['core_cpu_pct']} % of a core "
                  f"(+{per:.2f} % per client; the consoles themselves {row['clients_cpu_pct']} %), host {row['host']}, "
                  f"reading->client display p50 {row['latency_ms']['p50']} ms, p99 {row['latency_ms']['p99']} ms "
                  f"(n={row['latency_ms']['n']}; in the client's state: p50 {row['arrival_ms']['p50']} ms, "
                  f"p99 {row['arrival_ms']['p99']} ms)")
        print(f"0 clients: core CPU {base} % of a core, host {results[0]['host']}")
        if args.raw:
            arr = [x * 1000 for x in asyncio.run(raw_clients(str(sock), args.raw, args.seconds))]
            print(f"{args.raw} protocol clients without a UI (one process): reading->client state "
                  f"p50 {pct(arr, 0.5):.1f} ms, p99 {pct(arr, 0.99):.1f} ms (n={len(arr)})")
        print(f"load average before/after: {load_before} / {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    finally:
        serve.terminate()
        serve.wait(15)
        sim.stdin.close()
        sim.wait(30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
