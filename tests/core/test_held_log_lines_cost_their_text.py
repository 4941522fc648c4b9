"""The state holds thousands of log lines, in the core and in every attached console (the soak, issue
36 item 6): a held line costs its text and the event around it, not a copy of its tail, an empty
dict of its own, its own copy of a stamp it shares with the lines of its second, or (decoded in an
attached console) new strings for its kind and severity. Measured with tracemalloc: before, a line
of 204 B of text cost 687 B in the core and 795 B in an attached console; now 341 B in both."""

from __future__ import annotations

import pytest

from console.core import codec
from console.core.events import LogAppended
from console.host.parsers.sglang_log import NO_FIELDS, LogEvent, batch_fields
from tests.kit import log_cost

# The event (a slotted object of nine fields), the host's time of the line (a float) and the
# state's deque slot: 136 B on CPython 3.11. The copies this test is about cost 300 B and more.
BEYOND_TEXT_B = 170


@pytest.mark.parametrize("path", ["core, parser thread", "core, parser process", "attached console"])
def test_a_held_log_line_costs_its_text_and_the_event_around_it(path: str) -> None:
    held, text = log_cost.held_bytes_per_line(log_cost.paths()[path])
    assert held - text <= BEYOND_TEXT_B, f"{path}: {held:.0f} B a line held, {text:.0f} B of it the text"


def test_a_batch_lines_statistics_are_read_from_its_text_as_from_an_older_recordings_body() -> None:
    sent = log_cost.by_thread(log_cost.journal_entries(20))
    decode, prefill = sent[0], sent[9]
    assert (decode.kind, prefill.kind) == ("decode", "prefill")
    assert batch_fields(decode) == {"#running-req": 1, "#token": 1000, "token usage": 0.1, "cuda graph": True,
                                    "gen throughput (token/s)": 200.0, "#queue-req": 0}
    assert batch_fields(prefill)["#new-token"] == 109
    received = codec.decode_event(codec.encode_event(LogAppended("h", (decode,))))
    assert isinstance(received, LogAppended) and batch_fields(received.events[0]) == batch_fields(decode)
    # a recording made before the list was left in the text carries it as `body`
    old = LogEvent("decode", "[10:00:00] Decode batch. (as recorded)", "10:00:00", body="#running-req: 7, #token: 3")
    assert batch_fields(old) == {"#running-req": 7, "#token": 3}


def test_the_shared_empty_fields_cannot_be_written_through_one_line() -> None:
    line = LogEvent("line", "hello")
    assert line.fields is NO_FIELDS and LogEvent("line", "other", fields={}).fields is NO_FIELDS
    with pytest.raises(TypeError):
        line.fields["kind"] = "error"
    assert LogEvent("line", "third").fields == {}
