"""The swap driven from the console's actions, against the host simulator's driven scenario: real
SSH, a real shell, SFTP, the simulated systemctl/systemd-run/hf, the fake SGLang that boots (or
OOMs) along the story."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from console.core.runner import HostRunner
from console.core.state import HostState
from console.hostsim import HostSimulator
from console.hostsim.downloader import DownloadPlan
from console.hostsim.scenario import NEW_UNIT, OLD_UNIT, demo_profile, start_scenario, write_hub_cache
from console.session import HostSession, make_transport

SPEED = 8.0


@dataclass
class Driven:
    sim: HostSimulator
    state: HostState
    runner: HostRunner
    audit: Path


async def _until(predicate: object, timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


async def _driven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, oom: bool = False,
                  **profile_changes: object) -> AsyncIterator[Driven]:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:1")
    monkeypatch.setenv("GPUCONSOLE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    write_hub_cache(tmp_path / "cache", DownloadPlan())
    sim = HostSimulator(tmp_path / "host", speed=SPEED, scenario="drive")
    await sim.start()
    await start_scenario(sim, oom=oom)
    profile = demo_profile(sim).with_overrides({"gpu_interval_s": 0.5, **profile_changes})
    session = HostSession(profile, make_transport(profile), demo=True, bench_path=tmp_path / "bench.jsonl")
    state = HostState(sim.host_path("/"), label="sim")
    runner = HostRunner(session, state)
    runner.swap.poll_s = 0.2
    runner.swap.bench_plan = [(2, 4, 64, 32)]
    runner.announce()
    await runner.start()
    try:
        yield Driven(sim, state, runner, tmp_path / "data" / "gpuconsole" / "audit.jsonl")
    finally:
        runner.swap.cancel()
        await runner.close()
        await sim.stop()


@pytest.fixture
async def driven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Driven]:
    async for d in _driven(tmp_path, monkeypatch):
        yield d


@pytest.fixture
async def driven_oom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Driven]:
    async for d in _driven(tmp_path, monkeypatch, oom=True):
        yield d


async def _run(d: Driven, key: str, timeout: float = 90) -> None:
    why = d.runner.swap.request(key)
    assert why is None, why
    await d.runner.swap.wait_idle(timeout)


def _step(d: Driven, key: str) -> tuple[str, str]:
    s = d.state.swap.steps[key]
    return s.state, s.detail


async def test_the_seeds_swap_end_to_end_from_the_consoles_actions(driven: Driven) -> None:
    d = driven
    swap = d.runner.swap
    # Before: the old model serves; the new unit is not on the host.
    await _until(lambda: d.state.data("gpu") is not None and d.state.data("service") is not None, 20,
                 "GPU and service readings")
    assert all(g.memory_used_mib > 90_000 for g in d.state.data("gpu").gpus)
    assert not d.sim.path(f"/etc/systemd/system/{NEW_UNIT}").exists()

    await _run(d, "download", 120)
    assert _step(d, "download")[0] == "done", _step(d, "download")
    assert "39/39 shards" in _step(d, "download")[1]

    await _run(d, "install")
    assert _step(d, "install")[0] == "done", _step(d, "install")
    installed = d.sim.path(f"/etc/systemd/system/{NEW_UNIT}").read_text()
    assert installed == Path(d.runner.session.profile.unit_draft).read_text()
    assert (d.sim.root / ".sim" / "daemon-reload").exists()

    await _run(d, "preflight", 60)
    assert _step(d, "preflight")[0] == "done", [(c.name, c.ok, c.reason) for c in d.state.swap.gate]
    assert {c.name for c in d.state.swap.gate} == {"download", "sha256", "diff", "fit", "disk", "paths", "flags"}

    await _run(d, "stop_old", 60)
    assert _step(d, "stop_old")[0] == "done", _step(d, "stop_old")
    assert "drained" in _step(d, "stop_old")[1]
    assert d.state.swap.downtime is not None and d.state.swap.downtime.started_at_s is not None

    await _run(d, "start_new", 120)
    assert _step(d, "start_new")[0] == "done", _step(d, "start_new")
    downtime = d.state.swap.downtime
    assert downtime.ended_at_s is not None and downtime.ended_at_s > downtime.started_at_s
    assert d.state.data("server").status == "ready"

    await _run(d, "benchmark", 120)
    assert _step(d, "benchmark")[0] == "done", _step(d, "benchmark")

    # Every command is in the audit log, in the state and in the file, with its exit status.
    commands = [e.command for e in d.state.swap.audit]
    assert any("systemctl stop -- " + OLD_UNIT in c for c in commands)
    assert any("systemctl start -- " + NEW_UNIT in c for c in commands)
    assert all(e.exit_status == 0 for e in d.state.swap.audit if "systemctl st" in e.command)
    lines = [json.loads(x) for x in d.audit.read_text().splitlines()]
    assert len(lines) == len(d.state.swap.audit) and lines[0]["who"] == swap.who


async def test_a_new_server_that_ooms_fails_the_step_and_rolls_back_to_the_old_model(driven_oom: Driven) -> None:
    d = driven_oom
    await _until(lambda: d.state.data("service") is not None, 20, "the service reading")
    for key in ("download", "install"):
        await _run(d, key, 120)
        assert _step(d, key)[0] == "done", _step(d, key)
    await _run(d, "stop_old", 60)
    assert _step(d, "stop_old")[0] == "done", _step(d, "stop_old")
    await _run(d, "start_new", 120)
    state, detail = _step(d, "start_new")
    assert state == "failed" and "died" in detail and "out of memory" in detail, detail
    # Nothing after it ran; rollback is offered (and is the only way on).
    assert _step(d, "benchmark")[0] == "pending"
    await _run(d, "rollback", 120)
    state, detail = _step(d, "rollback")
    assert state == "done" and OLD_UNIT in detail, detail
    r = await d.runner.session.transport.run(f"systemctl is-active {OLD_UNIT}", timeout=10)
    assert r.text.strip() == "active"
