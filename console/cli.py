"""The command line: the app, and the `snapshot`, `doctor` subcommands.

Errors are one line on stderr and a non-zero exit; never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

from console import __version__
from console.config import ConfigError, HostProfile, load_config

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _host_options(*, suppress: bool = False) -> argparse.ArgumentParser:
    """Host options for the top level and (with `suppress`) for each subcommand, so that
    `gpuconsole --demo doctor` and `gpuconsole doctor --demo` mean the same."""
    unset = argparse.SUPPRESS if suppress else None
    p = argparse.ArgumentParser(add_help=False, argument_default=unset)
    g = p.add_argument_group("host options")
    g.add_argument("--host", help="GPU host (a name from ~/.ssh/config works); none: this machine")
    g.add_argument("--port", type=int)
    g.add_argument("--user")
    g.add_argument("--identity", metavar="FILE", help="private key file (as ssh -i)")
    g.add_argument("--known-hosts", metavar="FILE", help="known_hosts file (default ~/.ssh/known_hosts)")
    g.add_argument("--accept-new-host-key", action="store_true", default=unset,
                   help="record an unknown host key (OpenSSH's accept-new); a changed key is always refused")
    g.add_argument("--connect-timeout", type=float, dest="connect_timeout_s", metavar="SECONDS")
    g.add_argument("--config", metavar="FILE", help="config file (default: $GPUCONSOLE_CONFIG or "
                   "~/.config/gpuconsole/config.toml)")
    g.add_argument("--profile", help="host profile from the config")
    g.add_argument("--model-dir", metavar="DIR")
    g.add_argument("--repo", dest="repo_id", metavar="REPO_ID", help="Hugging Face repo id of the model")
    g.add_argument("--unit", help="systemd unit of the new SGLang service")
    g.add_argument("--compare-unit", metavar="UNIT", help="unit to diff against (the old service)")
    g.add_argument("--log-file", metavar="PATH", help="SGLang log file (instead of the unit's journal)")
    g.add_argument("--server-port", type=int, metavar="N", help="SGLang HTTP port on the host (30000)")
    g.add_argument("--read-only", action="store_true", default=unset,
                   help="never change anything on the host (the default today)")
    g.add_argument("--demo", action="store_true", default=unset, help="run against the built-in simulated GPU host")
    g.add_argument("--demo-speed", type=float, metavar="X", help=argparse.SUPPRESS,
                   **({} if suppress else {"default": 1.0}))
    # The demo whose swap the console drives itself (issue 13): nothing moves until you act.
    g.add_argument("--demo-scenario", choices=["swap", "drive"], help=argparse.SUPPRESS,
                   **({} if suppress else {"default": "swap"}))
    return p


def build_parser() -> argparse.ArgumentParser:
    host = _host_options(suppress=True)
    parser = argparse.ArgumentParser(
        prog="gpuconsole", parents=[_host_options()],
        description="Operator console for SGLang model swaps on a multi-GPU host, over one SSH connection.",
    )
    parser.add_argument("--version", action="version", version=f"gpuconsole {__version__}")
    parser.add_argument("--screenshot", metavar="FILE.svg",
                        help="save a screenshot after --screenshot-after s, then exit")
    parser.add_argument("--screenshot-after", type=float, default=3.0, metavar="SECONDS")
    parser.add_argument("--screenshot-size", default="120x40", metavar="COLSxROWS")
    parser.add_argument("--no-record", action="store_true",
                        help="do not record this session (by default it is, under the XDG data dir, for replay)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    replay = sub.add_parser("replay", help="play a recorded session into the same panes, with no host")
    replay.add_argument("file", metavar="FILE", help="a recording (.jsonl.gz), as listed by --list")
    replay.add_argument("--speed", type=float, default=1.0, metavar="X", help="play X times as fast (default 1)")
    replay.add_argument("--at", type=float, default=0.0, metavar="SECONDS",
                        help="start this many seconds into the recording")
    snap = sub.add_parser("snapshot", parents=[host], help="one poll of every source, as JSON")
    snap.add_argument("--json", action="store_true", help="print JSON (the only format today)")
    diff = sub.add_parser("diff", parents=[host], help="SGLang-aware diff of two units or command lines")
    diff.add_argument("old", metavar="OLD", help="unit name on the host, or a local unit file / command-line file")
    diff.add_argument("new", metavar="NEW", help="unit name on the host, or a local unit file / command-line file")
    diff.add_argument("--json", action="store_true")
    diff.add_argument("--fail-on-error", action="store_true", help="exit 3 when a check finds an error")
    bench = sub.add_parser("bench", parents=[host], help="serving benchmark (metrics as sglang.bench_serving)")
    bench.add_argument("--url", help="server base URL (default: the host's SGLang through the SSH forward)")
    bench.add_argument("--model", help="model name (default: the first of /v1/models)")
    bench.add_argument("--endpoint", default="/v1/chat/completions",
                       choices=["/v1/chat/completions", "/v1/completions"])
    bench.add_argument("--num-prompts", type=int, default=64)
    bench.add_argument("--input-len", type=int, default=1024)
    bench.add_argument("--output-len", type=int, default=1024)
    bench.add_argument("--range-ratio", type=float, default=1.0, help="lengths uniform in [len·ratio, len]")
    bench.add_argument("--dataset", metavar="SHAREGPT.json", help="ShareGPT-format file instead of random prompts")
    mode = bench.add_mutually_exclusive_group()
    mode.add_argument("--concurrency", type=int, help="requests in flight (closed loop)")
    mode.add_argument("--request-rate", type=float, help="Poisson arrivals per second")
    mode.add_argument("--sweep", help="concurrency levels, e.g. 1,4,16,64")
    bench.add_argument("--duration", type=float, help="stop sending after this many seconds")
    bench.add_argument("--warmup", type=int, default=1)
    bench.add_argument("--seed", type=int, default=42)
    bench.add_argument("--json", action="store_true")
    bench.add_argument("--output-file", metavar="F",
                       help="append a JSONL line per run (default ~/.local/share/gpuconsole/bench.jsonl)")
    fit = sub.add_parser("fit", parents=[host], help="will the model fit, and how much KV cache is left")
    fit.add_argument("model", metavar="MODEL", help="a local dir, a dir on the host (with host options) or a repo id")
    fit.add_argument("--gpus", type=int, help="GPU count (default: the host's)")
    fit.add_argument("--gpu-mem", type=float, metavar="GiB", help="memory per GPU (default: the host's)")
    fit.add_argument("--tp", type=int, help="tensor parallel size (default: all GPUs)")
    fit.add_argument("--dtype", default="auto")
    fit.add_argument("--kv-cache-dtype", default="auto")
    fit.add_argument("--mem-fraction", type=float, help="--mem-fraction-static (default: SGLang's automatic value)")
    fit.add_argument("--context-len", type=int)
    fit.add_argument("--max-running-requests", type=int)
    fit.add_argument("--speculative-algorithm", metavar="ALGO", help="NEXTN, EAGLE, … (MTP)")
    fit.add_argument("--speculative-num-draft-tokens", type=int)
    fit.add_argument("--json", action="store_true")
    # -- the swap report (issue 13) --
    rep = sub.add_parser("report", help="the swap report of a recorded session (Markdown, HTML or JSON)")
    rep.add_argument("file", metavar="FILE", nargs="?",
                     help="a recording (.jsonl.gz); default: the newest one under the XDG data dir")
    rep.add_argument("--format", choices=["md", "html", "json"], default="md")
    rep.add_argument("--output", "-o", metavar="OUT", help="write here instead of stdout")
    doc = sub.add_parser("doctor", parents=[host], help="what works on the host and how fast")
    doc.add_argument("--json", action="store_true")
    doc.add_argument("--runs", type=int, default=50, help="round-trips measured per channel kind")
    return parser


def resolve_profile(args: argparse.Namespace) -> HostProfile:
    from pathlib import Path

    config = load_config(Path(args.config) if args.config else None)
    profile = config.pick(args.profile, args.host)
    overrides = {k: getattr(args, k, None) for k in (
        "host", "port", "user", "identity", "known_hosts", "model_dir", "repo_id", "unit",
        "compare_unit", "log_file", "server_port", "connect_timeout_s", "read_only")}
    if args.host and profile.host and args.host == profile.name:
        overrides["host"] = None  # --host named the profile: keep its address
    return profile.with_overrides(overrides)


def _fail(message: str, code: int = EXIT_FAIL) -> int:
    print(f"gpuconsole: {message}", file=sys.stderr)
    return code


async def _with_session(args: argparse.Namespace, profile: HostProfile, body: Any) -> int:
    from console.session import HostSession, make_transport
    from console.transport.errors import TransportError

    transport = make_transport(profile, accept_new_host_key=bool(args.accept_new_host_key))
    session = HostSession(profile, transport, demo=bool(args.demo))
    try:
        await transport.connect()
    except TransportError as exc:
        return _fail(str(exc))
    try:
        code: int = await body(session)
        return code
    finally:
        await session.close()


def main(argv: Sequence[str] | None = None) -> int:
    import logging

    # asyncio's own warnings ("socket.send() raised exception" while a connection closes) would
    # be written over the TUI; our errors reach the operator through the panes and stderr instead.
    logging.getLogger("asyncio").setLevel(logging.ERROR)
    logging.getLogger("asyncssh").setLevel(logging.ERROR)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        profile = resolve_profile(args)
    except ConfigError as exc:
        return _fail(str(exc), EXIT_USAGE)

    sim = None
    if args.demo:
        from console.session import SimulatorThread

        sim = SimulatorThread(speed=args.demo_speed, scenario=getattr(args, "demo_scenario", None) or "swap")
        try:
            profile = sim.start().with_overrides({"read_only": getattr(args, "read_only", None)})
        except Exception as exc:  # noqa: BLE001 - the demo failing to start is one line, too
            return _fail(f"the demo host simulator did not start: {exc}")
    try:
        return asyncio.run(_dispatch(args, profile))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `gpuconsole snapshot --json | head`: the reader left; that is not our error.
        sys.stderr.close()
        return EXIT_OK
    finally:
        if sim is not None:
            sim.stop()


def _screenshot_size(args: argparse.Namespace) -> tuple[int, int]:
    width, height = (int(x) for x in args.screenshot_size.lower().split("x"))
    return width, height


async def _run_view(app: Any, args: argparse.Namespace) -> int:
    if args.screenshot:
        # Headless at a fixed size: the same picture whatever terminal (or none) runs it.
        result = await app.run_async(headless=True, size=_screenshot_size(args))
    else:
        result = await app.run_async()
    return int(result or 0)


async def _replay(args: argparse.Namespace) -> int:
    from pathlib import Path

    from console.app import ConsoleApp
    from console.core.recording import RecordingError, Replayer, read_recording
    from console.core.state import HostState

    if not args.speed > 0 or args.at < 0:
        return _fail("--speed must be > 0 and --at >= 0", EXIT_USAGE)
    try:
        recording = await asyncio.to_thread(read_recording, Path(args.file))
    except RecordingError as exc:
        return _fail(str(exc), EXIT_USAGE)
    header = recording.header
    state = HostState(str(header.get("host") or "?"), label=str(header.get("label") or header.get("host")),
                      demo=bool(header.get("demo")))
    replayer = Replayer(recording, state, speed=args.speed, at_s=args.at)
    # The panes are built from the session's first event (which panes have a source).
    from console.core.state import HostInfo

    for _, event in recording.entries[:5]:
        if isinstance(event, HostInfo):
            state.apply(event)
            break
    app = ConsoleApp(state, None, start=replayer.run, mode="replay", screenshot=args.screenshot,
                     screenshot_after_s=args.screenshot_after if args.screenshot else None)
    if recording.damage:
        print(f"gpuconsole: {args.file}: {recording.damage}; replaying up to there", file=sys.stderr)
    return await _run_view(app, args)


def _report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from console.core.recording import RecordingError, default_dir
    from console.swap.report import ReportError, render, report_from_recording

    if args.file:
        path = Path(args.file)
    else:
        found = sorted(default_dir().parent.glob("recordings/**/*.jsonl.gz"), key=lambda p: p.stat().st_mtime)
        if not found:
            return _fail(f"no recording under {default_dir()}: give FILE", EXIT_USAGE)
        path = found[-1]
    try:
        text = render(report_from_recording(path), args.format)
    except (RecordingError, ReportError) as exc:
        return _fail(str(exc), EXIT_USAGE)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            return _fail(f"cannot write {args.output}: {exc.strerror or exc}", EXIT_USAGE)
    else:
        print(text)
    return EXIT_OK


async def _dispatch(args: argparse.Namespace, profile: HostProfile) -> int:
    if args.command == "replay":
        return await _replay(args)
    if args.command == "report":
        return _report(args)
    if args.command == "snapshot":
        from console.snapshot import take_snapshot

        async def snap(session: Any) -> int:
            print(json.dumps(await take_snapshot(session), indent=2))
            return EXIT_OK

        return await _with_session(args, profile, snap)
    if args.command == "bench":
        from console.bench.cli import run_bench_cli

        if args.url:
            return await run_bench_cli(args, profile, None)

        async def bench_on_host(session: Any) -> int:
            return await run_bench_cli(args, profile, session)

        return await _with_session(args, profile, bench_on_host)
    if args.command == "fit":
        from console.fit_cli import run_fit

        if not profile.host and not args.demo:
            return await run_fit(args, None)

        async def fit_on_host(session: Any) -> int:
            return await run_fit(args, session)

        return await _with_session(args, profile, fit_on_host)
    if args.command == "diff":
        from console.diff_cli import run_diff

        local_only = not profile.host and not args.demo
        return await run_diff(args, profile, local_only=local_only, with_session=_with_session)
    if args.command == "doctor":
        from console.doctor import format_doctor, run_doctor

        async def doctor(session: Any) -> int:
            report = await run_doctor(session.transport, session.profile, runs=args.runs)
            print(json.dumps(report, indent=2) if args.json else format_doctor(report))
            return EXIT_OK if all(c["ok"] for c in report["checks"][:3]) else EXIT_FAIL

        return await _with_session(args, profile, doctor)

    async def run_app(session: Any) -> int:
        from console.app import ConsoleApp
        from console.core.recording import default_dir

        app = ConsoleApp.for_session(
            session, record=not args.no_record, record_dir=default_dir() / "demo" if session.demo else None,
            screenshot=args.screenshot, screenshot_after_s=args.screenshot_after if args.screenshot else None)
        try:
            return await _run_view(app, args)
        finally:
            if app.recorder is not None:
                app.recorder.close()

    return await _with_session(args, profile, run_app)
