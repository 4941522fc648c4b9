"""A simulated `journalctl`: `-u UNIT` (repeatable), `-f`, `-n N`, `-o json|short-iso|cat`,
`--output-fields=`, `--after-cursor=C`, `--no-pager`, `--version`; reads .sim/journal/*.jsonl."""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path


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


def _format(e: dict, output: str, fields: list[str] | None) -> str:
    if output == "json":
        keep = {k: v for k, v in e.items() if k.startswith("__") or not fields or k in fields}
        return json.dumps(keep)
    if output == "cat":
        return e["MESSAGE"]
    at = datetime.fromtimestamp(int(e["__REALTIME_TIMESTAMP"]) / 1e6, tz=timezone.utc)
    ts = at.strftime("%Y-%m-%dT%H:%M:%S%z")
    ident = f"{e.get('SYSLOG_IDENTIFIER', 'python')}[{e.get('_PID', '?')}]"
    return f"{ts} {e.get('_HOSTNAME', 'host')} {ident}: {e['MESSAGE']}"


def main(args: list[str]) -> int:
    if "--version" in args:
        print("systemd 252 (252.38-1~deb12u1)")
        return 0
    root = Path(os.environ["GPUSIM_ROOT"])
    units: list[str] = []
    follow, lines, output, after, fields = False, None, "short", None, None
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
        elif a.startswith("--after-cursor="):
            after = a.split("=", 1)[1]
        elif a == "--after-cursor":
            after = nxt
            i += 1
        elif a.startswith("--output-fields="):
            fields = a.split("=", 1)[1].split(",")
        i += 1
    entries = _entries(root, units)
    # Everything present now is "before": -f follows only what arrives later, as journalctl does.
    seen: set[str] = {cursor for _, cursor, _ in entries}
    if after is not None:
        cut = next((k for k, (_, c, _) in enumerate(entries) if c == after), None)
        entries = entries[cut + 1:] if cut is not None else entries
    elif lines is not None:
        entries = entries[-lines:] if lines else []
    elif follow:
        entries = entries[-10:]
    out = sys.stdout
    for _, _cursor, e in entries:
        out.write(_format(e, output, fields) + "\n")
    out.flush()
    if not entries and not follow and not units:
        print("-- No entries --")
    while follow:
        time.sleep(0.1)
        fresh = [x for x in _entries(root, units) if x[1] not in seen]
        for _, cursor, e in fresh:
            seen.add(cursor)
            out.write(_format(e, output, fields) + "\n")
        if fresh:
            out.flush()
    return 0
