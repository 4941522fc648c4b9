"""Many quiet simulated hosts served from one process (issue 23 item 5): each its own SSH port,
host key, sandbox and hostname, all on one event loop, so 50 or 100 hosts fit on a 2-core
machine beside the console that watches them.

A quiet host is the README's: GPUs that print the recorded real H200 output of `tests/data/h200`
(GPU i with its index and UUID changed, per host), a finished model dir (sparse shards), a log
that does not grow, no unit, no server listening. Unlike `HostSimulator`'s story tools (a Python
process per call), every tool here is a `sh` script over files written once, so a poll costs
the host a `sh` fork, as on a real host, not a Python start: the simulator's own CPU stays small
beside the console's.

    python -m console.demo.hostsim.multihost 50 [--gpus 2]   # prints the profiles as one JSON line,
                                                        # serves until stdin closes
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shlex
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from console.config import HostProfile
from console.demo.hostsim.server import HostIdentity, HostSimulator
from console.locations import PACKAGE_PARENT

DATA = PACKAGE_PARENT / "tests" / "data"
MODEL_DIR = "/shared/models/quiet"
LOG_FILE = "/var/log/sglang.log"

# nvidia-smi as the GPU source calls it: `--query-gpu=… --format=csv,noheader,nounits [-lms N]`
# and `--query-compute-apps=…`. The stream prints the same rows once a second (the source's
# default interval), with the shell's builtin `read`/`printf`: one `sleep` fork a second.
FAKE_NVIDIA_SMI = """#!/bin/sh
for a in "$@"; do case "$a" in --query-compute-apps=*) exec cat {apps};; esac; done
for a in "$@"; do
  if [ "$a" = -lms ]; then
    while :; do
      while IFS= read -r l; do printf '%s\\n' "$l" || exit 0; done < {gpus}
      sleep 1
    done
  fi
done
exec cat {gpus}
"""


def gpu_rows(hostname: str, index: int, gpus: int) -> str:
    """The recorded H200 row, once per GPU, with the host's own UUIDs."""
    fields = [f.strip() for f in (DATA / "h200" / "nvidia_smi_query_gpu.txt").read_text().strip().split(",")]
    rows = []
    for i in range(gpus):
        uuid = fields[2][:-8] + format(index, "04x") + format(i, "04x")
        rows.append(", ".join([str(i), fields[1], uuid, *fields[3:]]))
    return "\n".join(rows) + "\n"


class QuietHostSimulator(HostSimulator):
    """A HostSimulator whose tools are cheap `sh` scripts over fixed files (no story)."""

    def __init__(self, index: int, *, gpus: int = 2, model_files: int = 60, root: str | Path | None = None) -> None:
        super().__init__(root, identity=HostIdentity(hostname=f"quiet-{index + 1:03d}"))
        self.index = index
        self.gpus = gpus
        self.model_files = model_files

    def _install_tools(self) -> None:
        bin_dir = self.bin_dir
        data = self.root / ".sim" / "data"
        bin_dir.mkdir(parents=True, exist_ok=True)
        data.mkdir(parents=True, exist_ok=True)
        (data / "gpus.csv").write_text(gpu_rows(self.identity.hostname, self.index, self.gpus))
        (data / "apps.csv").write_text((DATA / "h200" / "nvidia_smi_apps.txt").read_text())
        tools = {
            "nvidia-smi": FAKE_NVIDIA_SMI.format(gpus=shlex.quote(str(data / "gpus.csv")),
                                                 apps=shlex.quote(str(data / "apps.csv"))),
            "hostname": f"#!/bin/sh\nprintf '%s\\n' {shlex.quote(self.identity.hostname)}\n",
        }
        for name, text in tools.items():
            (bin_dir / name).write_text(text)
            (bin_dir / name).chmod(0o755)
        self._host_files()

    def _host_files(self) -> None:
        model = self.path(MODEL_DIR)
        model.mkdir(parents=True, exist_ok=True)
        shards = max(1, self.model_files - 2)
        size = 250 * 10**9 // shards
        names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
        for name in names:
            with open(model / name, "wb") as fh:
                fh.truncate(size)  # sparse: no disk used
        index = {"metadata": {"total_size": size * shards}, "weight_map": {f"w{i}": n for i, n in enumerate(names)}}
        (model / "model.safetensors.index.json").write_text(json.dumps(index))
        (model / "config.json").write_text("{}")
        log = self.path(LOG_FILE)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text((DATA / "sglang_real_lines.txt").read_text())

    def profile(self) -> HostProfile:
        return HostProfile(
            name=self.identity.hostname, host="127.0.0.1", port=self.port, user="root",
            identity=str(self.client_key_path), known_hosts=str(self.known_hosts_path),
            model_dir=self.host_path(MODEL_DIR), log_file=self.host_path(LOG_FILE),
            server_port=self.server_port, disk_paths=(self.host_path("/shared"),),
        )


@dataclass
class MultiHostServer:
    """`count` quiet hosts on this process's loop: `await start()` returns their profiles."""

    count: int
    gpus: int = 2
    model_files: int = 60
    first_index: int = 0

    def __post_init__(self) -> None:
        self.hosts: list[QuietHostSimulator] = []

    async def start(self) -> list[HostProfile]:
        sem = asyncio.Semaphore(8)

        async def one(i: int) -> QuietHostSimulator:
            async with sem:
                host = QuietHostSimulator(i, gpus=self.gpus, model_files=self.model_files)
                await host.start()
                return host

        self.hosts = list(await asyncio.gather(*(one(self.first_index + i) for i in range(self.count))))
        return [h.profile() for h in self.hosts]

    async def stop(self) -> None:
        await asyncio.gather(*(h.stop() for h in self.hosts), return_exceptions=True)


async def _serve(count: int, gpus: int, model_files: int) -> None:
    server = MultiHostServer(count, gpus, model_files)
    profiles = await server.start()
    print(json.dumps([asdict(p) for p in profiles]), flush=True)
    try:
        await asyncio.to_thread(sys.stdin.read)  # until our parent closes stdin (or goes away)
    finally:
        await server.stop()


def main(argv: list[str] | None = None) -> int:
    logging.getLogger("asyncssh").setLevel(logging.ERROR)
    ap = argparse.ArgumentParser(prog="python -m console.demo.hostsim.multihost", description=__doc__.splitlines()[0])
    ap.add_argument("count", type=int)
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--model-files", type=int, default=60)
    a = ap.parse_args(argv)
    if not 1 <= a.count <= 1000 or not 1 <= a.gpus <= 64:
        print("multihost: 1..1000 hosts of 1..64 GPUs", file=sys.stderr)
        return 2
    asyncio.run(_serve(a.count, a.gpus, a.model_files))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
