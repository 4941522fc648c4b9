"""Under load the demo's operator started the old model's benchmark (the report's "before") at t≈16 s,
once the service and GPU readings were in, while the simulated server was still booting: every
request answered HTTP 503 "server is starting" and the report had no before. The operator waits for
the server to read ready first."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from console.ui.panes.swap import drive_plan_as_operator


class _State:
    def __init__(self) -> None:
        self.readings: dict[str, Any] = {"service": object(), "gpu": object(),
                                         "server": SimpleNamespace(status="starting")}
        self.server_asked = 0  # how often the operator read the server's status

    def data(self, source: str) -> Any:
        self.server_asked += source == "server"
        return self.readings.get(source)


async def _until_the_server_was_read(state: _State, times: int) -> None:
    while state.server_asked < times:
        await asyncio.sleep(0.05)


async def test_the_before_run_waits_for_the_old_server_to_read_ready() -> None:
    state = _State()
    started: list[str] = []

    def start_bench(kind: str, plan: list[Any]) -> None:
        started.append(state.readings["server"].status)
        return None

    runner = SimpleNamespace(swap=SimpleNamespace(bench_plan=None), start_bench=start_bench, bench=None)
    app = SimpleNamespace(state=state, runner=runner)
    driving = asyncio.create_task(drive_plan_as_operator(app, timeout_s=30, plan=()))
    await asyncio.wait_for(_until_the_server_was_read(state, 3), 10)
    assert started == []  # still booting: no benchmark against a server that answers 503
    state.readings["server"] = SimpleNamespace(status="ready")
    assert await asyncio.wait_for(driving, 10) == "the swap is done"
    assert started == ["ready"]


async def test_a_server_that_never_reads_ready_is_said() -> None:
    state = _State()
    runner = SimpleNamespace(swap=SimpleNamespace(bench_plan=None), start_bench=lambda *a: None, bench=None)
    said = await drive_plan_as_operator(SimpleNamespace(state=state, runner=runner), timeout_s=1.0, plan=())
    assert said == "the old server never read ready"
