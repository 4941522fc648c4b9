"""A recording writes the whole state every three minutes (a snapshot: each part replays alone, a seek
starts from one). With the log's lines held, the snapshot is megabytes of JSON (1.2 MB for 4,000
lines); it was built as a tree of dicts of the whole state, encoded, then copied into the recording's
line: a peak of 2.6x its size in the core, every three minutes (the soak watches the core's RSS,
issue 36 item 6). The codec now writes it straight into the line (`codec.encode_event_into`): 1.6x,
the line and its buffer's growth, and the line replays as the same state."""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path

from console.core import codec
from console.core.events import LogAppended, StateSnapshot
from console.core.recording import Recorder
from console.core.state import HostState
from tests.kit import log_cost

PEAK_PER_BYTE = 2.0  # the line, and its buffer's growth (msgspec grows it ahead of what it writes)


def _full_state() -> HostState:
    state = HostState("h")
    events = log_cost.by_thread(log_cost.journal_entries())
    for i in range(0, len(events), log_cost.CHUNK):
        state.apply(LogAppended("h", tuple(events[i:i + log_cost.CHUNK])))
    return state


def test_a_snapshot_is_encoded_once_straight_into_the_recordings_line(tmp_path: Path) -> None:
    state = _full_state()
    recorder = Recorder(state, tmp_path, snapshot_every_s=3600).start()
    try:
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            recorder.write_snapshot()
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
    finally:
        recorder.close()
    assert recorder.path is not None
    with gzip.open(recorder.path, "rb") as f:
        lines = f.read().splitlines()
    snapshot_line = lines[-1]
    assert peak <= PEAK_PER_BYTE * len(snapshot_line), \
        f"writing a snapshot of {len(snapshot_line):,} B peaked at {peak:,} B ({peak / len(snapshot_line):.1f}x)"
    entry = json.loads(snapshot_line)
    replayed = codec.decode_event(json.dumps(entry["e"]).encode())
    assert isinstance(replayed, StateSnapshot)
    assert replayed.log_lines == tuple(state.log_lines) and replayed.log_lines_total == state.log_lines_total


def test_an_event_encoded_into_a_line_is_the_event_encoded_alone() -> None:
    event = LogAppended("h", tuple(log_cost.by_thread(log_cost.journal_entries(3))))
    line = bytearray(b"prefix:")
    codec.encode_event_into(event, line)
    assert bytes(line) == b"prefix:" + codec.encode_event(event)
    assert codec.decode_event(codec.encode_event(event)) == event
    empty = codec.decode_event(codec.encode_event(LogAppended("h", ())))
    assert empty == LogAppended("h", ())
