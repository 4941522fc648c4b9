"""Issue 24 item 3, the beside path: the port is checked free on the host before the start (a
quoted, bounded check; a taken port refuses the path, nothing started), the new server is
benchmarked on its own port with the before-benchmark's workload before traffic moves, and after
the switch the console's server source polls the new port.

Unit level (scripted transport); the whole path on the simulator behind OpenSSH's sshd is in
tests/swap/test_downtime_sshd.py."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from console.config import HostProfile
from console.core.derive.swap_view import SwapStep, SwapStepChanged
from console.core.state import HostState
from console.domain.swap import port_free
from console.host.session import HostSession
from console.host.sources.server import ServerWatcher
from tests.kit.downtime import TCP_FREE, TCP_HEADER, Scripted
from tests.kit.downtime import controller as _controller
from tests.kit.downtime import plan as _plan


def test_the_port_check_is_bounded_and_its_verdict_is_clear() -> None:
    cmd = port_free.port_check(30001)
    assert cmd.startswith("timeout -k 5 8 grep -h -i -e local_address -e ':7531 ' -- /proc/net/tcp /proc/net/tcp6")
    assert cmd.endswith('; echo "listeners_exit=$?"')
    assert port_free.port_verdict(30001, TCP_FREE) is None
    taken = TCP_HEADER + "   1: 00000000:7531 00000000:0000 0A 0 0 0\n"
    assert "port 30001 is taken on the host (something listens on 0.0.0.0:30001" in port_free.port_verdict(30001, taken)
    assert "timed out" in port_free.port_verdict(30001, "listeners_exit=124")
    assert "could not be checked" in port_free.port_verdict(30001, "")


def _beside(answers: list[tuple[str, str]]) -> tuple[object, Scripted, HostState]:
    ctl, transport, state = _controller(approval=False)
    transport.answers[:0] = answers
    ctl.fast.plan = _plan("beside")
    return ctl, transport, state


@pytest.mark.parametrize("answer", [TCP_HEADER + "   1: 00000000:7531 00000000:0000 0A 0 0 0\n",
                                    TCP_HEADER + "   1: 0100007F:7531 00000000:0000 0A 0 0 0\n",
                                    TCP_HEADER + "   1: 0100007F:7531 0100007F:0016 01 0 0 0\n", ""])
async def test_a_taken_port_refuses_the_beside_path_and_nothing_starts(answer: str) -> None:
    ctl, transport, state = _beside([("/proc/net/tcp", answer)])
    why, preview = ctl.preview("beside")
    assert preview is not None and preview.lines[1] == port_free.port_check(30001), why  # shown first
    assert ctl.request("beside", "ana") is None
    await ctl.wait_idle(10)
    step = state.swap.steps["beside"]
    assert step.state == "refused" and "port 30001" in step.detail and "nothing was started" in step.detail
    assert not any("systemctl start" in c for c in transport.ran)
    assert any(a.action == "beside" and "/proc/net/tcp" in a.command for a in state.swap.audit)  # audited


async def test_a_free_port_starts_the_beside_server() -> None:
    ctl, transport, state = _beside([("/proc/net/tcp", TCP_FREE)])
    assert ctl.request("beside", "ana") is None
    await ctl.wait_idle(10)
    assert state.swap.steps["beside"].state == "done", state.swap.steps["beside"].detail
    assert transport.ran.index(port_free.port_check(30001)) < next(
        i for i, c in enumerate(transport.ran) if "systemctl start -- new.service" in c)


async def test_the_beside_server_is_benchmarked_on_its_port_with_the_old_runs_workload() -> None:
    ctl, transport, state = _beside([("/proc/net/tcp", TCP_FREE)])
    old_run = {"model": "old", "max_concurrency": 4, "num_prompts": 8, "random_input_len": 256,
               "random_output_len": 128, "completed": 8, "output_throughput": 900.0, "duration": 3.0}
    state.bench.history.append(old_run)
    asked: list[tuple[object, object]] = []

    def start_bench(kind: str, plan: object = None) -> None:
        asked.append((plan, ctl.session.bench_port))
        bench = ctl.runner.bench = SimpleNamespace(running=True)

        def finish() -> None:
            state.bench.history.append({**old_run, "model": "new", "output_throughput": 1000.0})
            bench.running = False

        asyncio.get_running_loop().call_later(0.05, finish)

    ctl.runner.start_bench = start_bench
    ctl.runner.bench = None
    assert ctl._remaining()[-2:] == ["benchmark", "switch_traffic"]  # before the traffic moves
    why, preview = ctl.preview("benchmark")
    assert preview is not None and any("on port 30001, before traffic moves" in ln for ln in preview.lines), why
    assert ctl.request("benchmark", "ana") is None
    await ctl.wait_idle(10)
    assert state.swap.steps["benchmark"].state == "done", state.swap.steps["benchmark"].detail
    assert asked == [([(4, 8, 256, 128)], 30001)]  # the same workload as before, on the new server
    assert ctl.session.bench_port is None
    # After the switch, the benchmark asks the server where the traffic went (the profile's port).
    state.apply(SwapStepChanged("h", SwapStep("switch_traffic", "switch", state="done")))
    assert ctl.fast.bench_port() is None


async def test_the_switch_moves_the_consoles_server_source_to_the_new_port() -> None:
    ctl, transport, state = _beside([])
    moved: list[int] = []
    ctl.session.move_server = moved.append
    assert ctl.request("switch_traffic", "ana") is None
    await ctl.wait_idle(10)
    assert state.swap.steps["switch_traffic"].state == "done", state.swap.steps["switch_traffic"].detail
    assert moved == [30001]
    assert state.swap.paths["endpoint"].data() == {"from_port": 30000, "to_port": 30001, "unit": "new.service"}


def test_the_session_moves_its_profile_bench_and_server_watcher() -> None:
    profile = HostProfile(name="h", host="gpu", unit="new.service", server_port=30000)
    session = HostSession(profile, SimpleNamespace())
    watcher = ServerWatcher(SimpleNamespace(), "new.service", 30000, None)
    session._server = watcher
    session.move_server(30001)
    assert session.profile.server_port == 30001 and watcher.port == 30001 and watcher.moved_from_port == 30000
