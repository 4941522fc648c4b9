"""The log's parser process runs at a lower priority than the console (issue 36 item 3): on a
machine whose cores are all taken (a flood, and another process keeping a core busy), the console's
UI thread wins the core when it wakes for a frame or a key; the parse waits, not the screen.
Its niceness counts against the console's only inside one scheduling group: Linux's autogroup
(on by default) weighs each session as a group of its own, so the parser stays in the console's
session. Ctrl-C is the console's: a SIGINT leaves the parser running."""

from __future__ import annotations

import json
import os
import signal

import pytest

from console.host.sources import log as log_source
from console.host.sources.log import LogFollower
from console.host.transport import LocalTransport


async def _parsed_in(follower: LogFollower) -> int:
    raw = [json.dumps({"__CURSOR": f"s=1;i={i}", "MESSAGE": f"line {i}"}).encode()
           for i in range(log_source.PROCESS_MIN_LINES)]
    events = await follower._parse_off_loop(raw)
    assert len(events) == len(raw)
    pid = follower.parsed_in
    assert pid is not None and pid != os.getpid(), "the batch was not parsed in the parser process"
    return pid


async def test_the_parser_process_runs_at_a_lower_priority_than_the_console_in_its_group(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    if ours >= 19:
        pytest.skip("this process already runs at the lowest priority: nothing can run below it")
    monkeypatch.setattr(log_source, "_PROCESS_FAILURES", 0)
    follower = LogFollower(LocalTransport(), units=("sglang.service",))
    pid = await _parsed_in(follower)
    assert os.getpriority(os.PRIO_PROCESS, pid) > ours, "the parser process competes with the console for a core"
    assert os.getsid(pid) == os.getsid(0), "the parser process is a scheduling group (a session) of its own"
    os.kill(pid, signal.SIGINT)  # a Ctrl-C in the console's terminal
    assert await _parsed_in(follower) == pid, "a SIGINT ended the parser process"
