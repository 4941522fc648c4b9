"""One poll of a 60-shard, 250 GB model directory with 3 partial files, over OpenSSH on loopback.

The directory is sparse (no disk used), laid out as `hf download --local-dir` leaves it. Target
(issue #4): one round-trip per poll, <= 5 ms on loopback, whatever the file sizes.

`--files N` adds small files (in 100 sub-directories, like a dataset repo) up to N in all, and
reports the console's own CPU per poll (this process: SSH decoding, parsing, summing) and that
as a share of one core at the source's default cadence (2 s while downloading). Target (issue 16):
<= 2 % of a core for 100k files.

    python benchmarks/download_poll.py [POLLS] [--files N]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from console.cli.doctor import percentile  # noqa: E402
from console.demo.hostsim.downloader import DownloadPlan, LocalDirDownloader, RepoFile  # noqa: E402
from console.host.sources.download import DownloadWatcher  # noqa: E402
from console.demo.sshd import start_sshd  # noqa: E402
from console.host.transport.ssh import SshOptions, SshTransport  # noqa: E402


class Counting:
    def __init__(self, inner: SshTransport) -> None:
        self.inner, self.runs, self.reads = inner, 0, 0

    async def run(self, script: str, *, timeout: float = 10.0):  # type: ignore[no-untyped-def]
        self.runs += 1
        return await self.inner.run(script, timeout=timeout)

    async def read_file(self, path: str, **kw):  # type: ignore[no-untyped-def]
        self.reads += 1
        return await self.inner.read_file(path, **kw)


async def main(polls: int, extra_files: int = 0) -> dict[str, object]:
    shards = 60
    size = 250 * 10**9 // shards
    files = [RepoFile(f"model-{i:05d}-of-{shards:05d}.safetensors", size, f"{i:064x}") for i in range(1, shards + 1)]
    index = {"metadata": {"total_size": size * shards}, "weight_map": {f"w{i}": f.path for i, f in enumerate(files)}}
    files.append(RepoFile("model.safetensors.index.json", 0, None, json.dumps(index).encode()))
    files[-1].size = len(files[-1].content or b"")
    files.append(RepoFile("config.json", 2, None, b"{}"))
    plan = DownloadPlan(files=files, start_bytes=0, rate_bytes_per_s=1.0, workers=3)
    model = Path(tempfile.mkdtemp(prefix="gpuconsole-bench-model-"))
    downloader = LocalDirDownloader(model, plan, lambda: 0.0)
    downloader.prepare()
    # 57 shards complete, 3 in flight at 40 %: set the plan's clock to the right byte count.
    plan.start_bytes = int(size * 57 + 3 * size * 0.4)
    downloader.step()
    for i in range(max(0, extra_files - len(files))):
        sub = model / "data" / f"part-{i % 100:03d}"
        if i < 100:
            sub.mkdir(parents=True, exist_ok=True)
        (sub / f"sample-{i:06d}.json").write_bytes(b"{}")
    sshd = start_sshd()
    try:
        t = SshTransport(SshOptions("127.0.0.1", port=sshd.port, user=sshd.user, identity=str(sshd.client_key),
                                    known_hosts=str(sshd.known_hosts), ssh_config=()))
        await t.connect()
        counted = Counting(t)
        watcher = DownloadWatcher(counted, str(model), None)  # type: ignore[arg-type]
        first = await watcher.poll()  # reads the index once
        await watcher.poll()  # and the shards' headers
        counted.runs = 1
        times = []
        cpu = []
        for _ in range(polls):
            s, c = time.perf_counter(), time.process_time()
            p = await watcher.poll()
            times.append((time.perf_counter() - s) * 1000)
            cpu.append((time.process_time() - c) * 1000)
            # the download moves between polls: a partial file grows, as it does every 2 s
            downloader.plan.start_bytes += 10**8
            downloader.step()
        await t.close()
    finally:
        sshd.stop()
    interval = 2.0
    cpu_p50 = statistics.median(cpu)
    return {"files": len(files) + max(0, extra_files - len(files)), "bytes_total": first.bytes_total,
            "bytes_done": p.bytes_done,
            "client_cpu_ms_per_poll": {"p50": round(cpu_p50, 2), "p95": round(percentile(cpu, 95), 2)},
            "client_cpu_pct_of_a_core_at_2s": round(cpu_p50 / (interval * 1000) * 100, 2),
            "partials": len(p.partial_files), "polls": polls, "round_trips_per_poll": (counted.runs - 1) / polls,
            "index_reads": counted.reads, "poll_ms": {"p50": round(statistics.median(times), 2),
                                                      "p95": round(percentile(times, 95), 2)}}


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("polls", nargs="?", type=int, default=200, help="polls to time")
    parser.add_argument("--files", type=int, default=0, help="files in the directory in all (default: 65)")
    args = parser.parse_args()
    result = asyncio.run(main(args.polls, args.files))
    print(json.dumps(result, indent=2))
