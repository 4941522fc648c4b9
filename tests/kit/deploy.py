"""Shared test kit for deployments (issue 37): HostStates of nodes built from real parsers' outputs
(a unit's text through side_from_text/build_report, log lines through parse_line)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from console.config import HostProfile
from console.core.state import ConnectionChanged, HostState, LogAppended, ReadingChanged
from console.domain.analysis.download import DownloadProgress
from console.domain.analysis.server_status import HttpFacts, ServerStatus
from console.domain.analysis.service_diff import HostFacts
from console.domain.analysis.service_report import build_report, side_from_text
from console.domain.deploy.checks import run_checks
from console.domain.deploy.profile import Deployment, DeploymentNode
from console.domain.deploy.state import derive
from console.host.parsers.sglang_log import parse_line
from console.host.transport.base import ConnectionState
from console.model import GpuDevice, GpuStatus, Reading

NOW = 1_796_284_800.0  # 2026-12-03 08:00:00 UTC


def unit(args: str, name: str = "sglang.service") -> str:
    return ("[Unit]\nDescription=SGLang\n[Service]\n"
            f"ExecStart=/opt/sglang/.venv/bin/python -m sglang.launch_server {args}\n")


def multinode_args(rank: int, *, tp: int = 16, nnodes: int = 2, dist: str = "10.0.0.1:5000",
                   extra: str = "") -> str:
    return (f"--model-path /models/Qwen3.5-397B-A17B --tp-size {tp} --nnodes {nnodes} --node-rank {rank} "
            f"--dist-init-addr {dist} --host 10.0.0.{rank + 1} --port 30000 {extra}").strip()


def deployment(kind: str = "multinode", nodes: int = 2) -> Deployment:
    if kind == "pd":
        return Deployment("pd", "pd", (DeploymentNode(HostProfile("gpu-a", "10.0.0.1"), "prefill", 0),
                                       DeploymentNode(HostProfile("gpu-b", "10.0.0.2"), "decode", 0),
                                       DeploymentNode(HostProfile("edge", "10.0.0.9"), "router", 0)))
    return Deployment("big", "multinode", tuple(DeploymentNode(HostProfile(f"gpu-{i}", f"10.0.0.{i + 1}"), "rank", i)
                                                for i in range(nodes)))


def node_state(name: str, *, args: str | None = None, lines: tuple[str, ...] = (), connected: bool = True,
               server: str | None = None, last_line_at_s: float | None = None, now: float = NOW,
               detail: str = "Connection refused", config: dict[str, object] | None = None,
               gpus: tuple[int, int] | None = None, weights_bytes: int | None = None) -> HostState:
    """`config`: the new unit's model's config.json as the host's service source read it; `gpus`:
    (count, MiB each) as nvidia-smi reports them; `weights_bytes`: the index's total_size."""
    state = HostState(name, clock=lambda: now)
    state.apply(ConnectionChanged(name, ConnectionState(name, "connected" if connected else "failed", now - 60,
                                                        None if connected else detail)))
    if args is not None:
        report = build_report(None, side_from_text("sglang.service", unit(args)), HostFacts(model_config=config))
        state.apply(ReadingChanged(name, "service", Reading("service", report, now)))
    if gpus is not None:
        devices = tuple(GpuDevice(i, "NVIDIA GPU", f"GPU-{name}-{i}", 0, gpus[1], 0, 30, 100.0, 700.0)
                        for i in range(gpus[0]))
        state.apply(ReadingChanged(name, "gpu", Reading("gpu", GpuStatus("nvml", devices, sampled_at_s=now), now)))
    if weights_bytes is not None:
        progress = DownloadProgress("/models/m", None, None, weights_bytes, weights_bytes, 1, 1, 1, 1, (), None,
                                    None, None, None, None, True, (), now)
        state.apply(ReadingChanged(name, "download", Reading("download", progress, now)))
    if server is not None:
        status = ServerStatus(server, "answers" if server == "ready" else server, "sglang.service", "active", 1234,
                              None, HttpFacts())
        state.apply(ReadingChanged(name, "server", Reading("server", status, now)))
    if lines:
        state.apply(LogAppended(name, tuple(parse_line(line) for line in lines)))
    if last_line_at_s is not None:
        from console.domain.analysis.log_state import LogSummary

        summary = LogSummary("log", None, (), None, None, None, None, None, None, (), len(lines), last_line_at_s)
        state.apply(ReadingChanged(name, "log", Reading("log", summary, now)))
    return state


def launch(stamp: str, ranks: range) -> list[str]:
    return [f"[{stamp}] server_args=ServerArgs(model_path='/models/Qwen3.5-397B-A17B', tp_size=16)"] + \
        [f"[{stamp} TP{r}] Init torch distributed begin." for r in ranks]


