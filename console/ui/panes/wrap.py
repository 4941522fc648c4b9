"""Wrapping that keeps a view's shape: a long line breaks at a word boundary and its continuation
rows are indented under the line's own text (past its bullet: "⚠ ", "· ", "- "), never at column 0
(issue 22 item 18). Styles are kept: rows are slices of the Text."""

from __future__ import annotations

from rich.text import Text

BULLETS = ("⚠ ", "· ", "- ", "✗ ", "✓ ", "! ")


def hang_indent(line: str) -> int:
    """Where a continuation row of `line` starts: under its text, past a bullet."""
    stripped = line.lstrip(" ")
    indent = len(line) - len(stripped)
    for bullet in BULLETS:
        if stripped.startswith(bullet):
            return indent + len(bullet)
    return indent + 2


def hang(text: Text, width: int) -> Text:
    """`text` with every line longer than `width` wrapped at words, continuation rows hanging."""
    if width < 16:
        return text
    out: list[Text] = []
    for line in text.split("\n", allow_blank=True):
        plain = line.plain
        if len(plain) <= width:
            out.append(line)
            continue
        indent = min(hang_indent(plain), width // 2)
        start, room, first = 0, width, True
        while len(plain) - start > room:
            cut = plain.rfind(" ", start, start + room + 1)
            if cut <= start + room // 2:
                cut = start + room  # no space in the second half of the row: a hard cut
            row = line[start:cut]
            row.rstrip()
            out.append(row if first else Text(" " * indent) + row)
            start = cut + 1 if cut < len(plain) and plain[cut] == " " else cut
            room, first = width - indent, False
        out.append(line[start:] if first else Text(" " * indent) + line[start:])
    return Text("\n").join(out)
