"""`gpuconsole diff OLD NEW`: each side is a local file (a unit or a plain command line) when
one exists at that path, else a unit read from the host with `systemctl cat`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from console.analysis.service_diff import HostFacts
from console.analysis.service_report import ServiceSide, build_report, report_json, side_from_text
from console.config import HostProfile
from console.model import Reading


def _local_side(spec: str) -> ServiceSide | None:
    path = Path(spec)
    if not path.is_file():
        return None
    try:
        data = path.read_bytes()
    except OSError as exc:
        return ServiceSide(spec, None, None, None, error=f"{spec}: {exc.strerror}")
    if b"\x00" in data:
        return ServiceSide(spec, None, None, None, error=f"{spec}: binary content, not a unit or command line")
    return side_from_text(path.name, data.decode("utf-8", "replace"))


def _print(report_obj: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report_json(report_obj), indent=2))
        return
    from rich.console import Console

    from console.panes.service import format_service

    Console(highlight=False, soft_wrap=False).print(
        format_service(Reading("service", report_obj, 0.0), width=min(Console().width, 140)))


async def run_diff(args: argparse.Namespace, profile: HostProfile, *, local_only: bool, with_session: Any) -> int:
    old_local, new_local = _local_side(args.old), _local_side(args.new)
    facts = HostFacts(forbidden_prefixes=profile.forbidden_prefixes)
    if old_local is not None and new_local is not None:
        report = build_report(old_local, new_local, facts)
    elif local_only and not Path("/run/systemd/system").is_dir():  # noqa: ASYNC240 - one local stat
        missing = args.old if old_local is None else args.new
        print(f"gpuconsole: {missing}: no such file, and no --host to read a unit from", file=sys.stderr)
        return 1
    else:
        from console.sources.service import ServiceWatcher

        async def on_host(session: Any) -> int:
            watcher = ServiceWatcher(session.transport, args.new, args.old,
                                     forbidden_prefixes=profile.forbidden_prefixes)
            remote = [name for name, local in ((args.new, new_local), (args.old, old_local)) if local is None]
            sides, units, gpus = await watcher.read_sides(remote)
            found = dict(zip(remote, sides, strict=True))
            new = new_local or found[args.new]
            old = old_local or found[args.old]
            new, host_facts = await watcher.facts_for(new, gpus, installed=new_local is None)
            report = build_report(old, new, host_facts, table=watcher.table, units_on_host=units,
                                  flags_source=watcher.flags_note, flags_binary=watcher.flags_binary)
            _print(report, args.json)
            if report.new.command is None:
                return 1
            return 3 if args.fail_on_error and any(x.severity == "error" for x in report.lints) else 0

        return int(await with_session(args, profile, on_host))
    _print(report, args.json)
    if report.errors and not report.changes and report.new.command is None:
        return 1
    return 3 if args.fail_on_error and any(x.severity == "error" for x in report.lints) else 0
