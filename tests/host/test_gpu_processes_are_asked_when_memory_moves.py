"""The nvidia-smi stream's process list (`--query-compute-apps`, a run of its own) was asked every
5 s whatever the GPUs did: on a still host an nvidia-smi run on the host and a round-trip for the
console every 5 s for the same list (issue 36 item 2). It is now asked whenever a GPU's memory
moved since the last ask (at most every 5 s, as before) and at least every 30 s on still GPUs;
the processes shown are the host's (a process that starts or leaves moves the memory)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import console.host.sources.gpu as gpu_source
from console.host.sources.gpu import GpuSource

DATA = Path(__file__).resolve().parent.parent / "data" / "h200"
LINE = (DATA / "nvidia_smi_query_gpu.txt").read_text().strip().splitlines()[0]
UUID = LINE.split(", ")[2]


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t

    def time(self) -> float:
        return 1_700_000_000.0 + self.t

    def perf_counter(self) -> float:
        return self.t


class _Stream:
    """`nvidia-smi -lms`: one line per sample; the clock moves a second between samples."""

    def __init__(self, clock: _Clock, memory: list[int]) -> None:
        self.clock, self.memory = clock, memory
        self.stderr_tail, self.exit_status = "", 0

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[bytes]:
        fields = LINE.split(", ")
        for used in self.memory:
            self.clock.t += 1.0
            fields[3] = str(used)
            yield (", ".join(fields) + "\n").encode()

    async def close(self) -> None:
        pass


class _Transport:
    def __init__(self, clock: _Clock, memory: list[int]) -> None:
        self.clock, self.memory = clock, memory
        self.apps_pid = 458
        self.apps_runs = 0

    async def stream(self, script: str) -> _Stream:
        return _Stream(self.clock, self.memory)

    async def run(self, script: str, *, timeout: float = 10.0) -> Any:
        assert "--query-compute-apps" in script
        self.apps_runs += 1
        return SimpleNamespace(text=f"{UUID}, {self.apps_pid}, /usr/bin/python3, 41570\n")


async def _readings(memory: list[int], clock: _Clock, transport: _Transport | None = None) -> tuple[GpuSource, list[Any]]:
    source = GpuSource(transport or _Transport(clock, memory), local=False)
    got = [reading async for reading in source._smi_stream()]
    return source, got


async def test_a_still_gpu_is_asked_for_its_processes_every_30s_not_every_5s(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(gpu_source, "time", clock)
    transport = _Transport(clock, [41579] * 120)  # two minutes of a GPU whose memory is still
    source, got = await _readings([], clock, transport)
    assert len(got) == 120
    assert transport.apps_runs == source.apps_asked <= 5, transport.apps_runs  # before: 24 (one per 5 s)
    assert all(r.data.gpus[0].processes and r.data.gpus[0].processes[0].pid == 458 for r in got)


async def test_memory_that_moves_asks_for_the_processes_within_5s(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(gpu_source, "time", clock)
    memory = [41579] * 20 + [90_000] * 20  # a server starts at second 20
    transport = _Transport(clock, memory)
    asked: list[float] = []
    real_run = transport.run

    async def run(script: str, *, timeout: float = 10.0) -> Any:
        asked.append(clock.t)
        if clock.t > 1020:
            transport.apps_pid = 999  # the new server
        return await real_run(script, timeout=timeout)

    transport.run = run  # type: ignore[method-assign]
    source, got = await _readings(memory, clock, transport)
    moved_at = 1021.0
    assert any(moved_at <= t <= moved_at + 5 for t in asked), asked
    assert got[-1].data.gpus[0].processes[0].pid == 999
