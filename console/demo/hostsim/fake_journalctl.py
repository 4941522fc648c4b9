"""A simulated `journalctl`: `-u UNIT` (repeatable), `-f`, `-n N`, `-o json|short|short-iso|cat`,
`--output-fields=`, `--after-cursor=C`, `-q`, `--no-pager`, `--version`; reads .sim/journal/*.jsonl.

It answers as systemd 252's journalctl does where the console reads it (tests/demo/test_fakes_real.py
compares it with real output recorded in tests/data/journalctl_real.json):

* `-o json` always carries `__CURSOR`, `__REALTIME_TIMESTAMP`, `__MONOTONIC_TIMESTAMP` and `_BOOT_ID`,
  even with `--output-fields=` (journalctl(1)); the cursor has the real shape
  `s=…;i=…;b=…;m=…;t=…;x=…` (hex fields);
* a MESSAGE holding control characters (an escape sequence, a carriage return) is printed as an
  array of bytes, as systemd's logs-show.c does for any field that is not printable UTF-8;
* `short` is the syslog-like `Mon DD HH:MM:SS host ident[pid]: msg` in local time; `short-iso`
  is ISO 8601 with the local offset;
* an unknown cursor of the right shape seeks to its time (`t=`), as sd_journal_seek_cursor does,
  instead of replaying everything; a malformed one fails ("Failed to seek to cursor");
* nothing to show, without `-f` or `-q`: `-- No entries --` on stdout, with `-u` too, in the text
  modes only (never with `-o json`: tests/data/real/journal_no_entries.json);
* without `--all`, `-o json` prints `"MESSAGE":null` for a message over 4,096 bytes
  (tests/data/real/journal_long_line.json);
* `--cursor=C` starts at C (inclusive); `--after-cursor=C` seeks to C and steps twice, as
  journalctl 252 does: when C's entry was vacuumed it skips the first entry that survived
  (tests/data/real/journal_vacuumed_cursor.json);
* PID 1's own lines about a unit (Started, Stopped, "Main process exited, …") carry
  `_SYSTEMD_UNIT=init.scope` and `UNIT=` the unit, and `-u UNIT` shows them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from datetime import datetime
from pathlib import Path

REAL_CURSOR = re.compile(r"^s=([0-9a-f]{32});i=([0-9a-f]+);b=([0-9a-f]{32});m=([0-9a-f]+);t=([0-9a-f]+)"
                         r";x=([0-9a-f]{16})$")


def _entries(root: Path, units: list[str]) -> list[tuple[int, str, dict]]:
    out = []
    for unit in units:
        path = root / ".sim" / "journal" / f"{unit}.jsonl"
        if not path.exists():
            continue
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                out.append((int(e["__REALTIME_TIMESTAMP"]), e["__CURSOR"], e))
    out.sort(key=lambda x: (x[0], x[1]))
    return out


class _Boot:
    """This simulated host's boot: an id and the wall-clock time it booted (for the monotonic
    clock), kept in .sim so that every journalctl run of one host agrees."""

    def __init__(self, root: Path) -> None:
        path = root / ".sim" / "boot"
        try:
            boot_id, booted_us = path.read_text().split()
            self.id, self.booted_us = boot_id, int(booted_us)
        except (OSError, ValueError):
            self.id = hashlib.sha256(f"{root}:{time.time_ns()}".encode()).hexdigest()[:32]
            self.booted_us = int(time.time() * 1e6) - 3_600_000_000  # up an hour before the simulation
            tmp = path.with_name(f"boot.{os.getpid()}")
            try:
                tmp.write_text(f"{self.id} {self.booted_us}\n")
                os.replace(tmp, path)
            except OSError:
                pass
        self.seqnum_id = hashlib.sha256(f"seqnum:{self.id}".encode()).hexdigest()[:32]

    def cursor(self, stored: str, realtime_us: int) -> str:
        """A cursor of journald's shape for the stored entry (stable: derived from its own cursor)."""
        seq = int(hashlib.sha256(stored.encode()).hexdigest()[:6], 16)
        mono = max(0, realtime_us - self.booted_us)
        x = hashlib.sha256(f"{stored}:{self.id}".encode()).hexdigest()[:16]
        return f"s={self.seqnum_id};i={seq:x};b={self.id};m={mono:x};t={realtime_us:x};x={x}"


def _printable(message: str) -> bool:
    """systemd's utf8_is_printable_newline(): no control character but tab and newline."""
    return not any((ord(c) < 32 and c not in "\t\n") or 0x7F <= ord(c) <= 0x9F for c in message)


DATA_THRESHOLD = 4096  # journalctl's JSON_THRESHOLD: longer fields are null without --all


