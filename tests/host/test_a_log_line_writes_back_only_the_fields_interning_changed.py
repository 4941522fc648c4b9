"""A held log line shares its stamp, kind, severity, ranks and phase with every other line
(interned, issue 36: a busy log's lines share their second). Interning wrote all five fields back
into every new line, though the parser's kinds, severities and empty ranks are literals, interned
already, and a frozen field's write is what building a line costs: 0.92 -> 1.56 µs (session 13).
A field is now written back only where interning gave another object; lines still share them."""

from __future__ import annotations

import sys
from typing import Any

from console.host.parsers import sglang_log
from console.host.parsers.sglang_log import LogEvent, parse_line


class FieldWrites:
    """Counts the frozen fields a line's building writes (the module's one writer of them,
    `sglang_log._set`) while lines are built inside `with`."""

    def __init__(self) -> None:
        self.count = 0
        self._real = sglang_log._set

    def _counted(self, obj: Any, name: str, value: Any) -> None:
        self.count += 1
        self._real(obj, name, value)

    def __enter__(self) -> FieldWrites:
        self.count = 0
        sglang_log._set = self._counted
        return self

    def __exit__(self, *exc: object) -> None:
        sglang_log._set = self._real


def test_a_parsed_line_writes_back_only_its_stamp() -> None:
    text = ("[2026-11-30 15:04:05 TP0] Decode batch. #running-req: 8, #token: 62531, token usage: 0.12, "
            "gen throughput (token/s): 401.00, #queue-req: 0")
    first = parse_line(text)
    with FieldWrites() as writes:
        second = parse_line("".join([text[:1], text[1:]]))  # the same second, from another string
    # The stamp and the ranks, new strings cut from the text; before: 4 (kind and severity too,
    # the parser's literals, written back on every line)
    assert writes.count == 2, writes.count
    assert first.ts is second.ts and first.ts == "2026-11-30 15:04:05"
    assert first.kind is second.kind and first.ranks is second.ranks and first.severity is second.severity


def test_fields_already_held_are_not_written_and_new_ones_are_interned() -> None:
    stamp = sys.intern("".join(["2026-11-30 ", "15:04:06"]))
    with FieldWrites() as writes:
        LogEvent("decode", "x", stamp, "", "info", None)
    assert writes.count == 0  # before: 4
    held = sys.intern("".join(["2026-11-30 ", "15:04:07"]))  # a line before held this second
    fresh = "".join(["2026-11-30 ", "15:04:07"])
    assert fresh is not held
    kind, phase = sys.intern("boot"), sys.intern("ready")
    with FieldWrites() as writes:
        line = LogEvent("".join(["bo", "ot"]), "y", fresh, "TP0", "info", "".join(["rea", "dy"]))
    assert writes.count == 3  # the stamp, the kind and the phase: new strings of held ones
    assert line.ts is held and line.kind is sys.intern("boot")
    assert line.phase is phase and line.ranks is sys.intern("TP0") and line.kind is kind
