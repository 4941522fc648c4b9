"""The beside path on the simulated 8-GPU host (console/demo/hostsim/downtime_scenario.py: the old
server on GPUs 0-3 behind the simulated router): the console starts the new server beside the old
one, then the operator moves the router's workers by hand from a shell (no console action: not in
the audit) and keeps the old server running, warm for a rollback. The router's own log is the fact:
the switch is done at its "Removed worker" line, the downtime an instant (none) written by the
observer with its author (outside the console), and the report read from the recording says the
same as the live plan, with the old server still serving."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from console.core.derive.swap_observer import OUTSIDE, path_summary
from console.demo import swap_demo
from console.demo.swap_demo import render_all, run_path_demo
from console.domain.swap.fastpath import curl_json
from console.domain.swap.report import headline
from tests.kit.downtime import operators_shell

CONSOLES_STEPS = ("download", "paths", "install", "preflight", "beside")


def test_the_operators_router_moves_end_the_switch_and_the_old_server_stays_warm(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    played = swap_demo.play
    seen: dict[str, Any] = {}

    async def console_then_operator(swap: Any, state: Any, keys: tuple[str, ...], **kwargs: Any) -> None:
        await played(swap, state, CONSOLES_STEPS, **kwargs)
        router, new, old, shell = operators_shell(swap, state)
        for verb, url in (("add_worker", new), ("remove_worker", old)):
            r = await shell.run(curl_json(f"{router}/{verb}?url={url}", {}, 20), timeout=30)
            assert r.text.strip().endswith("200"), (verb, r.text)
        await swap_demo.until(lambda: getattr(state.swap.steps.get("switch_traffic"), "state", None) == "done", 180)
        seen["audit"] = [e.command for e in state.swap.audit]
        seen["service"] = state.data("service")
        seen["summary"] = path_summary(state)

    monkeypatch.setattr(swap_demo, "play", console_then_operator)
    saved = dict(os.environ)
    try:
        rec, state = asyncio.run(run_path_demo(tmp_path / "out", "beside", work=tmp_path / "w",
                                               quiet=True))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    switch = state.swap.steps["switch_traffic"]
    assert switch.observed and switch.who is None and OUTSIDE in switch.detail, switch
    assert "still running" in switch.detail, switch.detail
    assert not any("add_worker" in c or "remove_worker" in c for c in seen["audit"])  # the operator's, by hand
    moves = state.data("router").moves
    removed = [m.at_s for m in moves if m.verb == "removed"]
    assert removed and switch.ended_at_s == removed[-1], (switch, moves)
    d = state.swap.downtime
    assert d is not None and d.started_at_s == d.ended_at_s == switch.ended_at_s and OUTSIDE in d.start_source, d
    old = seen["service"].old
    assert old is not None and old.active_state == "active", old  # kept warm: never stopped
    assert seen["summary"] == ("beside", 0.0, True)
    render_all(rec, tmp_path / "out", "report")
    r = json.loads((tmp_path / "out" / "report.json").read_text())
    assert r["swap_path"] == "beside" and r["downtime_s"] == 0.0 and r["timing"]["downtime_s"] == 0.0, r["timing"]
    line = headline(r)[1]
    assert line.startswith("downtime 0s: none, the router moved all traffic") and "kept running" in line, line
    assert OUTSIDE in line
    rs = {s["key"]: s for s in r["steps"]}
    assert rs["switch_traffic"]["state"] == "done" and "still running" in rs["switch_traffic"]["detail"]