def _format(e: dict, output: str, fields: list[str] | None, boot: _Boot, show_all: bool = False) -> str:
    realtime_us = int(e["__REALTIME_TIMESTAMP"])
    message = e.get("MESSAGE", "")
    if output == "json":
        always = {"__CURSOR": boot.cursor(e["__CURSOR"], realtime_us), "__REALTIME_TIMESTAMP": str(realtime_us),
                  "__MONOTONIC_TIMESTAMP": str(max(0, realtime_us - boot.booted_us)), "_BOOT_ID": boot.id}
        keep = {k: v for k, v in e.items() if not k.startswith("__") and (not fields or k in fields)}
        if "MESSAGE" in keep and isinstance(message, str) and not _printable(message):
            keep["MESSAGE"] = list(message.encode("utf-8", "surrogateescape"))
        if not show_all:
            for k, v in keep.items():
                if isinstance(v, str) and len(v.encode("utf-8", "surrogateescape")) > DATA_THRESHOLD:
                    keep[k] = None
        return json.dumps({**always, **keep}, separators=(",", ":"), ensure_ascii=False)
    if output == "cat":
        return message
    at = datetime.fromtimestamp(realtime_us / 1e6).astimezone()  # journalctl prints local time
    ts = at.strftime("%Y-%m-%dT%H:%M:%S%z") if output == "short-iso" else at.strftime("%b %d %H:%M:%S")
    ident = f"{e.get('SYSLOG_IDENTIFIER', 'python')}[{e.get('_PID', '?')}]"
    return f"{ts} {e.get('_HOSTNAME', 'host')} {ident}: {message}"


def main(args: list[str]) -> int:
    if "--version" in args:
        print("systemd 252 (252.38-1~deb12u1)")
        return 0
    root = Path(os.environ["GPUSIM_ROOT"])
    units: list[str] = []
    follow, lines, output, after, fields, quiet = False, None, "short", None, None, False
    show_all, inclusive = False, False
    i = 0
    while i < len(args):
        a = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else ""
        if a in ("-u", "--unit"):
            units.append(nxt if "." in nxt else nxt + ".service")
            i += 1
        elif a.startswith("--unit="):
            units.append(a.split("=", 1)[1])
        elif a in ("-f", "--follow"):
            follow = True
        elif a in ("-q", "--quiet"):
            quiet = True
        elif a in ("-n", "--lines"):
            lines = int(nxt)
            i += 1
        elif a.startswith("--lines="):
            lines = int(a.split("=", 1)[1])
        elif a in ("-o", "--output"):
            output = nxt
            i += 1
        elif a.startswith("--output="):
            output = a.split("=", 1)[1]
        elif a in ("-a", "--all"):
            show_all = True
        elif a.startswith("--cursor="):
            after, inclusive = a.split("=", 1)[1], True
        elif a == "--cursor":
            after, inclusive = nxt, True
            i += 1
        elif a.startswith("--after-cursor="):
            after = a.split("=", 1)[1]
        elif a == "--after-cursor":
            after = nxt
            i += 1
        elif a.startswith("--output-fields="):
            fields = a.split("=", 1)[1].split(",")
        i += 1
    boot = _Boot(root)
    entries = _entries(root, units)
    # Everything present now is "before": -f follows only what arrives later, as journalctl does.
    seen: set[str] = {cursor for _, cursor, _ in entries}
    if after is not None:
        cut = next((k for k, (rt, c, _) in enumerate(entries) if after in (c, boot.cursor(c, rt))), None)
        if cut is None:
            m = REAL_CURSOR.match(after)
            if m is None:
                print("Failed to seek to cursor: Invalid argument", file=sys.stderr)
                return 1
            since_us = int(m.group(5), 16)  # an entry gone (rotated, vacuumed): seek to its time
            cut = next((k for k, x in enumerate(entries) if x[0] > since_us), len(entries))
        # sd_journal_next_skip(1 + after_cursor): the sought entry itself, then one more for
        # --after-cursor, whether or not the sought entry is still there.
        entries = entries[cut + (0 if inclusive else 1):]
    elif lines is not None:
        entries = entries[-lines:] if lines else []
    elif follow:
        entries = entries[-10:]
    out = sys.stdout
    for _, _cursor, e in entries:
        out.write(_format(e, output, fields, boot, show_all) + "\n")
    if not entries and not follow and not quiet and output not in ("json", "json-pretty", "json-sse", "json-seq",
                                                                    "export"):
        out.write("-- No entries --\n")
    out.flush()
    while follow:
        time.sleep(0.1)
        fresh = [x for x in _entries(root, units) if x[1] not in seen]
        for _, cursor, e in fresh:
            seen.add(cursor)
            out.write(_format(e, output, fields, boot, show_all) + "\n")
        if fresh:
            out.flush()
    return 0
