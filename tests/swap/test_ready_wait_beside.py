"""One wait for a server started beside the old one, for units and containers alike
(console/domain/swap/ready_wait.py, once two copies in fastpath.py and container_fastpath.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from console.domain.swap.controller import StepFailed
from console.domain.swap.ready_wait import wait_beside_ready
from console.host.transport.errors import CommandTimeout


def _ctl(answers: list[Any], *, timeout_s: float = 600.0) -> Any:
    asked: list[str] = []

    async def run(script: str, *, timeout: float) -> Any:
        asked.append(script)
        answer = answers.pop(0) if answers else "503"
        if isinstance(answer, Exception):
            raise answer
        return SimpleNamespace(text=answer)

    async def death_cause(why: str) -> str:
        return f"{why}: exit 1"

    return SimpleNamespace(poll_s=0.0, profile=SimpleNamespace(ready_timeout_s=timeout_s), asked=asked,
                           session=SimpleNamespace(transport=SimpleNamespace(run=run)), death_cause=death_cause)


async def _alive() -> str | None:
    return None


async def test_it_returns_at_the_first_200_and_reports_each_unanswered_probe() -> None:
    ctl = _ctl(["503", CommandTimeout("slow"), "000", "200"])
    ticks: list[int] = []
    await wait_beside_ready(ctl, 30001, stops="the new unit", died=_alive, on_tick=lambda: ticks.append(1))
    assert len(ctl.asked) == 4 and "http://127.0.0.1:30001/health" in ctl.asked[0]
    assert len(ticks) == 3  # the probe that answered 200 is no "still booting"


async def test_a_new_server_that_died_fails_the_step_with_its_cause_and_the_rollback() -> None:
    async def died() -> str | None:
        return "sglang-new exited"

    with pytest.raises(StepFailed, match=r"sglang-new exited: exit 1 — the old server keeps serving \(downtime 0\);"
                                         r".*rollback \(stop the new container\) is offered"):
        await wait_beside_ready(_ctl(["200"]), 30001, stops="the new container", died=died)


async def test_the_ready_timeout_fails_the_step() -> None:
    with pytest.raises(StepFailed, match="not ready within the ready timeout on port 30001"):
        await wait_beside_ready(_ctl([], timeout_s=0.0), 30001, stops="the new unit", died=_alive)
