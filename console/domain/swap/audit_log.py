"""The console's audit log read back (`audit_path()`, one JSON line per command the console ran on a
host: who, when, which step, the command, its exit status and reply): a console started on a host
whose swap another console was running when it ended (killed outright, the machine lost) learns
from it which of the host's changes were that console's commands, and by whom
(console/core/derive/swap_observer.py credits them; the report names the author and the commands).

The file is this user's own local data, written by the console (0600): it is read only when this
user owns it and nobody else may write it, every string is cleaned and redacted again, and nothing
read from it ever reaches a shell (the commands are shown, never run)."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

from console.core.derive.swap_observer import READ_BACK
from console.core.derive.swap_view import STEP_TITLES
from console.core.events import AuditEntry
from console.redact import redact_text
from console.sanitize import clean_block, clean_line

READ_BACK_S = 30 * 60.0  # the last swap's commands, when its last one is this recent: in progress or just done
GAP_S = 30 * 60.0  # a pause this long between two commands of a host: an earlier swap's, not read back
MAX_BYTES = 4 << 20  # the tail of the file read (the log only grows)
WHO_CHARS, COMMAND_CHARS, OUTPUT_CHARS = 64, 8000, 600


def _entry(row: object, host: str) -> AuditEntry | None:
    """One line of the file as an entry of `host`, cleaned; None when it is another host's or odd."""
    if not isinstance(row, dict) or row.get("host") != host:
        return None
    who, action, command = row.get("who"), row.get("action"), row.get("command")
    at, status, took, output = row.get("at_s"), row.get("exit_status"), row.get("duration_s"), row.get("output_tail")
    if not isinstance(who, str) or not isinstance(action, str) or action not in STEP_TITLES \
            or not isinstance(command, str) or isinstance(at, bool) or not isinstance(at, (int, float)) \
            or not math.isfinite(at):
        return None
    who = clean_line(who).strip()[:WHO_CHARS]
    if not who:
        return None
    if isinstance(status, bool) or not isinstance(status, int):
        status = None
    if isinstance(took, bool) or not isinstance(took, (int, float)) or not math.isfinite(took) or took < 0:
        took = None
    output = output if isinstance(output, str) else ""
    return AuditEntry(who, float(at), action, redact_text(clean_block(command))[:COMMAND_CHARS], status,
                      redact_text(clean_block(output))[-OUTPUT_CHARS:], took, READ_BACK)


def read_rows(path: Path | None) -> tuple[list[object], str | None]:
    """The audit log's last MAX_BYTES as its JSON rows (lines that do not parse skipped), or why the
    file was not read (not there: no rows, no reason; another user's, or writable by others)."""
    if path is None:
        return [], None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return [], None
    except OSError as exc:
        return [], f"the audit log {path} was not read back: {exc.strerror or exc}"
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            return [], (f"the audit log {path} was not read back: it is not this user's own file, or others may "
                        "write it")
        if st.st_size > MAX_BYTES:
            fh.seek(st.st_size - MAX_BYTES)
            fh.readline()  # a line cut by the seek
        data = fh.read()
    rows: list[object] = []
    for line in data.splitlines():
        try:
            rows.append(json.loads(line))
        except (ValueError, RecursionError):
            continue
    return rows, None


def last_run(times: list[float], now_s: float) -> int | None:
    """Where the last run of commands begins among `times` (the file's order): the rows since the
    last pause of GAP_S, when the last is at most READ_BACK_S old; None when there is none that recent."""
    if not times or not now_s - READ_BACK_S <= times[-1] <= now_s + 60:
        return None
    first = len(times) - 1
    while first > 0 and times[first] - times[first - 1] < GAP_S:
        first -= 1
    return first


def read_back(path: Path | None, host: str, now_s: float) -> tuple[list[AuditEntry], str | None]:
    """The commands of `host`'s last swap in the audit log at `path` when its last command is at most
    READ_BACK_S old (the entries since the last pause of GAP_S), in the file's order; with why the
    file was not read, if it was not (another user's, or writable by others)."""
    rows, why = read_rows(path)
    if why is not None:
        return [], why
    entries = [e for e in (_entry(row, host) for row in rows) if e is not None]
    first = last_run([e.at_s for e in entries], now_s)
    return ([], None) if first is None else (entries[first:], None)


__all__ = ["READ_BACK_S", "last_run", "read_back", "read_rows"]
