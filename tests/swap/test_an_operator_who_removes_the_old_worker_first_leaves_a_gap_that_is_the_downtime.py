"""The beside path on the simulated 8-GPU host, its switch done by hand in the wrong order: the console
starts the new server beside the old one, then the operator removes the old worker from the router
first and adds the new one some seconds later (a shell on the host: nothing audited). Between the two
the router had no worker: every request through it was refused. That gap, by the router's own
stamps, is the downtime, named as such; the switch is done at the add. Before, the plan said "the old
worker not removed: the router still sends its traffic" (false: it had removed it) and the swap never
ended. The live plan, the recording's report and its headline say the same."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from console.core.derive.swap_observer import OUTSIDE, path_summary
from console.core.derive.swap_view import ROUTER_GAP
from console.demo import swap_demo
from console.demo.swap_demo import render_all, run_path_demo
from console.domain.swap.fastpath import curl_json
from console.domain.swap.report import headline
from tests.kit.downtime import operators_shell

CONSOLES_STEPS = ("download", "paths", "install", "preflight", "beside")
PAUSE_S = 3.0  # between the operator's removal and add (real seconds: the router stamps its own time)


def test_the_routers_gap_between_removing_the_old_worker_and_adding_the_new_one_is_the_downtime(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    played = swap_demo.play
    seen: dict[str, Any] = {}

    async def console_then_operator(swap: Any, state: Any, keys: tuple[str, ...], **kwargs: Any) -> None:
        await played(swap, state, CONSOLES_STEPS, **kwargs)
        router, new, old, shell = operators_shell(swap, state)
        r = await shell.run(curl_json(f"{router}/remove_worker?url={old}", {}, 20), timeout=30)
        assert r.text.strip().endswith("200"), r.text
        await asyncio.sleep(PAUSE_S)
        r = await shell.run(curl_json(f"{router}/add_worker?url={new}", {}, 20), timeout=30)
        assert r.text.strip().endswith("200"), r.text
        await swap_demo.until(lambda: getattr(state.swap.steps.get("switch_traffic"), "state", None) == "done", 180)
        seen["summary"] = path_summary(state)

    monkeypatch.setattr(swap_demo, "play", console_then_operator)
    saved = dict(os.environ)
    try:
        rec, state = asyncio.run(run_path_demo(tmp_path / "out", "beside", work=tmp_path / "w", quiet=True))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    moves = state.data("router").moves
    removed = [m.at_s for m in moves if m.verb == "removed"][-1]
    added = [m.at_s for m in moves if m.verb == "added"][-1]
    assert added - removed >= 2.0, moves  # whole-second stamps of a 3 s pause
    switch = state.swap.steps["switch_traffic"]
    assert switch.observed and switch.who is None and OUTSIDE in switch.detail, switch
    assert (switch.state, switch.started_at_s, switch.ended_at_s) == ("done", removed, added), switch
    assert "before it added" in switch.detail and "no worker in the router for" in switch.detail, switch.detail
    d = state.swap.downtime
    assert d is not None and (d.started_at_s, d.ended_at_s) == (removed, added), d
    assert d.start_source.startswith(ROUTER_GAP) and OUTSIDE in d.start_source, d
    assert state.swap.downtime_parts() == [
        ("no worker in the router (the old one removed before the new one was added)", added - removed)]
    assert seen["summary"][0] == "beside" and seen["summary"][1] == pytest.approx(added - removed)
    render_all(rec, tmp_path / "out", "report")
    r = json.loads((tmp_path / "out" / "report.json").read_text())
    assert r["swap_path"] == "beside" and r["timing"]["downtime_s"] == pytest.approx(added - removed), r["timing"]
    line = headline(r)[1]
    assert line.startswith(f"downtime {added - removed:.0f}s: no worker in the router"), line
    assert "none" not in line, line
