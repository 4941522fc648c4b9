"""Pure parsers: text in, frozen dataclasses out, `ParseError` with the line number on bad input.

Nothing here imports Textual, asyncssh or does I/O.
"""

from __future__ import annotations


class ParseError(ValueError):
    """Input that a parser cannot make sense of; the message names the line."""

    def __init__(self, message: str, *, line_no: int | None = None) -> None:
        super().__init__(f"line {line_no}: {message}" if line_no is not None else message)
        self.line_no = line_no


def split_sections(text: str, marker: str = "@@") -> dict[str, str]:
    """Split the output of a script that printed `@@name` before each part."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(marker) and " " not in line:
            current = sections.setdefault(line[len(marker):], [])
            continue
        if current is not None:
            current.append(line)
    return {k: "\n".join(v) for k, v in sections.items()}
