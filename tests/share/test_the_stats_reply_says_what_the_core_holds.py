"""The `stats` request: anyone attached (an observer too) asks the core what it holds, read-only:
the events it applied (each one also sent to every client, in order with the reply), the log lines
it was given and holds, the state's sizes, the recording's events and bytes (benchmarks/soak.py)."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from pathlib import Path

from console.core.recording import Recorder
from console.core.state import LOG_LINES, HostState, LogAppended
from console.host.parsers.sglang_log import LogEvent
from console.share import protocol as p
from console.share.server import ShareServer
from tests.kit.hosts import wait_for
from tests.kit.share import attached


def lines(n: int, start: int = 0) -> LogAppended:
    return LogAppended("h", tuple(LogEvent("line", f"line {start + i}") for i in range(n)))


async def test_an_observer_asks_the_core_what_it_holds_and_the_counts_agree(tmp_path: Path) -> None:
    state = HostState("h")
    recorder = Recorder(state, tmp_path / "recordings", flush_every_s=0).start()
    short = Path(tempfile.mkdtemp(prefix="gc-"))  # AF_UNIX paths are short
    server = await ShareServer(state, None, recorder=recorder).start(unix_path=short / "core.sock")
    ana, ta = await attached(short / "core.sock", "ana")
    ben, tb = await attached(short / "core.sock", "ben")
    try:
        assert ben.role == p.ROLE_OBSERVER
        state.apply(lines(LOG_LINES - 10))
        first = await ben.request(p.Stats)
        assert first.error is None and first.said is not None
        before = json.loads(first.said)
        received = ben.events  # every event the core applied up to the reply has reached ben
        state.apply(lines(30, start=LOG_LINES))  # the state holds LOG_LINES at most: 20 go
        state.apply(lines(5, start=LOG_LINES + 30))
        second = json.loads((await ben.request(p.Stats)).said or "{}")
        # nothing lost: the core's count moved by what ben received between the two replies
        assert second["events"] - before["events"] == ben.events - received == 2
        assert second["log_lines_total"] == LOG_LINES + 25
        assert second["sizes"]["log_lines"] == LOG_LINES == len(state.log_lines)
        assert second["clients"] == 2 and second["dropped"] == 0
        assert second["subscriber_errors"] == second["derive_errors"] == 0
        # the recorder saw every event the state applied (it subscribed before the first)
        assert second["recording"]["events"] == second["events"] == state.version
        await wait_for(lambda: recorder.path is not None and recorder.path.stat().st_size > 0, 5)
        assert second["recording"]["files"] == 1 and second["recording"]["bytes"] > 0
        assert second["recording"]["error"] is None
        # read-only: asking changed nothing but the count of bytes sent
        third = json.loads((await ana.request(p.Stats)).said or "{}")
        assert third["events"] == second["events"] and third["log_lines_total"] == second["log_lines_total"]
    finally:
        await ana.close()
        await ben.close()
        await asyncio.gather(ta, tb)
        await server.close()
        recorder.close()
        shutil.rmtree(short, ignore_errors=True)


def test_the_stats_request_is_anyones_and_carries_nothing_else() -> None:
    assert "stats" not in p.DRIVER_ONLY
    assert p.decode_client(b'{"t":"stats","id":3}') == p.Stats(3)
    assert p.bad_request_id(b'{"t":"stats","id":3,"what":"x"}') == 3


def test_the_states_sizes_name_each_collection_it_holds() -> None:
    state = HostState("h")
    state.apply(lines(7))
    sizes = state.sizes()
    assert sizes["log_lines"] == 7
    assert {"readings", "notices", "bench.results", "bench.history", "swap.audit"} <= set(sizes)
    assert all(isinstance(v, int) and v >= 0 for v in sizes.values())
