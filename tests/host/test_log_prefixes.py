"""SGLang's messages recognised wherever they stand in the line (issue 20 item 8): every real line of
`sglang_real_lines.txt` that the parser knows, behind every real prefix shape of
`log_prefix_shapes.txt` (provenance in tests/data/PROVENANCE.md), parses as the bare line does."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.host.parsers.sglang_log import PREFIX, batch_fields, parse_line

DATA = Path(__file__).parent.parent / "data"
REAL = [ln for ln in (DATA / "sglang_real_lines.txt").read_text().splitlines() if ln.strip()]
SHAPES = [ln for ln in (DATA / "log_prefix_shapes.txt").read_text().splitlines() if ln.strip()]
# SGLang's messages (batch and boot lines) as SGLang wrote them, without its own `[time TPn]` prefix.
BODIES = []
for _line in REAL:
    _m = PREFIX.match(_line)
    _body = _line[_m.end():] if _m else _line
    if parse_line(_body).kind in ("decode", "prefill", "boot"):
        BODIES.append(_body)


def test_the_real_lines_hold_batch_and_boot_messages() -> None:
    kinds = {parse_line(b).kind for b in BODIES}
    phases = {parse_line(b).phase for b in BODIES}
    assert {"decode", "prefill", "boot"} <= kinds
    assert {"weights loading", "weights loaded", "cuda graphs", "capacity"} <= phases
    assert len(SHAPES) == 8


@pytest.mark.parametrize("shape", SHAPES)
def test_batch_and_boot_messages_behind_any_prefix_parse_as_the_bare_message(shape: str) -> None:
    for body in BODIES:
        bare, wrapped = parse_line(body), parse_line(shape + body)
        assert (wrapped.kind, wrapped.phase, wrapped.fields) == (bare.kind, bare.phase, bare.fields), (shape, body)
        assert batch_fields(wrapped) == batch_fields(bare)
        assert wrapped.text == shape + body  # the line is shown as the host wrote it


@pytest.mark.parametrize(("shape", "ts", "ranks"), [
    ("INFO 06-21 07:16:53 4183 [scheduler.py:239] ", "06-21 07:16:53", ""),
    ("(WorkerDict pid=559716) [2025-01-23 19:35:15 TP0] ", "2025-01-23 19:35:15", "TP0"),
    ("Oct 11 15:00:00 server python3[12456]: [2025-10-11 15:00:00 TP0] ", "2025-10-11 15:00:00", "TP0"),
    ("2026-04-08T14:05:21.123456789Z stdout F [2026-04-08 14:05:21 TP0] ", "2026-04-08 14:05:21", "TP0"),
    ("sglang-1  | [2025-03-12 08:52:40 DP0 TP0] ", "2025-03-12 08:52:40", "DP0 TP0"),
    # sgl-project/sglang PR #37185 appends the pid to the scheduler's own prefix (its exact form is
    # not in the PR text: both places a config could put it are covered).
    ("[2026-08-31 10:00:00 TP0 pid=4183] ", "2026-08-31 10:00:00", "TP0"),
    ("[2026-08-31 10:00:00 TP0] [pid 4183] ", "2026-08-31 10:00:00", "TP0"),
])
def test_the_messages_own_time_and_ranks_are_found_in_the_prefix(shape: str, ts: str, ranks: str) -> None:
    e = parse_line(shape + "Decode batch. #running-req: 8, #token: 62531, token usage: 0.12, "
                           "gen throughput (token/s): 186.64, #queue-req: 0")
    assert (e.kind, e.ts, e.ranks) == ("decode", ts, ranks)
    assert batch_fields(e)["gen throughput (token/s)"] == 186.64


@pytest.mark.parametrize("line", [
    '[2024-11-08 04:43:59] INFO:     127.0.0.1:41416 - "POST /generate HTTP/1.1" 200 OK Decode batch',
    'User: "Decode batch. #running-req: 1" is what I see in the log',
    "see the docs: Decode batch. #running-req means the running requests",
])
def test_a_line_that_only_quotes_a_message_is_not_taken_for_it(line: str) -> None:
    assert parse_line(line).kind not in ("decode", "prefill", "boot")


_BATCH = ("Decode batch. #running-req: 8, #token: 41, token usage: 0.12, gen throughput (token/s): 186.64, "
          "#queue-req: 0")


@pytest.mark.parametrize("line", [
    f'2026-12-01 15:04:05,123 - ERROR - client: request failed: "code 500: {_BATCH}"',  # a double quote
    f"ERROR 12-01 15:04:05 [client.py:88] request failed: 'code 500: {_BATCH}'",        # a single quote
    f"2026-12-01 15:04:05 ERROR pid 7 got={_BATCH}",                                      # no field end
    f"2026-12-01 15:04:05 ERROR pid 7 {'x' * 250} | {_BATCH}",                            # too long a prefix
])
def test_an_error_line_quoting_a_batch_line_is_an_error_and_not_a_decode_line(line: str) -> None:
    """The operator counts it among the errors (n jumps to it) and the throughput is not read from
    it: the quote guards of the relocation (a quote, a prefix that does not end a field, one longer
    than 240 characters) each keep it the error it is."""
    event = parse_line(line)
    assert (event.kind, event.severity) == ("error", "error"), event


def test_a_prefix_of_240_characters_is_one_and_of_241_is_a_message() -> None:
    at_cap = f"2026-12-01 15:04:05 {'x' * 217} | {_BATCH}"
    assert at_cap.index("Decode") == 240
    event = parse_line(at_cap)
    assert event.kind == "decode" and batch_fields(event)["gen throughput (token/s)"] == 186.64
    assert parse_line(f"2026-12-01 15:04:05 {'x' * 218} | {_BATCH}").kind == "line"
    assert parse_line(f"2026-12-01 15:04:05 INFO pid 7 | {_BATCH}").kind == "decode"
