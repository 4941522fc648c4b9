"""A console killed in the middle of the beside path's traffic switch, on the simulated 8-GPU host in
containers (console/demo/hostsim/downtime_scenario.py: the old container on GPUs 0-3 behind the
simulated router, the new one started beside it on GPUs 4-7): a fresh console started afterwards
works the router's moves out from the router's own record — its log's "Added worker"/"Removed
worker" lines at the router's time, its worker list — and credits them to their author from the
killed console's audit log. Killed after the add and before the remove: the add is shown done at
the router's time, the remove not done; killed after both: both, once each."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from console.core.derive.swap_view import SwapStepChanged
from console.core.runner import HostRunner
from console.core.state import HostState, ReadingChanged
from console.demo.hostsim import downtime_scenario as ds
from console.demo.swap_demo import play, simulated_host
from console.domain.swap.controller import SwapController
from console.host.session import HostSession, make_transport

BY_ANA = "by ana from a console that ended: its audit log"
WAIT_S = 120.0


async def _until(predicate: Any, what: str, timeout_s: float = WAIT_S) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not seen within {timeout_s:.0f}s: {what}")
        await asyncio.sleep(0.1)


async def _console(profile: Any, work: Path, who: str) -> tuple[HostRunner, HostState]:
    """A console on the simulated host (its own state, its audit log the shared file), started."""
    session = HostSession(profile, make_transport(profile), demo=True, bench_path=work / "bench.jsonl")
    state = HostState("gpu-sim-01", demo=True)
    runner = HostRunner(session, state, swap=SwapController)
    runner.swap.who = who
    runner.swap.poll_s = 0.2
    runner.swap.audit_file = work / "audit.jsonl"
    runner.announce()
    await runner.start()
    return runner, state


def _hold(runner: HostRunner, text: str) -> asyncio.Event:
    """The console's next command containing `text` never reaches the host: it waits until the
    console is killed (the returned event says the console got there)."""
    transport, reached = runner.session.transport, asyncio.Event()
    run = transport.run

    async def held(script: str, *args: Any, **kwargs: Any) -> Any:
        if text in script:
            reached.set()
            await asyncio.Event().wait()
        return await run(script, *args, **kwargs)

    transport.run = held  # type: ignore[method-assign]
    return reached


@dataclass
class Seen:
    """What a fresh console showed, and what the router's log says."""

    switch: Any  # the switch step as the fresh console wrote it
    writes: list[Any]  # every write of the switch step the fresh console made
    router_log: str
    commands: tuple[str, str]  # the killed console's add and remove commands
    views: list[Any]  # the fresh console's swap: live, a late attach of it


async def _fresh_console_sees(profile: Any, work: Path, router_log: Path, commands: tuple[str, str],
                              ready: Any) -> Seen:
    runner, state = await _console(profile, work, "bob")
    writes: list[Any] = []
    readings = [0]

    def seen(e: Any) -> None:
        if isinstance(e, SwapStepChanged) and e.step.key == "switch_traffic":
            writes.append(e)
        elif isinstance(e, ReadingChanged) and e.source == "router":
            readings[0] += 1

    state.subscribe(seen)
    try:
        await _until(lambda: ready(state.swap.steps.get("switch_traffic")),
                     "the fresh console's traffic switch credited to ana")
        then = readings[0]
        await _until(lambda: readings[0] >= then + 2, "two more router readings")  # nothing written twice
        attach = HostState.from_snapshot(state.snapshot())
        return Seen(state.swap.steps["switch_traffic"], [e.step for e in writes], router_log.read_text(), commands,
                    [state.swap.to_data(), attach.swap.to_data()])
    finally:
        await runner.close()


async def _story(work: Path) -> tuple[Seen, Seen]:
    sim = await simulated_host(work, 16.0)
    scenario = await ds.start(sim, "beside", earlier_boot=True, runtime="container")
    profile = scenario.profile.with_overrides({"router_url": scenario.router_url,
                                                "router_log": scenario.router_log})
    router_log = Path(scenario.router_log or "")
    try:
        # ana's console: the new container beside the old one, then the switch; killed before the remove
        ana, state = await _console(profile, work, "ana")
        await _until(lambda: state.data("server") is not None and state.data("server").status == "ready",
                     "the old server ready", 600)
        held = _hold(ana, "/remove_worker")
        await play(ana.swap, state, ("download", "paths", "install", "preflight", "beside"), quiet=True)
        assert state.swap.steps["beside"].state == "done", state.swap.steps["beside"]
        (action,) = ana.swap.fast.build("switch_traffic")
        add, remove, _stop = (c.script for c in action.commands)
        assert ana.swap.request("switch_traffic", "ana") is None
        await asyncio.wait_for(held.wait(), WAIT_S)
        await ana.close()  # killed: nothing more of it reaches the host
        after_add = await _fresh_console_sees(profile, work, router_log, (add, remove),
                                              lambda s: s is not None and s.who == "ana")
        # ana's console again (started anew), its remove sent, then killed before the stop
        again, _ = await _console(profile, work, "ana")
        result = await again.swap._run("ana", "switch_traffic", next(c for c in action.commands if c.script == remove))
        assert result.ok, result
        await again.close()
        after_both = await _fresh_console_sees(profile, work, router_log, (add, remove),
                                               lambda s: s is not None and s.who == "ana" and "removed" in s.detail)
        return after_add, after_both
    finally:
        await scenario.close()
        await sim.stop()


@pytest.fixture(scope="module")
def lived(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Seen, Seen]]:
    saved = dict(os.environ)
    try:
        yield asyncio.run(_story(tmp_path_factory.mktemp("killed-mid-switch")))
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _router_times(log: str, verb: str) -> list[float]:
    """The router's own stamps of its "VERB worker" lines (local time, whole seconds)."""
    return [dt.datetime.fromisoformat(m.group(1)).timestamp()
            for m in re.finditer(rf"^(\S+) INFO \S+ {verb} worker http", log, re.M)]


def test_killed_after_the_add_a_fresh_console_shows_the_add_done_at_the_routers_time_and_the_remove_not_done(
        lived: tuple[Seen, Seen]) -> None:
    seen, _ = lived
    add, _remove = seen.commands
    (added,) = _router_times(seen.router_log, "Added")
    assert _router_times(seen.router_log, "Removed") == []  # the host: nothing removed
    s = seen.switch
    assert (s.state, s.who, s.commands) == ("running", "ana", (add,)), s
    assert (s.started_at_s, s.ended_at_s) == (added, None), s
    assert BY_ANA in s.detail and "not removed" in s.detail and "and removed" not in s.detail, s.detail
    assert len(seen.writes) == 1, seen.writes
    assert seen.views[0] == seen.views[1]


def test_killed_after_both_moves_a_fresh_console_shows_each_once_at_the_routers_time(
        lived: tuple[Seen, Seen]) -> None:
    _, seen = lived
    add, remove = seen.commands
    (added,), (removed,) = _router_times(seen.router_log, "Added"), _router_times(seen.router_log, "Removed")
    s = seen.switch
    assert (s.state, s.who, s.commands) == ("running", "ana", (add, remove)), s
    assert s.started_at_s == added and s.ended_at_s is None, s
    assert s.detail.count("added") == 1 and s.detail.count("removed") == 1 and BY_ANA in s.detail, s.detail
    assert time_in(s.detail, removed) and "not stopped" in s.detail, s.detail
    assert len(seen.writes) == 1, seen.writes
    assert seen.views[0] == seen.views[1]


def time_in(detail: str, at: float) -> bool:
    return dt.datetime.fromtimestamp(at).strftime("%H:%M:%S") in detail
