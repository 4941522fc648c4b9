"""Shared test kit: moved from test_share.py so that no test imports another test module."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from console.core.runner import HostRunner
from console.core.state import HostState
from console.demo.hostsim import HostSimulator
from console.demo.hostsim.scenario import demo_profile
from console.host.session import HostSession, make_transport
from console.share.client import ShareClient, attach
from console.share.server import ShareServer
from console.domain.swap.controller import SwapController


@dataclass
class Core:
    sim: HostSimulator
    state: HostState
    runner: HostRunner
    server: ShareServer
    sock: Path

    @property
    def tcp(self) -> str:
        assert self.server.tcp_address is not None
        host, port = self.server.tcp_address
        return f"{host}:{port}"


async def attached(address: str | Path, name: str, token: str = "") -> tuple[ShareClient, asyncio.Task[None]]:
    client = await attach(address, name=name, token=token)
    return client, asyncio.ensure_future(client.pump())


async def running_core(sim: HostSimulator, tmp_path: Path) -> AsyncIterator[Core]:
    profile = demo_profile(sim)
    session = HostSession(profile, make_transport(profile), demo=True, bench_path=tmp_path / "bench.jsonl")
    state = HostState("127.0.0.1", label="sim", demo=True)
    runner = HostRunner(session, state, swap=SwapController)
    runner.announce()
    short = Path(tempfile.mkdtemp(prefix="gc-"))  # AF_UNIX paths are short
    server = await ShareServer(state, runner).start(unix_path=short / "core.sock", tcp=("127.0.0.1", 0))
    await runner.start()
    try:
        yield Core(sim, state, runner, server, short / "core.sock")
    finally:
        await server.close()
        await runner.close()
        shutil.rmtree(short, ignore_errors=True)


@pytest.fixture
async def core(sim: HostSimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Core]:
    """A core on the bare simulated host (no story running)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    async for c in running_core(sim, tmp_path):
        yield c
