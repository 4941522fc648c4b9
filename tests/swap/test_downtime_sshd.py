"""Issue 24 item 5: each path end to end against OpenSSH's sshd on loopback, the simulated host's
fake tools (systemctl, nvidia-smi, journalctl, hf, fincore/free/dd) first on the sessions' PATH:
in place, beside, restart, each driven by the SwapController as the demo drives it. The SSH
connection, its port forwards (the server source, the benchmark, the router) and the processes
are real; the speed factor keeps each test to seconds of simulated boots."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from console.demo.swap_demo import render_all, run_path_demo

pytestmark = pytest.mark.sshd
SPEED = 32.0


@pytest.fixture
def sshd_connect(tmp_path: Path) -> Any:
    """`connect` for run_path_demo: OpenSSH's sshd whose sessions see the simulated host's tools."""
    from console.demo.sshd import SshdError, find_sshd, start_sshd

    if find_sshd() is None or os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("sshd tests must run in CI (as root, with openssh-server)")
        pytest.skip("needs OpenSSH's sshd, as root")
    started: list[Any] = []

    def connect(sim: Any) -> dict[str, object]:
        env = " ".join(f"{k}={v}" for k, v in sim.env().items()
                       if k in ("PATH", "GPUSIM_ROOT", "PYTHONPATH", "HOME", "PYTHONDONTWRITEBYTECODE"))
        try:
            sshd = start_sshd(tmp_path / "sshd", extra_config=f"SetEnv {env}\n")
        except SshdError as exc:
            pytest.fail(str(exc))
        started.append(sshd)
        return {"port": sshd.port, "user": sshd.user, "identity": str(sshd.client_key),
                "known_hosts": str(sshd.known_hosts)}

    yield connect
    for sshd in started:
        sshd.stop()


def _states(state: Any) -> dict[str, str]:
    return {k: s.state for k, s in state.swap.steps.items()}


async def test_in_place_through_sshd(tmp_path: Path, sshd_connect: Any) -> None:
    rec, state = await run_path_demo(tmp_path / "out", "in-place", speed=SPEED, work=tmp_path / "w", quiet=True,
                                     connect=sshd_connect, steps=("download", "install", "preflight", "in_place"))
    steps = _states(state)
    assert steps["in_place"] == "done", state.swap.steps["in_place"].detail
    # in place: no stop (skipped with the reason, never pending); the preflight planned the path
    assert steps["stop_old"] == "skipped" and "paths" not in steps
    assert any(a.action == "in_place" and "/update_weights_from_disk" in a.command and a.exit_status == 0
               for a in state.swap.audit)
    assert state.data("server").status == "ready"
    assert "weights updated in place" in state.swap.steps["in_place"].detail
    assert state.swap.downtime is not None and state.swap.downtime.ended_at_s is not None


async def test_beside_through_sshd(tmp_path: Path, sshd_connect: Any) -> None:
    rec, state = await run_path_demo(tmp_path / "out", "beside", speed=SPEED, work=tmp_path / "w", quiet=True,
                                     connect=sshd_connect)
    steps = _states(state)
    assert [steps.get(k) for k in ("beside", "benchmark", "switch_traffic")] == ["done"] * 3, {
        k: (s.state, s.detail) for k, s in state.swap.steps.items()}
    plan = state.swap.paths["plan"].data()["plan"]
    port = next(o for o in plan["options"] if o["path"] == "beside")["port"]
    # The port was checked free before the start, through the host's shell.
    audit = [a for a in state.swap.audit if a.action == "beside"]
    assert "/proc/net/tcp" in audit[0].command and "listeners_exit=0" in audit[0].output_tail
    # The console's server source polls the new port now; the old server is gone.
    server = state.data("server")
    assert server.port == port and server.moved_from_port == port - 1 and server.status == "ready"
    assert {g.index for g in state.data("gpu").gpus if g.processes} == {4, 5, 6, 7}
    # The new server's benchmark ran with the before-benchmark's workload: comparable.
    from console.domain.analysis.bench_view import before_after, is_result

    results = [r for r in state.bench.history if is_result(r)]
    assert len(results) >= 2
    pair, why = before_after(results)
    assert pair is not None, why
    written = render_all(rec, tmp_path / "out", "swap-report-beside")
    md = next(p for p in written if p.suffix == ".md").read_text()
    assert f"the server now answers on port {port}" in md
    report = json.loads(next(p for p in written if p.suffix == ".json").read_text())
    assert report["downtime_paths"]["endpoint"] == {"from_port": port - 1, "to_port": port,
                                                    "unit": state.swap.setup.new_unit}


async def test_restart_through_sshd(tmp_path: Path, sshd_connect: Any) -> None:
    rec, state = await run_path_demo(tmp_path / "out", "restart", speed=SPEED, work=tmp_path / "w", quiet=True,
                                     connect=sshd_connect,
                                     steps=("download", "install", "preflight", "stop_old", "start_new"))
    steps = _states(state)
    assert steps["stop_old"] == "done" and steps["start_new"] == "done", state.swap.steps["start_new"].detail
    gate = {c.name: c for c in state.swap.gate}
    assert gate["swap path"].reason.startswith("restart: predicted downtime ")
    assert "from 1 earlier boot on this host" in gate["swap path"].reason
    assert "in-place: not possible" in gate["swap path"].reason and "beside: not possible" in gate["swap path"].reason
    assert state.data("server").status == "ready" and state.swap.downtime.ended_at_s is not None
