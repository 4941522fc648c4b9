"""The fast paths' replies from the host, parsed pure: curl's answer with its HTTP code on the last
line (`curl -w '\\n%{http_code}'`), the JSON of /update_weights_from_disk and of the router.

Host text, cleaned once here with the project's cleaner (console/sanitize.py): no control
character, escape sequence or bidi override survives into a step's detail, an error or the
recorded outcome (issue 34, item 15: U+202E in a router's refusal drew the line backwards). A
reply whose last line is not an ASCII number has no code (`²` is a digit to `str.isdigit` and
raised ValueError in `int`: issue 34, item 14).
"""

from __future__ import annotations

import json
import re
from typing import Any

from console.sanitize import clean_json, clean_line

_SPACES = re.compile(r"\s+")
_CODE = re.compile(r"[0-9]{1,3}")
MAX_REPLY_CHARS = 1_000_000  # a reply's JSON beyond this is not decoded (a router's list, bounded)


def clean_reply(text: object, limit: int = 240) -> str:
    """A host's answer as one printable line: cleaned, runs of spaces as one, at most `limit`."""
    return _SPACES.sub(" ", clean_line(str(text)))[:limit].strip()


def split_reply(text: str) -> tuple[int | None, str]:
    """(HTTP code, body) from curl's output with `-w '\\n%{http_code}'`; (None, text) when the last
    line is not a code (curl failed before any answer)."""
    head, _, code = text.rstrip("\n").rpartition("\n")
    code = code.strip()
    return (int(code), head) if _CODE.fullmatch(code) else (None, text)


def reply_json(body: str) -> dict[str, Any]:
    """A reply's JSON object, every string in it (keys too) cleaned; {} for anything else (not JSON,
    not an object, too long)."""
    if len(body) > MAX_REPLY_CHARS or not body.strip().startswith("{"):
        return {}
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    return clean_json(value) if isinstance(value, dict) else {}


__all__ = ["MAX_REPLY_CHARS", "clean_reply", "reply_json", "split_reply"]
