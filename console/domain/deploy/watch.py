"""Watching a deployment: one HostState per node (the fleet's per-host path, unchanged: each node
its own SSH session and runner), and each node's probe (probe.py) every PROBE_EVERY_S. The
deployment's view is derived from them on demand (state.derive); nothing is copied."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from console.domain.deploy.checks import Check, run_checks
from console.domain.deploy.probe import NodeProbe, probe_node
from console.domain.deploy.profile import Deployment
from console.domain.deploy.state import DeploymentView, _command, derive
from console.domain.fleet.hosts import Fleet

PROBE_EVERY_S = 15.0
PROBE_TIMEOUT_S = 10.0


class DeploymentWatch:
    def __init__(self, deployment: Deployment, *, accept_new_host_key: bool = False, demo: bool = False,
                 audit_file: Path | None = None) -> None:
        self.deployment = deployment
        # the audit log of every node's session and of the deployment swap, when not the user's (a
        # demo run's own, in its directory: its hosts are born with it)
        self.audit_file = audit_file
        # the fleet's key of each node is the node's key ("node0", "prefill0", "router")
        profiles = [replace(n.profile, name=n.key) for n in deployment.nodes]
        self.fleet = Fleet(profiles, accept_new_host_key=accept_new_host_key, demo=demo, audit_file=audit_file)
        self.probes: dict[str, NodeProbe] = {}
        self.on_probes: list[Any] = []  # called with the probes after each round (a shared deployment publishes them)
        self._probe_task: asyncio.Task[Any] | None = None

    @property
    def states(self) -> dict[str, Any]:
        return {key: host.state for key, host in self.fleet.hosts.items()}

    def transport(self, key: str) -> Any:
        host = self.fleet.hosts.get(key)
        return host.runner.session.transport if host is not None else None

    def runner(self, key: str) -> Any:
        """The node's runner (its sources: a swap step asks it to read a unit again at once)."""
        host = self.fleet.hosts.get(key)
        return host.runner if host is not None else None

    async def start(self) -> None:
        await self.fleet.start()
        self._probe_task = asyncio.ensure_future(self._probe_loop())

    async def probe_all(self) -> dict[str, NodeProbe]:
        """Probe every node at once (each bounded by its own timeout, killed on its host)."""
        states = self.states

        async def one(key: str) -> tuple[str, NodeProbe]:
            node = self.deployment.node(key)
            cmd = _command(states.get(key))
            python = cmd.launcher[0] if cmd is not None and cmd.launcher and "python" in cmd.launcher[0] else "python3"
            addr = cmd.value("--dist-init-addr") if cmd is not None else None
            transport = self.transport(key)
            if transport is None or not transport.state.usable:
                return key, NodeProbe(time.time(), error=f"{node.label} not connected")
            return key, await probe_node(transport, python, addr if isinstance(addr, str) else None,
                                         timeout_s=PROBE_TIMEOUT_S, server_port=node.profile.server_port)

        results = await asyncio.gather(*(one(n.key) for n in self.deployment.nodes))
        self.probes.update(dict(results))
        for callback in list(self.on_probes):
            callback(self.probes)
        return dict(results)

    async def _probe_loop(self) -> None:
        while True:
            with contextlib.suppress(Exception):  # a failed probe is data (NodeProbe.error), never the loop's end
                await self.probe_all()
            await asyncio.sleep(PROBE_EVERY_S)

    def view(self, now_s: float | None = None) -> DeploymentView:
        return derive(self.deployment, self.states, self.probes, now_s)

    def checks(self) -> tuple[Check, ...]:
        return run_checks(self.deployment, self.states, self.probes)

    async def close(self) -> None:
        if self._probe_task is not None:
            self._probe_task.cancel()
            with contextlib.suppress(BaseException):
                await self._probe_task
        await self.fleet.close()
