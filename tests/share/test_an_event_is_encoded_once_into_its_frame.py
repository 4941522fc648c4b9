"""The share server sends each event to every client as one frame (`{"t":"event","e":EVENT}`). It
encoded the event, copied the encoding into bytes, then copied it twice more to frame it: for a
client attaching to a core that holds its log, the welcome snapshot is megabytes of JSON: the
framing peaked at 2.4x its size (issue 36). The event is now encoded once, straight into its frame
(`protocol.event_frame`), and the frame reads back as the same event."""

from __future__ import annotations

import tracemalloc

from console.core import codec
from console.core.events import LogAppended, StateSnapshot
from console.core.state import HostState
from console.share import protocol as p
from tests.kit import log_cost

PEAK_PER_BYTE = 2.0  # the frame, and its buffer's growth (msgspec grows it ahead of what it writes)


def _full_state() -> HostState:
    state = HostState("h")
    events = log_cost.by_thread(log_cost.journal_entries())
    for i in range(0, len(events), log_cost.CHUNK):
        state.apply(LogAppended("h", tuple(events[i:i + log_cost.CHUNK])))
    return state


def test_the_welcome_snapshot_is_framed_without_copies_of_its_json() -> None:
    state = _full_state()
    snapshot = state.snapshot()
    assert isinstance(snapshot, StateSnapshot)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        frame = p.event_frame(snapshot)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    # before: 2.4x (the encoding, copied into bytes, then twice more to frame it)
    assert peak <= PEAK_PER_BYTE * len(frame), \
        f"framing a snapshot of {len(frame):,} B peaked at {peak:,} B ({peak / len(frame):.1f}x)"
    assert frame.endswith(b"}\n") and frame.count(b"\n") == 1
    line = p.decode_core(bytes(frame[:-1]))
    assert isinstance(line, p.EventLine)
    replayed = codec.decode_event(bytes(line.e))
    assert isinstance(replayed, StateSnapshot)
    assert replayed.log_lines == tuple(state.log_lines) and replayed.log_lines_total == state.log_lines_total


def test_a_small_event_frames_as_its_encoding_alone() -> None:
    event = LogAppended("h", tuple(log_cost.by_thread(log_cost.journal_entries(3))))
    frame = p.event_frame(event)
    assert bytes(frame) == b'{"t":"event","e":' + codec.encode_event(event) + b"}\n"
    line = p.decode_core(bytes(frame).rstrip(b"\n"))
    assert isinstance(line, p.EventLine) and codec.decode_event(bytes(line.e)) == event
