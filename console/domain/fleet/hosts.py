"""Many hosts in one process: each its own HostState, SSH session and runner (the one-host path,
unchanged), with connects bounded in parallel. A host that refuses, hangs at connect or shows a
changed host key holds only its own task (and one connect slot for at most its connect timeout):
the others go on, and its row says what happened."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.config import HostProfile
from console.core.runner import HostRunner
from console.core.state import HostState
from console.host.session import HostSession, make_transport
from console.domain.swap.controller import SwapController

log = logging.getLogger("gpuconsole.fleet")

CLOSE_TIMEOUT_S = 5.0
# SSH handshakes in flight at once. A key exchange costs ~9 ms of the console's CPU and ~6 ms of
# the host's (benchmarks/fleet.py --handshakes, on this 2-core VM), so CPU is not what bounds a
# fleet's connecting: round trips are, and on a loaded machine each waits for the console's late
# loop. With 8 in flight, 100 hosts were 73-84 connected after 45 s (the rest queued or timed
# out); with 32, all 100 by 27 s at load 19-40 (issue 23 item 5). Still a bound: a hanging host
# holds one slot for its connect timeout, and 100 key exchanges never start in one burst.
MAX_CONNECTING = 32


class BoundedRunner(HostRunner):
    """A HostRunner whose every connect attempt waits for a slot of the fleet's semaphore, so 50
    hosts do not start 50 key exchanges at once, and a hanging host holds one slot only until
    its connect timeout."""

    def __init__(self, session: HostSession, state: HostState, gate: asyncio.Semaphore) -> None:
        super().__init__(session, state, swap=SwapController)
        self.gate = gate
        self.attempts = 0

    async def connect_once(self) -> None:
        async with self.gate:  # at most N handshakes at once; the retry policy is the runner's
            self.attempts += 1
            await self.session.transport.connect()


@dataclass
class FleetHost:
    key: str
    profile: HostProfile
    state: HostState
    runner: HostRunner
    task: asyncio.Task[Any] | None = None


def host_keys(profiles: Iterable[HostProfile]) -> list[str]:
    """A unique key per host: the profile's name, made unique with @port when two share it."""
    keys: list[str] = []
    for profile in profiles:
        key = profile.name or profile.host or "local"
        if key in keys:
            key = f"{key}@{profile.port or 22}"
        n = 2
        base = key
        while key in keys:
            key, n = f"{base}#{n}", n + 1
        keys.append(key)
    return keys


class Fleet:
    """The hosts of one console. `start()` returns at once; each host connects in its own task."""

    def __init__(self, profiles: Iterable[HostProfile], *, accept_new_host_key: bool = False,
                 demo: bool = False, max_connecting: int = MAX_CONNECTING, audit_file: Path | None = None) -> None:
        """`audit_file`: the hosts' audit log when it is not the user's (a demo run's own: its hosts
        are born with it, so no earlier run's commands are theirs)."""
        profiles = list(profiles)
        self.max_connecting = max(1, max_connecting)
        self.gate = asyncio.Semaphore(self.max_connecting)
        self.hosts: dict[str, FleetHost] = {}
        for key, profile in zip(host_keys(profiles), profiles, strict=False):
            transport = make_transport(profile, accept_new_host_key=accept_new_host_key)
            session = HostSession(profile, transport, demo=demo, audit_file=audit_file)
            state = HostState(key, label=key, demo=demo)
            # issue 24: the swap as each host lives it, and its path (the row's path cell), is derived
            # in its state (the runner turns the observer on, and follows a server that moved)
            runner = BoundedRunner(session, state, self.gate)
            runner.announce()
            self.hosts[key] = FleetHost(key, profile, state, runner)

    @property
    def states(self) -> list[HostState]:
        return [h.state for h in self.hosts.values()]

    def control(self, key: str) -> HostRunner | None:
        host = self.hosts.get(key)
        return host.runner if host is not None else None

    async def start(self) -> None:
        for host in self.hosts.values():
            if host.task is None:
                host.task = asyncio.ensure_future(self._run(host))
                host.task.set_name(f"{host.key}:start")

    async def _run(self, host: FleetHost) -> None:
        try:
            await host.runner.start()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one host's failure is its row's news, never the fleet's end
            log.exception("%s failed to start", host.key)
            host.runner.notice("host failed", f"{type(exc).__name__}: {exc}", "error")

    def close(self) -> Coroutine[Any, Any, None]:
        """Every host at once: each connection dropped (a handshake in flight aborted) and every
        host's tasks cancelled in this call itself, before anything is awaited, so a quit's `q`
        closes them at once rather than when a loop late under load reaches the close's task (it
        began 0.3-3.6 s after `q`: issue 36); the coroutine returned then waits for every host's
        tasks and tidies each host in parallel, each bounded. Closing one host after another, each
        waiting for its polls to notice a cancel, took 22 s for 50 hosts."""
        hosts = list(self.hosts.values())
        for host in hosts:
            abort = getattr(host.runner.session.transport, "abort", None)
            if abort is not None:
                abort()
            if host.task is not None:
                host.task.cancel()
            # ...and every source's task cancelled now too, in the same turn: when the app's own
            # bound cut this close short (100 hosts at load 50), no host's sources had been
            # cancelled yet, and all 500 ran on until the loop's shutdown (issue 36).
            for task in list(getattr(host.runner, "_tasks", ())):
                task.cancel()
        return self._tidy(hosts)

    async def _tidy(self, hosts: list[FleetHost]) -> None:
        tasks = [h.task for h in hosts if h.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT_S)
        # Each host's close is bounded on its own: one stuck host must not hold the others open.
        await asyncio.gather(*(self._close_one(h) for h in hosts), return_exceptions=True)

    @staticmethod
    async def _close_one(host: FleetHost, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        try:
            await asyncio.wait_for(host.runner.close(), timeout_s)
        except asyncio.TimeoutError:
            log.warning("%s did not close within %.0f s", host.key, timeout_s)
