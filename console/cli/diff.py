"""`gpuconsole diff OLD NEW`: each side is a local file (a unit or a plain command line) when
one exists at that path, else a unit read from the host with `systemctl cat`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from console.config import HostProfile
from console.domain.analysis.container_diff import build_container_report, side_from_container
from console.domain.analysis.service_diff import HostFacts
from console.domain.analysis.service_report import ServiceSide, build_report, report_json, side_from_text
from console.host.parsers import ParseError
from console.host.parsers.docker import (
    MAX_INSPECT_BYTES,
    ContainerSpec,
    looks_like_inspect,
    parse_compose,
    parse_inspect,
)
from console.host.sources.service import ServiceWatcher
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


def _container_side(spec: str) -> ContainerSpec | None:
    """A container's launch from a local file: `docker inspect` JSON, a compose file (its one
    SGLang service), or `FILE:SERVICE` (issue 26). None when the spec names no such file.
    Raises ParseError (one line) for a file that is one of these but does not parse."""
    path, service = Path(spec), None
    if not path.is_file() and ":" in spec:
        head, _, tail = spec.rpartition(":")
        if Path(head).is_file() and tail:
            path, service = Path(head), tail
    if not path.is_file():
        return None
    try:
        if path.stat().st_size > MAX_INSPECT_BYTES:
            return None
        text = path.read_text("utf-8", "replace")
    except OSError:
        return None
    if service is None and looks_like_inspect(text):
        specs = parse_inspect(text)
        if not specs:
            raise ParseError(f"{spec}: docker inspect lists no container")
        return specs[0]
    if service is not None or path.suffix in (".yaml", ".yml") or path.name.startswith(("compose", "docker-compose")):
        try:
            return parse_compose(text, service)
        except ParseError as exc:
            raise ParseError(f"{spec}: {exc}") from None
    return None


def _print(report_obj: Any, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report_json(report_obj), indent=2))
        return
    from rich.console import Console

    from console.ui.panes.service import format_service

    Console(highlight=False, soft_wrap=False).print(
        format_service(Reading("service", report_obj, 0.0), width=min(Console().width, 140)))


async def run_diff(args: argparse.Namespace, profile: HostProfile, *, local_only: bool, with_session: Any) -> int:
    facts = HostFacts(forbidden_prefixes=profile.forbidden_prefixes)
    try:
        old_box, new_box = _container_side(args.old), _container_side(args.new)
    except ParseError as exc:
        print(f"gpuconsole: {exc}", file=sys.stderr)
        return 2
    if new_box is not None and (old_box is not None or not Path(args.old).exists()):  # noqa: ASYNC240 - one local stat
        report = build_container_report(old_box, new_box, facts) if old_box is not None or args.old == "-" else None
        if report is None:
            print(f"gpuconsole: {args.old}: no such file", file=sys.stderr)
            return 2
        _print(report, args.json)
        if report.new.command is None:
            return 1
        return 3 if args.fail_on_error and any(x.severity == "error" for x in report.lints) else 0
    old_local = side_from_container(old_box) if old_box is not None else _local_side(args.old)
    new_local = side_from_container(new_box) if new_box is not None else _local_side(args.new)
    if old_local is not None and new_local is not None:
        report = build_report(old_local, new_local, facts)
    elif local_only and not Path("/run/systemd/system").is_dir():  # noqa: ASYNC240 - one local stat
        missing = args.old if old_local is None else args.new
        print(f"gpuconsole: {missing}: no such file, and no --host to read a unit from", file=sys.stderr)
        return 1
    else:
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
