"""Simulated hosts forming one deployment (issue 37): `--demo-deployment multinode|pd`.

multinode: two 8-GPU hosts serve one Qwen3.5-397B over `--nnodes 2` (TP16: TP0-7 on node 0, TP8-15
on node 1), meeting at node 0's --dist-init-addr on loopback. An older revision of it serves on both
at the start. Node 1's copy of the new checkpoint is still downloading (one shard short, its partial
under .cache/huggingface/download). With `operator=True` a host-side operator swaps it: stops the old
units on both nodes, starts node 0's new unit, and node 1's only once its download is complete, so
rank 0 waits at distributed init meanwhile (what the deployment's status names). With
`operator=False` nothing moves until the console's own swap moves it (the driven units of
console/demo/hostsim/drive.py: `systemctl start/stop` on each host open and close the unit's window).

pd: a prefill host, a decode host and a router host (`python -m sglang_router.launch_router
--pd-disaggregation --prefill URL BOOTSTRAP --decode URL`, fake_sglang/pd_router.py). The decode host
also has DECODE_TUNED_UNIT: the serving revision's weights with one flag changed, the change that may be
swapped on the decode side alone (`config_toml(decode_unit=DECODE_TUNED_UNIT)` points the decode
node's `unit` at it).

Each host is a full HostSimulator (real SSH, real shell, its own sandbox); all on loopback.
Simulator behaviour, never a real host's measurements.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import tempfile
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from console.config import HostProfile
from console.demo.hostsim import HostSimulator, drive, placement
from console.demo.hostsim.downloader import qwen122b_config
from console.demo.hostsim.downtime_scenario import write_model
from console.demo.hostsim.server import HostIdentity
from console.demo.hostsim.services import UNITS_DIR, Timeline, UnitRunner, install_units

MODEL_DIR = "/shared/models/Qwen3.5-397B-A17B"
OLD_MODEL_DIR = "/shared/models/Qwen3.5-397B-A17B-r1"
OLD_UNIT = "sglang-qwen397b-r1.service"
NEW_UNIT = "sglang-qwen397b.service"
SHARDS = 12
T_OLD_STOP = 15.0  # scenario seconds: the host-side operator stops the old units
T_NODE0_START = 20.0  # ... starts node 0's new unit
T_DOWNLOAD_DONE = 50.0  # node 1's last shard lands
SGLANG_VERSION = "0.5.23"
DECODE_TUNED_UNIT = "sglang-decode-r1-tuned.service"  # pd: the decode side's flag-only change


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unit_text(sim: Any, description: str, args: str, *, gpus: str = "0,1,2,3,4,5,6,7",
              module: str = "sglang.launch_server") -> str:
    return (f"[Unit]\nDescription={description}\nAfter=network-online.target\n\n[Service]\nType=simple\n"
            f"WorkingDirectory={sim.root}/opt/sglang\nEnvironment=\"CUDA_VISIBLE_DEVICES={gpus}\" \"NCCL_DEBUG=WARN\"\n"
            f"ExecStart={sim.root}/opt/sglang/.venv/bin/python -m {module} {args}\n"
            "Restart=no\n\n[Install]\nWantedBy=multi-user.target\n")


def mn_args(sim: Any, model: str, rank: int, dist: str) -> str:
    return (f"--model-path {sim.host_path(model)} --served-model-name qwen3.5-397b --tp-size 16 "
            f"--nnodes 2 --node-rank {rank} --dist-init-addr {dist} --host 127.0.0.1 --port {sim.server_port} "
            "--mem-fraction-static 0.85 --enable-metrics --trust-remote-code")


def write_shards(directory: Path, *, missing: int = 0) -> None:
    """The checkpoint with its index; the last `missing` shards still downloading (a partial each)."""
    sizes = [20_000_000_000] * SHARDS
    write_model(directory, qwen122b_config(), sizes)
    names = [f"model-{i:05d}-of-{SHARDS:05d}.safetensors" for i in range(1, SHARDS + 1)]
    (directory / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": sum(sizes)}, "weight_map": {f"w{i}": n for i, n in enumerate(names)}}))
    partials = directory / ".cache" / "huggingface" / "download"
    for name in names[SHARDS - missing:]:
        (directory / name).unlink()
        partials.mkdir(parents=True, exist_ok=True)
        with open(partials / f"{name}.{'0' * 8}.incomplete", "wb") as fh:
            fh.truncate(sizes[0] * 2 // 3)


def finish_download(directory: Path) -> None:
    partials = directory / ".cache" / "huggingface" / "download"
    for part in sorted(partials.glob("*.incomplete")):
        name = part.name.split(".", 1)[0] + ".safetensors"
        with open(directory / name, "wb") as fh:
            fh.truncate(20_000_000_000)
        part.unlink()


def install_sglang(sim: Any, version: str = SGLANG_VERSION) -> None:
    """The unit's interpreter and the fake `sglang` package (services.install_units), with the
    dist-info that `importlib.metadata.version("sglang")` reads, and the router's package."""
    install_units(sim, [], sim.server_port)
    pylib = sim.root / ".sim" / "pylib"
    info = pylib / f"sglang-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    router = pylib / "sglang_router"
    router.mkdir(parents=True, exist_ok=True)
    (router / "__init__.py").write_text("")
    (router / "launch_router.py").write_text(
        "import sys\nfrom console.demo.hostsim.fake_sglang.pd_router import main\n"
        "if __name__ == '__main__':\n    raise SystemExit(main(sys.argv[1:]))\n")


