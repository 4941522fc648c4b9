"""What a log line held by the state costs, beside its text (tracemalloc): the lines a demo's
journal sends (SGLang's decode and prefill lines, 20 a second, journald's JSON), parsed as the
core parses them (the parser thread's decoder, or the parser process's rows built into events),
then sent to an attached console through the codec, each held in a `HostState`. Shared by
tests/core/test_held_log_lines_cost_their_text.py and benchmarks/log_line_cost.py."""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from collections.abc import Callable

from console.core import codec
from console.core.events import LogAppended
from console.core.state import LOG_LINES, HostState
from console.host.parsers.sglang_log import LogEvent
from console.host.sources import log as log_source

LINES = 4000
PER_SECOND = 20  # lines sharing one stamp (a busy server's decode and prefill lines)
CHUNK = 200  # lines per LogAppended (a batch)


def journal_entries(n: int = LINES, start_us: int = 1_764_800_000_000_000) -> list[bytes]:
    """n journald entries (`journalctl -o json`) of SGLang's batch lines, each text its own."""
    out = []
    for i in range(n):
        second = i // PER_SECOND
        stamp = f"2026-12-04 10:{second // 60 % 60:02d}:{second % 60:02d}"
        if i % 10 == 9:
            msg = (f"[{stamp} TP0] Prefill batch. #new-seq: 1, #new-token: {100 + i}, #cached-token: {i % 97}, "
                   f"token usage: 0.{i % 90 + 10}, #running-req: {i % 8}, #queue-req: 0, ")
        else:
            msg = (f"[{stamp} TP0] Decode batch. #running-req: {i % 8 + 1}, #token: {1000 + i}, "
                   f"token usage: 0.{i % 90 + 10}, cuda graph: True, gen throughput (token/s): {200 + i % 500}.{i % 100:02d}, "
                   f"#queue-req: 0, ")
        entry = {"__CURSOR": f"s=1;i={i:x}", "__REALTIME_TIMESTAMP": str(start_us + i * 50_000),
                 "_SYSTEMD_UNIT": "sglang.service", "MESSAGE": msg}
        out.append(json.dumps(entry).encode())
    return out


def by_thread(raws: list[bytes]) -> list[LogEvent]:
    """The parser thread's path (a live log's small batches): `LineDecoder.parse`."""
    decoder = log_source.LineDecoder()
    return [e for raw in raws if (e := decoder.parse(raw)) is not None]


def by_process(raws: list[bytes]) -> list[LogEvent]:
    """The parser process's path (a flood): its rows, built into events in the console."""
    _, _, rows = log_source.parse_in_process(log_source.LineDecoder().state(), b"\n".join(raws))
    return log_source._events_of(rows)


def through_codec(events: list[LogEvent]) -> list[LogEvent]:
    """What an attached console holds: the core's events sent through the codec, decoded."""
    out: list[LogEvent] = []
    for i in range(0, len(events), CHUNK):
        decoded = codec.decode_event(codec.encode_event(LogAppended("h", tuple(events[i:i + CHUNK]))))
        assert isinstance(decoded, LogAppended)
        out += decoded.events
    return out


def held_bytes_per_line(make: Callable[[], list[LogEvent]]) -> tuple[float, float]:
    """(bytes the state holds per line, of which the line's text): the events made and applied to a
    fresh `HostState` under tracemalloc, everything else made before it starts."""
    assert LINES <= LOG_LINES
    state = HostState("h")
    gc.collect()
    tracemalloc.start()
    try:
        events = make()
        for i in range(0, len(events), CHUNK):
            state.apply(LogAppended("h", tuple(events[i:i + CHUNK])))
        del events
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    held_lines = list(state.log_lines)
    assert len(held_lines) == LINES
    text = sum(sys.getsizeof(e.text) for e in held_lines)
    return held / LINES, text / LINES


def paths() -> dict[str, Callable[[], list[LogEvent]]]:
    """Each way a line reaches a state, by name: the raw lines made once, outside the measure."""
    raws = journal_entries()
    sent = by_thread(raws)
    return {"core, parser thread": lambda: by_thread(raws),
            "core, parser process": lambda: by_process(raws),
            "attached console": lambda: through_codec(sent)}