def init_ends(stamp: str, ranks: range) -> list[str]:
    return [f"[{stamp} TP{r}] Init torch distributed ends. elapsed=2.10 s, mem usage=0.45 GB" for r in ranks]


class FakeNodeHost:
    """A node's transport: every command answers 0, `systemctl show` says the unit is inactive;
    after a `systemctl stop` the node's GPU poller reads its GPUs again (`state`: a fresh reading of
    the same GPUs, each holding `held_mib` after the stop: none by default, drained)."""

    def __init__(self, state: HostState | None = None, held_mib: int = 0) -> None:
        self.ran: list[str] = []
        self.state = state
        self.held_mib = held_mib
        self.fail: dict[str, int] = {}  # a command's words -> the exit status it answers instead

    async def run(self, script: str, timeout: float = 0) -> Any:
        self.ran.append(script)
        for words, status in self.fail.items():
            if words in script:
                return SimpleNamespace(stdout=b"", stderr=f"Job for {words} failed".encode(), exit_status=status)
        if "systemctl stop" in script and self.state is not None:
            self._gpus_read_again()
        out = b"ActiveState=inactive\nSubState=dead\nMainPID=0\n" if "systemctl show" in script else b""
        return SimpleNamespace(stdout=out, stderr=b"", exit_status=0)

    def _gpus_read_again(self) -> None:
        assert self.state is not None
        now = self.state.data("gpu")
        if now is None:
            return
        at = time.time() + 0.001
        gpus = tuple(replace(g, memory_used_mib=self.held_mib) for g in now.gpus)
        self.state.apply(ReadingChanged(self.state.host, "gpu", Reading("gpu", replace(now, gpus=gpus, sampled_at_s=at),
                                                                         at)))


class FakeWatch:
    """A DeploymentWatch without SSH: node states from the kit, fake transports, drained GPUs.
    `ready`: the view says the whole deployment is ready (the swap's last wait ends at once)."""

    def __init__(self, d: Deployment, *, ready: bool = True, states: dict[str, HostState] | None = None) -> None:
        self.deployment = d
        self.states = states or {n.key: node_state(n.profile.name, gpus=(8, 143_771)) for n in d.nodes}
        self.hosts = {n.key: FakeNodeHost(self.states.get(n.key)) for n in d.nodes}
        self.probes: dict[str, Any] = {}
        self.on_probes: list[Any] = []
        self.ready = ready

    def transport(self, key: str) -> FakeNodeHost:
        return self.hosts[key]

    async def probe_all(self) -> dict[str, Any]:
        for callback in self.on_probes:
            callback(self.probes)
        return dict(self.probes)

    def checks(self) -> Any:
        return () if self.ready else run_checks(self.deployment, self.states, self.probes)

    def view(self, now_s: float | None = None) -> Any:
        if self.ready:
            return SimpleNamespace(status=SimpleNamespace(status="ready", reason="ready"), faults=(), timeline=())
        return derive(self.deployment, self.states, self.probes, NOW if now_s is None else now_s)


async def until(predicate: Any, timeout: float, what: str, show: Any = None) -> None:
    """Wait for a condition (polled every 0.1 s); fails naming `what` (and `show()`) after `timeout`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} never happened: {show() if show else ''}"
        await asyncio.sleep(0.1)


@asynccontextmanager
async def simulated_deployment(tmp_path: Path, kind: str, name: str, *, operator: bool | None = None,
                               **config: Any) -> AsyncIterator[tuple[Any, Any]]:
    """A simulated deployment (`kind`: multinode or pd, speed 4) and a DeploymentWatch of it read
    from a config file written as the operator's would be (`name` and `config` to its
    `config_toml`); both closed after."""
    from console.config import load_config
    from console.demo.hostsim.deployment import DeploymentSim
    from console.domain.deploy.watch import DeploymentWatch

    sim = DeploymentSim(kind, speed=4.0) if operator is None else DeploymentSim(kind, speed=4.0, operator=operator)
    await sim.start()
    cfg = tmp_path / "config.toml"
    cfg.write_text(sim.config_toml(name, **config))
    watch = DeploymentWatch(load_config(cfg).deployment(name), demo=True)
    try:
        await watch.start()
        yield sim, watch
    finally:
        await watch.close()
        await sim.stop()


def three_nodes() -> "FakeWatch":
    """Three nodes of one deployment whose profiles swap old.service for new.service."""
    d = deployment(nodes=3)
    return FakeWatch(replace(d, nodes=tuple(replace(n, profile=replace(n.profile, unit="new.service",
                                                                   compare_unit="old.service"))
                                        for n in d.nodes)))