def node_profile(sim: Any, name: str, unit: str | None, model: str | None, server_port: int) -> HostProfile:
    return HostProfile(name=name, host="127.0.0.1", port=sim.port, user="root", identity=str(sim.client_key_path),
                       known_hosts=str(sim.known_hosts_path), unit=unit, model_dir=sim.host_path(model) if model else None,
                       server_port=server_port, disk_paths=(sim.host_path("/shared"),))


@dataclass
class DeploymentSim:
    """The simulated hosts of one deployment scenario; `profiles` and the config's TOML to reach them."""

    kind: str
    speed: float = 1.0
    operator: bool = True
    sims: list[Any] = field(default_factory=list)
    profiles: list[tuple[HostProfile, str, int]] = field(default_factory=list)  # (profile, role, node_rank)
    dist_init_addr: str | None = None

    async def start(self) -> None:
        names = ("gpu-node-0", "gpu-node-1") if self.kind == "multinode" else ("gpu-prefill", "gpu-decode", "pd-router")
        for name in names:
            sim = HostSimulator(identity=HostIdentity(hostname=name), speed=self.speed, scenario="drive")
            await sim.start()
            self.sims.append(sim)
        if self.kind == "multinode":
            await self._multinode()
        elif self.kind == "pd":
            await self._pd()
        else:
            raise ValueError(f"no such deployment scenario: {self.kind}")

    async def _multinode(self) -> None:
        self.dist_init_addr = f"127.0.0.1:{free_port()}"
        old_dist = f"127.0.0.1:{free_port()}"
        for rank, sim in enumerate(self.sims):
            placement.set_gpu_count(sim.root, 8)
            install_sglang(sim)
            write_shards(sim.path(OLD_MODEL_DIR))
            write_shards(sim.path(MODEL_DIR), missing=1 if rank == 1 else 0)
            units = sim.path(UNITS_DIR)
            units.mkdir(parents=True, exist_ok=True)
            # the old revision on the same port (it is stopped before the new one starts)
            (units / OLD_UNIT).write_text(unit_text(sim, "SGLang: Qwen3.5-397B-A17B r1, TP16 over 2 nodes",
                                                    mn_args(sim, OLD_MODEL_DIR, rank, old_dist)))
            (units / NEW_UNIT).write_text(unit_text(sim, "SGLang: Qwen3.5-397B-A17B, TP16 over 2 nodes",
                                                    mn_args(sim, MODEL_DIR, rank, self.dist_init_addr)))
            drive.init(sim.root, OLD_UNIT, NEW_UNIT)
            runner = UnitRunner(sim, Timeline({}))
            runner.driven = True
            runner.extra_env[OLD_UNIT] = {"GPUSIM_BOOTED": "1"}  # serving for hours: no rendezvous to replay
            sim.add_task(runner.run())
            profile = node_profile(sim, f"gpu-node-{rank}", NEW_UNIT, MODEL_DIR, sim.server_port)
            self.profiles.append((replace(profile, compare_unit=OLD_UNIT), "rank", rank))
        self.sims[1].add_task(self._download_lands())
        if self.operator:
            self.sims[0].add_task(self._operate())

    async def _download_lands(self) -> None:
        """Node 1's `hf download` finishes its last shard (host-side, whoever swaps)."""
        await self._at(self.sims[1], T_DOWNLOAD_DONE)
        finish_download(self.sims[1].path(MODEL_DIR))

    async def _operate(self) -> None:
        """The host-side operator of the watch demo: old units off, node 0 on, node 1 once its copy is whole."""
        s0, s1 = self.sims
        await self._at(s0, T_OLD_STOP)
        for sim in self.sims:
            self._window(sim, OLD_UNIT, start=False)
        await self._at(s0, T_NODE0_START)
        self._window(s0, NEW_UNIT, start=True)
        await self._at(s0, T_DOWNLOAD_DONE + 5.0)
        self._window(s1, NEW_UNIT, start=True)

    @staticmethod
    async def _at(sim: Any, t: float) -> None:
        await asyncio.sleep(max(0.0, (t - sim.elapsed_s()) / sim.speed))

    @staticmethod
    def _window(sim: Any, unit: str, *, start: bool) -> None:
        path = sim.root / ".sim" / "drive.json"
        data = json.loads(path.read_text())
        ws = data.setdefault("windows", {}).setdefault(unit, [])
        t = sim.elapsed_s()
        if start and not (ws and ws[-1][1] is None):
            ws.append([t, None])
        elif not start and ws and ws[-1][1] is None:
            ws[-1][1] = t
        tmp = path.with_name("drive.json.op.tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)

    async def _pd(self) -> None:
        prefill, decode, router = self.sims
        bootstrap = free_port()
        for sim, mode in ((prefill, "prefill"), (decode, "decode")):
            placement.set_gpu_count(sim.root, 8)
            install_sglang(sim)
            write_shards(sim.path(MODEL_DIR))
            write_shards(sim.path(OLD_MODEL_DIR))
            sim.path(UNITS_DIR).mkdir(parents=True, exist_ok=True)
            extra = f" --disaggregation-bootstrap-port {bootstrap}" if mode == "prefill" else ""
            for unit, model in ((f"sglang-{mode}-r1.service", OLD_MODEL_DIR), (f"sglang-{mode}.service", MODEL_DIR)):
                args = (f"--model-path {sim.host_path(model)} --served-model-name qwen3.5-397b --tp-size 8 "
                        f"--host 127.0.0.1 --port {sim.server_port} --disaggregation-mode {mode} "
                        f"--disaggregation-transfer-backend mooncake{extra} --enable-metrics --trust-remote-code")
                sim.path(f"{UNITS_DIR}/{unit}").write_text(unit_text(sim, f"SGLang {mode}: {Path(model).name}", args))
            if mode == "decode":
                # a flag-only change of the serving revision (the same weights, a lower batch limit):
                # what may be swapped on the decode side alone, behind the router
                args = (f"--model-path {sim.host_path(OLD_MODEL_DIR)} --served-model-name qwen3.5-397b --tp-size 8 "
                        f"--host 127.0.0.1 --port {sim.server_port} --disaggregation-mode decode "
                        "--disaggregation-transfer-backend mooncake --max-running-requests 128 "
                        "--enable-metrics --trust-remote-code")
                sim.path(f"{UNITS_DIR}/{DECODE_TUNED_UNIT}").write_text(
                    unit_text(sim, "SGLang decode: Qwen3.5-397B-A17B-r1, at most 128 running requests", args))
            old, new = f"sglang-{mode}-r1.service", f"sglang-{mode}.service"
            drive.init(sim.root, old, new)
            # the old revision has served for hours (the watch demo's operator starts the new one)
            runner = UnitRunner(sim, Timeline({}))
            runner.driven = True
            runner.extra_env[old] = {"GPUSIM_BOOTED": "1"}
            sim.add_task(runner.run())
            if self.operator:
                self._window(sim, old, start=False)
                self._window(sim, new, start=True)
            profile = node_profile(sim, sim.identity.hostname, new, MODEL_DIR, sim.server_port)
            self.profiles.append((replace(profile, compare_unit=old), mode, 0))
        install_sglang(router)
        router.path(UNITS_DIR).mkdir(parents=True, exist_ok=True)
        rport = router.server_port
        args = (f"--pd-disaggregation --prefill http://127.0.0.1:{prefill.server_port} {bootstrap} "
                f"--decode http://127.0.0.1:{decode.server_port} --host 0.0.0.0 --port {rport}")
        router.path(f"{UNITS_DIR}/sglang-router.service").write_text(
            unit_text(router, "SGLang router (PD)", args, gpus="", module="sglang_router.launch_router"))
        drive.init(router.root, "sglang-router.service", "sglang-router.service")
        self._open(router, "sglang-router.service")  # the router runs in either demo
        self.profiles.append((node_profile(router, "pd-router", "sglang-router.service", None, rport), "router", 0))

    def _open(self, sim: Any, unit: str) -> None:
        runner = UnitRunner(sim, Timeline({}))
        runner.driven = True
        runner.extra_env[unit] = {"GPUSIM_BOOTED": "1"}
        sim.add_task(runner.run())
        self._window(sim, unit, start=True)

    def config_toml(self, name: str | None = None, *, decode_unit: str | None = None) -> str:
        """The config a reader would write for these hosts (the README's example, live). `decode_unit`:
        the decode node's own unit (a node's `unit` overrides its profile's)."""
        name = name or ("qwen-397b" if self.kind == "multinode" else "qwen-pd")
        lines = []
        for p, _role, _rank in self.profiles:
            lines += [f"[profiles.{p.name}]", f'host = "{p.host}"', f"port = {p.port}", f'user = "{p.user}"',
                      f'identity = "{p.identity}"', f'known_hosts = "{p.known_hosts}"', f'unit = "{p.unit}"',
                      f"server_port = {p.server_port}"]
            if p.compare_unit:
                lines.append(f'compare_unit = "{p.compare_unit}"')
            if p.model_dir:
                lines.append(f'model_dir = "{p.model_dir}"')
            lines.append("")
        nodes = ", ".join(f'{{ profile = "{p.name}", role = "{role}", node_rank = {rank}'
                          + (f', unit = "{decode_unit}"' if decode_unit and role == "decode" else "") + " }"
                          for p, role, rank in self.profiles)
        lines += [f"[deployments.{name}]", f'kind = "{self.kind}"', f"nodes = [{nodes}]"]
        if self.kind == "multinode":
            # each simulated host is a sandbox of its own on this one machine: its paths and its
            # server's loopback port differ from the other's, as they would not on real hosts
            lines.append('may_differ = ["--model-path", "--port"]')
        lines.append("")
        return "\n".join(lines)

    async def stop(self) -> None:
        await asyncio.gather(*(s.stop() for s in self.sims), return_exceptions=True)


class DeploymentSimThread:
    """The scenario on a thread of its own (as the fleet demo's), so it never competes with the UI loop."""

    def __init__(self, kind: str, *, speed: float = 1.0, operator: bool = True) -> None:
        self.sim = DeploymentSim(kind, speed, operator)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="deploysim", daemon=True)
        self.cache_root: Path | None = None

    def start(self) -> DeploymentSim:
        self._thread.start()
        self.cache_root = Path(tempfile.mkdtemp(prefix="gpuconsole-demo-cache-"))
        os.environ["GPUCONSOLE_CACHE_DIR"] = str(self.cache_root)
        asyncio.run_coroutine_threadsafe(self.sim.start(), self._loop).result(120)
        return self.sim

    @property
    def audit_file(self) -> Path | None:
        """This run's own audit log, in its directory (removed with it): its simulated hosts are born
        with the run, so no earlier demo's commands are theirs (all are 127.0.0.1)."""
        return self.cache_root / "audit.jsonl" if self.cache_root is not None else None

    def stop(self) -> None:
        try:
            if self._thread.is_alive():
                try:
                    asyncio.run_coroutine_threadsafe(self.sim.stop(), self._loop).result(30)
                finally:
                    self._loop.call_soon_threadsafe(self._loop.stop)
                    self._thread.join(5)
        finally:
            if self.cache_root is not None:
                shutil.rmtree(self.cache_root, ignore_errors=True)
