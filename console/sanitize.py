"""Host strings made safe to show: no terminal control at all, applied once where they are read.

A log line, a GPU process name, a unit file, /server_info, a Prometheus label or a file name on
the host is written by whoever can write to the host (any user who starts a CUDA process names
it). Sent to the operator's terminal raw, `ESC ] 0 ; … BEL` sets the window title and
`ESC ] 52 ; c ; … BEL` writes the clipboard (issue 21, item 1). So every host string loses, at the
source and before redaction and parsing:

    ESC [ … final            CSI (colours, cursor moves, `ESC [ 2 J`)
    ESC ] … BEL | ESC \\     OSC (title, clipboard, hyperlinks); unterminated: to the end
    ESC P/X/^/_ … ESC \\     DCS, SOS, PM, APC; unterminated: to the end
    ESC <one char>           the two-byte escapes (`ESC c` resets the terminal)
    0x9b / 0x9d / 0x90 …     the same sequences in their 8-bit C1 forms
    other C0 and C1, DEL     one by one (a tab becomes a space in one-line text)
    bidi overrides           U+202A-202E, U+2066-2069 (text that reads backwards)

What remains is printable text; the cheap check comes first, so ordinary lines cost one search.
Markup escaping is a separate matter, for where a string reaches Rich (rich.markup.escape).
"""

from __future__ import annotations

import re
from typing import Any

# String-type sequences (OSC, DCS, SOS, PM, APC) run to ST (ESC \ or 0x9c) or, for OSC, BEL; a
# sequence never terminated swallows the rest of the string (what a terminal would do).
_STRING_SEQ = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c|(?=\x1b)|$)"
_CSI = r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
_ESC2 = r"\x1b[\x20-\x2f]*[\x30-\x7e]?"
_SEQUENCE = re.compile(f"{_STRING_SEQ}|{_CSI}|{_ESC2}")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_BLOCK = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # keeps \t, \n


def _one_line(m: re.Match[str]) -> str:
    return " " if m.group() in "\n\r" else ""


def clean_line(text: str) -> str:
    """One line of host text with every escape sequence and control character removed (a tab or
    a line break is kept as a space: it is layout, not control)."""
    if not text or _CONTROL.search(text) is None:
        return text.replace("\t", " ") if "\t" in text else text
    text = _SEQUENCE.sub("", text)
    return _CONTROL.sub(_one_line, text).replace("\t", " ")


def clean_block(text: str) -> str:
    """Several lines (a unit file, a command's output): as `clean_line`, newlines and tabs kept
    (`\\r\\n` becomes `\\n`)."""
    if not text or _CONTROL_BLOCK.search(text) is None:
        return text
    text = _SEQUENCE.sub("", text.replace("\r\n", "\n"))
    return _CONTROL_BLOCK.sub("", text)


def clean_json(value: Any, _depth: int = 0, *, block: bool = False) -> Any:
    """A decoded JSON document (/server_info, a recorded event) with every string, keys too,
    cleaned as a line (`block`: newlines and tabs kept, as in a recorded unit file). Depth is
    bounded like the redaction's (deeper than 64 levels is dropped)."""
    if _depth > 64:
        return None
    if isinstance(value, str):
        return clean_block(value) if block else clean_line(value)
    if isinstance(value, dict):
        return {(clean_block(k) if block else clean_line(k)) if isinstance(k, str) else k:
                clean_json(v, _depth + 1, block=block) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json(v, _depth + 1, block=block) for v in value]
    return value


# A JSON text that may hold a control character: an escaped one (`\u001b`, `\r`, `\b`, `\f`),
# a raw C1 in UTF-8 or a bidi override. False positives (`\\r`) only cost the slower path.
_JSON_MAYBE = re.compile(rb"\\u00[01][0-9a-fA-F]|\\u007[fF]|\\u00[89][0-9a-fA-F]|\\[bfr]|\xc2[\x80-\x9f]"
                         rb"|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]|\x1b")


def json_may_hold_control(data: bytes) -> bool:
    """The cheap check before `clean_json` on a recorded line: most lines hold no control."""
    return _JSON_MAYBE.search(data) is not None


def has_control(text: str) -> bool:
    """Whether `text` holds anything `clean_block` would remove (for tests and the fault suite)."""
    return _CONTROL_BLOCK.search(text) is not None


__all__ = ["clean_line", "clean_block", "clean_json", "has_control"]
