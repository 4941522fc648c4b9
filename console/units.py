"""Numbers as the operator reads them. Pure functions, shared by panes and CLI output."""

from __future__ import annotations

DASH = "–"


def counted(n: int, word: str) -> str:
    """A count as the operator says it: 1 file, 40 files (never "1 file(s)")."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def gb(n: float | None, digits: int = 1) -> str:
    """Decimal gigabytes, as disks and the Hub count them."""
    if n is None:
        return DASH
    if abs(n) >= 1e12:
        return f"{n / 1e12:.{2}f} TB"
    if abs(n) >= 1e9:
        return f"{n / 1e9:.{digits}f} GB"
    if abs(n) >= 1e6:
        return f"{n / 1e6:.{digits}f} MB"
    if abs(n) >= 1e3:
        return f"{n / 1e3:.0f} kB"
    return f"{n:.0f} B"


def gib_from_mib(mib: float | None, digits: int = 1) -> str:
    return DASH if mib is None else f"{mib / 1024:.{digits}f}"


def rate(bytes_per_s: float | None) -> str:
    return DASH if bytes_per_s is None else gb(bytes_per_s) + "/s"


def duration(seconds: float | None) -> str:
    """`42s`, `3m05s`, `2h14m`, `3d4h`."""
    if seconds is None:
        return DASH
    s = int(max(0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600}h"


def seconds(value: float) -> str:
    """A timeout or a wait as people write it: `10s`, `2.5s`, `0.25s`, `1m30s`; never `9.9999s`
    (a deadline's remainder) or `1e+01s`."""
    if value >= 60:
        return duration(round(value))
    if value >= 10:
        return f"{round(value)}s"
    text = f"{value:.1f}" if value >= 1 else f"{value:.2g}"
    text = text.rstrip("0").rstrip(".") if "." in text else text
    return f"{text}s"


def bar(fraction: float | None, width: int) -> str:
    """A solid bar with eighth-block precision; empty cells are a light shade."""
    if fraction is None or width <= 0:
        return "·" * max(width, 0)
    f = min(1.0, max(0.0, fraction))
    eighths = round(f * width * 8)
    full, part = divmod(eighths, 8)
    partial = " ▏▎▍▌▋▊▉"[part] if part else ""
    body = "█" * full + partial
    return body + "░" * (width - len(body))


SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float], width: int, top: float | None = None) -> str:
    """The last `width` values as block characters scaled to `top` (or their max)."""
    vals = values[-width:]
    if not vals:
        return ""
    peak = top if top else max(vals) or 1.0
    return "".join(SPARK[min(7, max(0, round(v / peak * 7)))] for v in vals)


def fit_name(name: str, width: int) -> str:
    """A name in `width` cells: whole when it fits, else its start and end around an ellipsis
    (`Qwen/Qwen3.5-1…-A10B`): both ends of a repo id or process name say something."""
    if len(name) <= width:
        return name
    if width <= 1:
        return "…"[:width]
    head = (width - 1) // 2
    tail = width - 1 - head
    return name[:head] + "…" + (name[-tail:] if tail else "")


def tail_from_word(text: str, width: int) -> str:
    """The end of `text` in `width` cells, starting at a sentence's start when one is in the
    first half of the room, else at a word's, behind an ellipsis: "…This usually means the child
    failed", never "…ly means the child fai…"."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    window = text[-(width - 1):]
    sentence = next((i for i in range(2, len(window) // 2)
                     if window[i - 1] == " " and window[i - 2] in ".!?:;" and window[i].isalnum()), None)
    space = window.find(" ")
    cut = sentence if sentence is not None else space + 1 if 0 <= space < len(window) - 1 else 0
    return "…" + window[cut:]
