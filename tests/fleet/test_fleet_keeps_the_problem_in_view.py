"""The fleet at 80, 120 and 200 columns keeps the Problem column on screen when another cell grows
(the other columns give way), and a server called dead whose GPUs are still held, busy, by its
scheduler processes is warned about (issue 35 item 6)."""

from __future__ import annotations

import time

import pytest

from console.domain.analysis.server_status import HttpFacts, ServerStatus
from console.core.state import ConnectionChanged, HostState, ReadingChanged
from console.domain.fleet.rows import fleet_row
from console.model import GpuDevice, GpuProcess, GpuStatus, Reading
from console.host.transport.base import ConnectionState
from tests.kit.hosts import wait_for
from tests.kit.screens import screen_text

SIZES = [(80, 24), (120, 40), (200, 60)]


def _state(host: str, *, status: str = "ready", reason: str = "serving", port: int | None = None,
           moved: int | None = None, util: int = 75, procs: bool = True) -> HostState:
    now = time.time()
    state = HostState(host, clock=time.time)
    state.apply(ConnectionChanged(host, ConnectionState(host, "connected", now)))
    gpus = tuple(GpuDevice(i, "H200", f"GPU-{host}-{i}", 86_000, 97_887, util + i * 2, 50, 400.0, 700.0,
                           processes=(GpuProcess(52300 + i, f"sglang::scheduler_TP{i}", 85_500),) if procs else ())
                 for i in range(4))
    state.apply(ReadingChanged(host, "gpu", Reading("gpu", GpuStatus("nvml", gpus, sampled_at_s=now), now)))
    server = ServerStatus(status, reason, "sglang-qwen122b.service", "failed" if status == "dead" else "active",
                          None, None, HttpFacts(server_info={"served_model_name": "qwen3.5-122b"}
                                                if status != "dead" else None),
                          port=port, moved_from_port=moved)
    state.apply(ReadingChanged(host, "server", Reading("server", server, now)))
    return state


@pytest.mark.parametrize("size", SIZES)
async def test_a_grown_model_cell_never_pushes_the_problem_column_off_the_screen(size: tuple[int, int]) -> None:
    from console.ui.app import FleetApp

    # Host names are never cut (the sort and Enter read them): at 80 columns a short name leaves room.
    a, b = ("gpu-07", "gpu-03") if size[0] < 100 else ("gpu-h200-node-07.dc1", "gpu-h200-node-03.dc1")
    dead = _state(a, status="dead", reason="oom: CUDA out of memory. Tried to allocate 2.00 GiB")
    moved = _state(b)
    app = FleetApp([dead, moved])
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await wait_for(lambda: "Problem" in screen_text(app), 10)
        # The beside path moves gpu-03's server: its model cell grows.
        server = moved.data("server")
        from dataclasses import replace

        moved.apply(ReadingChanged(b, "server", Reading("server", replace(server, port=59569,
                                                                                moved_from_port=30000), time.time())))
        app.fleet_screen.refresh_rows(full=True)
        await pilot.pause()
        await pilot.pause()
        text = screen_text(app)
        header = next(line for line in text.splitlines() if "Host" in line and "Model" in line)
        assert "Problem" in header, text
        row = next(line for line in text.splitlines() if a in line)
        assert "server dead" in row, text
        assert "qw" in next(line for line in text.splitlines() if b in line), text


def test_a_dead_server_whose_gpus_are_still_held_and_busy_is_warned_about() -> None:
    row = fleet_row(_state("gpu-h200-node-07.dc1", status="dead", reason="oom: CUDA out of memory"))
    assert row.severity == 3
    assert "4 GPUs still held by sglang::scheduler_TP*" in (row.problem or ""), row.problem
    assert "84 GiB each" in (row.problem or "") and "75–81% util" in (row.problem or ""), row.problem
    # Draining (0 % util) or no server process on the GPUs: no such warning, the plain reason.
    for quiet in (_state("h", status="dead", reason="unit inactive", util=0),
                  _state("h", status="dead", reason="unit inactive", procs=False)):
        problem = fleet_row(quiet).problem or ""
        assert "still held" not in problem and problem.startswith("server dead: unit inactive"), problem
