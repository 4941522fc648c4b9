"""A node of rank >= 1 of a multi-node server serves no API and logs no ready line: after a deployment
swap its observer's downtime clock ran on forever (node 1's state: "the stop command", never ended,
its server "starting"), so its host screen counted a downtime the deployment did not have. Its own
fact of serving again is SGLang's dummy health server, started once its ranks end distributed init:
the observer ends the node's downtime there, and a rank-0 or single host's downtime still waits for
its ready line."""

from __future__ import annotations

import time

from console.core.events import AuditAppended, AuditEntry, LogAppended, SwapSetup
from console.host.parsers.sglang_log import parse_line
from tests.kit.deploy import multinode_args, node_state

DUMMY = "Dummy health check server started in background thread at 127.0.0.1:30000"


def _stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))  # a file's line: the server's local stamp


def _swapped(rank: int) -> object:
    state = node_state(f"node{rank}", args=multinode_args(rank), now=time.time())
    state.observe_host()
    state.apply(SwapSetup(state.host, "old.service", "new.service", None, None))
    stop = time.time()
    state.apply(AuditAppended(state.host, AuditEntry("ana", stop + 0.5, "stop old.service (big)",
                                                     "timeout -k 5 120 systemctl stop -- old.service", 0, "", 0.5,
                                                     "deployment swap")))
    later = stop + 5
    state.apply(LogAppended(state.host, tuple(parse_line(line) for line in (
        f"[{_stamp(later)}] server_args=ServerArgs(model_path='/models/Qwen3.5-397B-A17B', tp_size=16)",
        f"[{_stamp(later)} TP8] Init torch distributed begin.",
        f"[{_stamp(later + 1)} TP8] Init torch distributed ends. elapsed=2.10 s, mem usage=0.45 GB",
        f"[{_stamp(later + 2)} TP8] {DUMMY}"))))
    return state


def test_a_rank_one_nodes_downtime_ends_at_its_dummy_health_server() -> None:
    d = _swapped(1).swap.downtime  # type: ignore[attr-defined]
    assert d is not None and d.started_at_s is not None
    assert d.ended_at_s is not None and d.ended_at_s > d.started_at_s, d
    assert d.end_source == ("new.service, node rank 1: its ranks up (SGLang's dummy health server started; "
                            "rank 0 serves the API)")


def test_rank_zeros_downtime_still_waits_for_its_ready_line() -> None:
    d = _swapped(0).swap.downtime  # type: ignore[attr-defined]
    assert d is not None and d.started_at_s is not None and d.ended_at_s is None, d
