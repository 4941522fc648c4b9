"""The command line: the app, and the `snapshot`, `doctor` subcommands.

Errors are one line on stderr and a non-zero exit; never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console
from rich.markdown import Markdown

from console import __version__
from console.cli.options import add_deploy_options, add_fleet_options, is_deployment, is_fleet
from console.config import ConfigError, HostProfile, load_config

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
MAX_ARG_CHARS = 4096  # PATH_MAX: no path, host, unit or name the console takes is longer
MAX_NAME_BYTES = 255  # NAME_MAX: one path component (a longer one is ENAMETOOLONG, not "no such file")


def too_long(argv: Sequence[str]) -> str | None:
    """Why the command line is refused before it is parsed (issue 34, item 14: a 10,000-character
    path or --host reached open() and the resolver and printed a traceback), or None."""
    for arg in argv:
        if len(arg) > MAX_ARG_CHARS:
            return f"an argument of {len(arg):,} characters (at most {MAX_ARG_CHARS:,}): {arg[:40]!r}…"
    return None


def name_too_long(args: argparse.Namespace) -> str | None:
    """A value with a path component longer than NAME_MAX, said as the flag that carried it."""
    for key, value in sorted(vars(args).items()):
        for v in value if isinstance(value, list) else [value]:
            if not isinstance(v, str):
                continue
            part = max(v.split("/"), key=lambda x: len(x.encode("utf-8", "surrogateescape")))
            if len(part.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
                flag = key if key in ("file", "old", "new", "model") else "--" + key.replace("_", "-")
                return (f"{flag}: a name of {len(part.encode('utf-8', 'surrogateescape'))} bytes "
                        f"(at most {MAX_NAME_BYTES} between slashes): {v[:40]!r}…")
    return None


def host_problem(host: str) -> str | None:
    """A --host that no resolver or ssh_config could take: one line instead of the resolver's error."""
    if not host or len(host) > 253 or host.startswith("-") or any(c.isspace() or not c.isprintable() for c in host):
        return f"not a host name: {host[:40]!r}" + ("…" if len(host) > 40 else "")
    name = host.rsplit("@", 1)[-1].strip("[]")
    if ":" not in name and any(len(label) > 63 for label in name.split(".")):
        return f"not a host name (a part longer than 63 characters): {host[:40]!r}…"
    return None


class _HostFlag(argparse.Action):
    """--host may repeat (issue 14, fleet): the last one is `host`, all of them `hosts`."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        problem = host_problem(str(values))
        if problem:
            parser.error(f"argument --host: {problem}")
        namespace.host = values
        namespace.hosts = [*(getattr(namespace, "hosts", None) or []), values]


class OneLineParser(argparse.ArgumentParser):
    """argparse with its usage errors as one line (`gpuconsole: argument --port: …`), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"gpuconsole: {message} (see {self.prog} --help)\n")


def _number(kind: type, text: str) -> Any:
    try:
        value = kind(text)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                         f"got {text[:40]!r}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text[:40]!r}")
    return value


def positive_int(text: str) -> int:
    value = _number(int, text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return int(value)


def nonnegative_int(text: str) -> int:
    value = _number(int, text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return int(value)


def nonnegative_float(text: str) -> float:
    value = _number(float, text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value:g}")
    return float(value)


def positive_float(text: str) -> float:
    value = _number(float, text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {value:g}")
    return float(value)


def fraction(text: str) -> float:
    value = _number(float, text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value:g}")
    return float(value)


def ratio(text: str) -> float:
    value = _number(float, text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {value:g}")
    return float(value)


def port_number(text: str) -> int:
    value = _number(int, text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 1–65535, got {value}")
    return int(value)


def sweep_levels(text: str) -> str:
    levels = [x.strip() for x in text.split(",")]
    if not text.strip() or not all(x.isascii() and x.isdigit() and int(x) > 0 for x in levels):
        raise argparse.ArgumentTypeError(f"expected concurrency levels like 1,4,16, got {text[:40]!r}")
    return text


def screen_size(text: str) -> str:
    cols, sep, rows = text.lower().partition("x")
    if not (sep and cols.isascii() and cols.isdigit() and rows.isascii() and rows.isdigit()
            and 20 <= int(cols) <= 1000 and 10 <= int(rows) <= 500):
        raise argparse.ArgumentTypeError(f"expected COLSxROWS like 120x40 (20–1000 x 10–500), got {text[:40]!r}")
    return text


def _host_options(*, suppress: bool = False, model: bool = True, service: bool = True,
                  server: bool = True) -> argparse.ArgumentParser:
    """Host options for the top level and (with `suppress`) for each subcommand, so that
    `gpuconsole --demo doctor` and `gpuconsole doctor --demo` mean the same. A subcommand lists
    only what it uses: `model` (--model-dir, --repo), `service` (--unit, --compare-unit,
    --log-file), `server` (--server-port)."""
    unset = argparse.SUPPRESS if suppress else None
    p = OneLineParser(add_help=False, argument_default=unset)
    g = p.add_argument_group("host options")
    g.add_argument("--host", action=_HostFlag, default=unset,
                   help="GPU host (a name from ~/.ssh/config works); none: this machine; repeat it for a fleet")
    g.add_argument("--port", type=port_number, help="SSH port (default: from ~/.ssh/config, else 22)")
    g.add_argument("--user", help="SSH user (default: from ~/.ssh/config, else yours)")
    g.add_argument("--identity", metavar="FILE", help="private key file (as ssh -i)")
    g.add_argument("--known-hosts", metavar="FILE", help="known_hosts file (default ~/.ssh/known_hosts)")
    g.add_argument("--accept-new-host-key", action="store_true", default=unset,
                   help="record an unknown host key (OpenSSH's accept-new); a changed key is always refused")
    g.add_argument("--connect-timeout", type=positive_float, dest="connect_timeout_s", metavar="SECONDS",
                   help="give up connecting after this long (default 10)")
    g.add_argument("--config", metavar="FILE", help="config file (default: $GPUCONSOLE_CONFIG or "
                   "~/.config/gpuconsole/config.toml)")
    g.add_argument("--profile", help="host profile from the config")
    g.add_argument("--demo", action="store_true", default=unset, help="run against the built-in simulated GPU host")
    if model and service and server:  # where the swap's actions exist
        g.add_argument("--read-only", action="store_true", default=unset,
                       help="change nothing on the host and load nothing: the core refuses every swap action "
                            "(download, install, stop, start, rollback, override), every benchmark (unless "
                            "--allow-load), and the palette hides them; it still reads (SSH, journal, "
                            "nvidia-smi, /server_info, /metrics, /health_generate probes)")
        g.add_argument("--allow-load", action="store_true", default=unset,
                       help="with --read-only: still allow a benchmark against the server (load, asked explicitly)")
        g.add_argument("--require-approval", action="store_true", default=unset,
                       help="the two-person rule: stopping, starting and rolling back wait for another attached "
                            "person's approval (also with --demo)")
    g.add_argument("--demo-speed", type=positive_float, metavar="X", help=argparse.SUPPRESS,
                   **({} if suppress else {"default": 1.0}))
    # The demo's story again from its start every SECONDS scenario seconds (benchmarks/soak.py)
    g.add_argument("--demo-loop", type=positive_float, metavar="SECONDS", help=argparse.SUPPRESS)
    if model or service or server:
        m = p.add_argument_group("what to watch on the host")
        if model:
            m.add_argument("--model-dir", metavar="DIR", help="the model directory being downloaded (on the host)")
            m.add_argument("--repo", dest="repo_id", metavar="REPO_ID", help="Hugging Face repo id of the model")
        if service:
            m.add_argument("--unit", help="systemd unit of the new SGLang service")
            m.add_argument("--compare-unit", metavar="UNIT", help="unit to diff against (the old service)")
            m.add_argument("--log-file", metavar="PATH", help="SGLang log file (instead of the unit's journal)")
            m.add_argument("--container", metavar="NAME", help="Docker container of the new SGLang service")
            m.add_argument("--compare-container", metavar="NAME", help="container to diff against (the old service)")
        if server:
            m.add_argument("--server-port", type=port_number, metavar="N", help="SGLang HTTP port on the host (30000)")
    # The demo whose swap the console drives itself (issue 13): nothing moves until you act.
    g.add_argument("--demo-scenario", choices=["swap", "drive", "operator", "docker", "docker-drive"],
                   help=argparse.SUPPRESS if suppress else "with --demo: 'swap' (default) plays the story's swap by "
                   "itself, the plan following it; 'operator': an operator drives the swap through the Swap plan's "
                   "keys, on screen; 'drive': nothing moves until you drive the Swap plan (ctrl+p); "
                   "'docker': the story's swap with both services as Docker containers; "
                   "'docker-drive': the containers' swap, driven from the Swap plan",
                   **({} if suppress else {"default": "swap"}))
    return p


def build_parser() -> argparse.ArgumentParser:
    everything = _host_options(suppress=True)
    connection = _host_options(suppress=True, model=False, service=False, server=False)
    on_server = _host_options(suppress=True, model=False, service=False)
    parser = OneLineParser(
        prog="gpuconsole", parents=[_host_options()],
        description="Operator console for SGLang model swaps on a multi-GPU host, over one SSH connection.",
    )
    parser.add_argument("--version", action="version", version=f"gpuconsole {__version__}")
    parser.add_argument("--screenshot", metavar="FILE.svg",
                        help="save a screenshot after --screenshot-after s, then exit")
    parser.add_argument("--screenshot-after", type=positive_float, default=3.0, metavar="SECONDS",
                        help="seconds to wait before the --screenshot (default 3)")
    parser.add_argument("--screenshot-size", type=screen_size, default="120x40", metavar="COLSxROWS",
                        help="terminal size of the --screenshot (default 120x40)")
    parser.add_argument("--no-record", action="store_true",
                        help="do not record this session (by default it is, under the XDG data dir, for replay)")
    add_fleet_options(parser)  # issue 14: --group, --demo-hosts, --prometheus, --metrics
    add_deploy_options(parser)  # issue 37: --deployment, --demo-deployment, --once
    parser.add_argument("--share", action="store_true",
                        help="let others attach to this console's core (gpuconsole attach; pairing)")
    from console.cli.share import add_share_options  # --invite beside --share (issue 35, item 2)

    add_share_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help="a one-shot command (none: open the console)")
    replay = sub.add_parser("replay", help="play a recorded session into the same panes, with no host")
    replay.add_argument("file", metavar="FILE",
                        help="a recording (.jsonl.gz), by default under $XDG_DATA_HOME/gpuconsole/recordings")
    replay.add_argument("--speed", type=positive_float, default=1.0, metavar="X",
                        help="play X times as fast (default 1)")
    replay.add_argument("--at", type=nonnegative_float, default=0.0, metavar="SECONDS",
                        help="start this many seconds into the recording")
    # As the console takes them (issue 22 item 3); SUPPRESS: given before `replay`, they still count.
    replay.add_argument("--screenshot", metavar="FILE.svg", default=argparse.SUPPRESS,
                        help="save a screenshot after --screenshot-after s of playing, then exit")
    replay.add_argument("--screenshot-after", type=positive_float, metavar="SECONDS", default=argparse.SUPPRESS,
                        help="seconds to play before the --screenshot (default 3)")
    replay.add_argument("--screenshot-size", type=screen_size, metavar="COLSxROWS", default=argparse.SUPPRESS,
                        help="terminal size of the --screenshot (default 120x40)")
    snap = sub.add_parser("snapshot", parents=[everything], help="one poll of every source, as JSON")
    snap.add_argument("--json", action="store_true", help="print JSON (the only format today)")
    diff = sub.add_parser("diff", parents=[connection], help="SGLang-aware diff of two units or command lines")
    diff.add_argument("old", metavar="OLD", help="unit name on the host, or a local unit file / command-line file")
    diff.add_argument("new", metavar="NEW", help="unit name on the host, or a local unit file / command-line file")
    diff.add_argument("--json", action="store_true", help="print JSON (keys in the README)")
    diff.add_argument("--fail-on-error", action="store_true", help="exit 3 when a check finds an error")
    bench = sub.add_parser("bench", parents=[on_server], help="serving benchmark (metrics as sglang.bench_serving)")
    bench.add_argument("--url", help="server base URL (default: the host's SGLang through the SSH forward)")
    bench.add_argument("--model", help="model name (default: the first of /v1/models)")
    bench.add_argument("--endpoint", default="/v1/chat/completions",
                       choices=["/v1/chat/completions", "/v1/completions"], help="API to call (default: chat)")
    bench.add_argument("--num-prompts", type=positive_int, default=64, help="requests per run (default 64)")
    bench.add_argument("--input-len", type=positive_int, default=1024, help="prompt tokens (default 1024)")
    bench.add_argument("--output-len", type=positive_int, default=1024, help="tokens to generate (default 1024)")
    bench.add_argument("--range-ratio", type=ratio, default=1.0, help="lengths uniform in [len·ratio, len]")
    bench.add_argument("--dataset", metavar="SHAREGPT.json", help="ShareGPT-format file instead of random prompts")
    mode = bench.add_mutually_exclusive_group()
    mode.add_argument("--concurrency", type=positive_int, help="requests in flight (closed loop)")
    mode.add_argument("--request-rate", type=positive_float, help="Poisson arrivals per second")
    mode.add_argument("--sweep", type=sweep_levels, help="concurrency levels, e.g. 1,4,16,64")
    bench.add_argument("--duration", type=positive_float, help="stop sending after this many seconds")
    bench.add_argument("--warmup", type=nonnegative_int, default=1,
                       help="requests sent first and not counted (default 1)")
    bench.add_argument("--seed", type=int, default=42, help="seed of the random prompts (default 42)")
    bench.add_argument("--json", action="store_true", help="print JSON (keys in the README)")
    bench.add_argument("--output-file", metavar="F",
                       help="append a JSONL line per run (default ~/.local/share/gpuconsole/bench.jsonl)")
    bench.add_argument("--tokenizer", metavar="DIR|tokenizer.json",
                       help="count output tokens with this tokenizer when the server sends no per-chunk usage")
    bench.add_argument("--api-key", metavar="env:VAR|file:PATH",
                       help="the server's API key, read from an environment variable or a file (never a literal: "
                            "it would show in ps); never printed or saved")
    fit = sub.add_parser("fit", parents=[connection], help="will the model fit, and how much KV cache is left")
    fit.add_argument("model", metavar="MODEL", help="a local dir, a dir on the host (with host options) or a repo id")
    fit.add_argument("--gpus", type=positive_int, help="GPU count (default: the host's)")
    fit.add_argument("--gpu-mem", type=positive_float, metavar="GiB", help="memory per GPU (default: the host's)")
    fit.add_argument("--tp", type=positive_int, help="tensor parallel size (default: all GPUs)")
    fit.add_argument("--dtype", default="auto", help="as SGLang's --dtype (default: the checkpoint's)")
    fit.add_argument("--kv-cache-dtype", default="auto", help="as SGLang's --kv-cache-dtype (default: auto)")
    fit.add_argument("--mem-fraction", type=fraction, help="--mem-fraction-static (default: SGLang's automatic value)")
    fit.add_argument("--context-len", type=positive_int, help="as SGLang's --context-length (default: the model's)")
    fit.add_argument("--max-running-requests", type=positive_int, help="as SGLang's (default: SGLang's choice)")
    fit.add_argument("--speculative-algorithm", metavar="ALGO", help="NEXTN, EAGLE, … (MTP)")
    fit.add_argument("--speculative-num-draft-tokens", type=positive_int, help="as SGLang's (default 4 with MTP)")
    fit.add_argument("--json", action="store_true", help="print JSON (keys in the README)")
    # -- the swap report (issue 13) --
    rep = sub.add_parser("report", help="the swap report of a recorded session (Markdown, HTML or JSON)")
    rep.add_argument("file", metavar="FILE", nargs="?",
                     help="a recording (.jsonl.gz); default: the newest one under the XDG data dir")
    rep.add_argument("--format", choices=["md", "html", "json"], default="md", help="output format (default md)")
    rep.add_argument("--output", "-o", metavar="OUT", help="write here instead of stdout")
    doc = sub.add_parser("doctor", parents=[_host_options(suppress=True, model=True, service=True, server=False)],
                         help="what works on the host and how fast")
    doc.add_argument("--json", action="store_true", help="print JSON")
    doc.add_argument("--runs", type=positive_int, default=50, help="round-trips measured per channel kind")
    from console.cli.share import add_parsers  # pairing (issue 12): serve, attach

    add_parsers(sub, everything)
    return parser


def _writable_file(path: str, what: str) -> str | None:
    target = Path(path).expanduser()
    if target.is_dir():
        return f"{what} {path}: is a directory"
    parent = target.parent
    if not parent.is_dir():
        return f"{what} {path}: no such directory {parent}"
    if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        return f"{what} {path}: not writable"
    return None


def check_paths(args: argparse.Namespace, profile: HostProfile) -> str | None:
    """Local paths checked at the edge, before anything connects or runs."""
    if getattr(args, "screenshot", None):
        problem = _writable_file(args.screenshot, "--screenshot")
        if problem:
            return problem
    if getattr(args, "command", None) == "bench" and args.output_file:
        problem = _writable_file(args.output_file, "--output-file")
        if problem:
            return problem
    if getattr(args, "command", None) == "bench" and args.dataset and not Path(args.dataset).is_file():
        return f"--dataset {args.dataset}: no such file"
    if not profile.host and not getattr(args, "demo", False):  # this machine: its paths can be checked here
        if profile.log_file and not Path(profile.log_file).is_file():
            return f"--log-file {profile.log_file}: " + ("is a directory" if Path(profile.log_file).is_dir()
                                                           else "no such file")
        if profile.model_dir and Path(profile.model_dir).exists() and not Path(profile.model_dir).is_dir():
            return f"--model-dir {profile.model_dir}: not a directory"
    return None


def resolve_profile(args: argparse.Namespace) -> HostProfile:
    config = load_config(Path(args.config) if args.config else None)
    profile = config.pick(args.profile, args.host)
    overrides = {k: getattr(args, k, None) for k in (  # a subcommand may not offer every one
        "host", "port", "user", "identity", "known_hosts", "model_dir", "repo_id", "unit",
        "compare_unit", "log_file", "container", "compare_container", "server_port", "connect_timeout_s",
        "read_only", "require_approval", "allow_load")}
    if args.host and profile.host and args.host == profile.name:
        overrides["host"] = None  # --host named the profile: keep its address
    return profile.with_overrides(overrides)


def _fail(message: str, code: int = EXIT_FAIL) -> int:
    print(f"gpuconsole: {message}", file=sys.stderr)
    return code


async def _with_session(args: argparse.Namespace, profile: HostProfile, body: Any) -> int:
    from console.host.session import HostSession, make_transport
    from console.host.transport.errors import TransportError

    transport = make_transport(profile, accept_new_host_key=bool(args.accept_new_host_key))
    session = HostSession(profile, transport, demo=bool(args.demo), audit_file=getattr(args, "demo_audit_file", None))
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
    # asyncio's own warnings ("socket.send() raised exception" while a connection closes) would
    # be written over the TUI; our errors reach the operator through the panes and stderr instead.
    logging.getLogger("asyncio").setLevel(logging.ERROR)
    logging.getLogger("asyncssh").setLevel(logging.ERROR)
    parser = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    problem = too_long(given)
    if problem:
        return _fail(problem, EXIT_USAGE)
    args = parser.parse_args(given)
    problem = name_too_long(args)
    if problem:
        return _fail(problem, EXIT_USAGE)
    # -- fleet (issue 14): many hosts, or the fleet from Prometheus ------------------------
    if args.command is None and is_fleet(args):
        from console.cli.fleet import run_fleet_cli

        return run_fleet_cli(args)
    if args.command is None and is_deployment(args):  # issue 37
        from console.cli.deploy import run_deploy_cli

        return run_deploy_cli(args)
    if args.command is not None and getattr(args, "deploy_web", None):
        return _fail(f"--web before '{args.command}' is the deployment's (--deployment NAME --share --web PORT); "
                     "a host is served to browsers by gpuconsole serve --web PORT", EXIT_USAGE)
    if args.command == "attach" and getattr(args, "deployment", None):
        from console.cli.deploy import run_deploy_attach

        return run_deploy_attach(args)
    if args.command is None and args.metrics:
        from console.domain.fleet.metrics import MetricsAddressError, parse_metrics_address

        try:
            args.metrics_address = parse_metrics_address(args.metrics)
        except MetricsAddressError as exc:
            return _fail(str(exc), EXIT_USAGE)
    # -- end fleet -------------------------------------------------------------------------
    if args.demo and (getattr(args, "host", None) or getattr(args, "profile", None)):
        # The demo is its own simulated host: a --host (or --profile) beside it would be ignored.
        named = f"--host {args.host}" if getattr(args, "host", None) else f"--profile {args.profile}"
        return _fail(f"--demo runs against the simulated host, not {named[:80]}: give one of them", EXIT_USAGE)
    try:
        profile = resolve_profile(args)
    except ConfigError as exc:
        return _fail(str(exc), EXIT_USAGE)
    problem = check_paths(args, profile)
    if problem:
        return _fail(problem, EXIT_USAGE)


    def terminated(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)  # unwinds through the `finally`s: the demo's sandbox is removed

    with contextlib.suppress(ValueError):  # not the main thread (tests call main() from threads)
        signal.signal(signal.SIGTERM, terminated)
    sim = None
    if args.demo:
        from console.demo.hostsim.process import SimulatorThread

        scenario = getattr(args, "demo_scenario", None) or "swap"
        # The operator's demo runs on the driven host: nothing moves but what the plan's keys do.
        sim = SimulatorThread(speed=args.demo_speed, scenario="drive" if scenario == "operator" else scenario,
                              loop_s=getattr(args, "demo_loop", None))
        try:
            profile = sim.start().with_overrides({"read_only": getattr(args, "read_only", None),
                                                  "require_approval": getattr(args, "require_approval", None)})
        except Exception as exc:  # noqa: BLE001 - the demo failing to start is one line, too
            return _fail(f"the demo host simulator did not start: {exc}")
        args.demo_audit_file = sim.audit_file  # this run's own (its host is new): no earlier demo's commands
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


def _with_demo_operator(app: Any) -> None:
    """The demo's operator drives the Swap plan once the host's sources run (issue 22 item 8)."""
    from console.ui.panes.swap import drive_plan_as_operator

    start = app._start

    async def start_then_drive() -> None:
        if start is not None:
            await start()
        said = await drive_plan_as_operator(app)
        app.notify(said, title="the demo's operator", markup=False)

    app._start = start_then_drive


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
    from console.cli.deploy import deployment_replay_app
    from console.core.recording import RecordingError, Replayer, read_recording
    from console.core.state import HostState
    from console.ui.app import ConsoleApp

    if (made := deployment_replay_app(args)) is not None:  # a deployment's recording (a directory), issue 37
        return made if isinstance(made, int) else await _run_view(made, args)

    try:
        recording = await asyncio.to_thread(read_recording, Path(args.file))
    except RecordingError as exc:
        return _fail(str(exc), EXIT_USAGE)
    header = recording.header
    state = HostState(str(header.get("host") or "?"), label=str(header.get("label") or header.get("host")),
                      demo=bool(header.get("demo")))
    replayer = Replayer(recording, state, speed=args.speed, at_s=args.at)
    # The state at --at (from the last snapshot before it) before the panes are built: they are
    # built from the host's info (which panes have a source).
    replayer.seek(replayer.at_s)
    from console.core.state import HostInfo

    if state.info == HostInfo(state.host, state.label, state.demo):  # --at 0: the host's info is next
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
    from console.core.recording import RecordingError, default_dir
    from console.domain.swap.report import ReportError, render, report_from_recording

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
    elif args.format == "md" and sys.stdout.isatty():
        # To a terminal the Markdown is drawn (headings, tables), not printed as its source: the
        # backslashes that keep host text from being read as Markdown are for a renderer, and a
        # terminal showed every one. Piped or written to a file: the Markdown itself.
        Console(highlight=False).print(Markdown(text))
    else:
        print(text)
    return EXIT_OK


async def _dispatch(args: argparse.Namespace, profile: HostProfile) -> int:
    if args.command == "replay":
        return await _replay(args)
    if args.command == "report":
        return _report(args)
    if args.command in ("serve", "attach") or (args.share and args.command is None):  # pairing (issue 12)
        from console.cli import share as share

        if args.command == "attach":
            return await share.run_attach(args, _run_view)
        if args.command == "serve":
            return await _with_session(args, profile,
                                       lambda session: share.run_serve(args, session, record=not args.no_record))
        return await _with_session(args, profile, lambda session: share.run_shared_app(args, session, _run_view))
    if args.command == "snapshot":
        from console.cli.snapshot import take_snapshot

        async def snap(session: Any) -> int:
            print(json.dumps(await take_snapshot(session), indent=2))
            return EXIT_OK

        return await _with_session(args, profile, snap)
    if args.command == "bench":
        from console.cli.bench import run_bench_cli

        if args.url:
            return await run_bench_cli(args, profile, None)

        async def bench_on_host(session: Any) -> int:
            return await run_bench_cli(args, profile, session)

        return await _with_session(args, profile, bench_on_host)
    if args.command == "fit":
        from console.cli.fit import run_fit

        if not profile.host and not args.demo:
            return await run_fit(args, None)

        async def fit_on_host(session: Any) -> int:
            return await run_fit(args, session)

        return await _with_session(args, profile, fit_on_host)
    if args.command == "diff":
        from console.cli.diff import run_diff

        local_only = not profile.host and not args.demo
        return await run_diff(args, profile, local_only=local_only, with_session=_with_session)
    if args.command == "doctor":
        from console.cli.doctor import format_doctor, run_doctor

        async def doctor(session: Any) -> int:
            report = await run_doctor(session.transport, session.profile, runs=args.runs)
            print(json.dumps(report, indent=2) if args.json else format_doctor(report))
            return EXIT_OK if all(c["ok"] for c in report["checks"][:3]) else EXIT_FAIL

        return await _with_session(args, profile, doctor)

    async def run_app(session: Any) -> int:
        from console.core.recording import default_dir
        from console.ui.app import ConsoleApp

        app = ConsoleApp.for_session(
            session, record=not args.no_record, record_dir=default_dir() / "demo" if session.demo else None,
            screenshot=args.screenshot, screenshot_after_s=args.screenshot_after if args.screenshot else None)
        if session.demo and getattr(args, "demo_scenario", None) == "operator":
            _with_demo_operator(app)
        # SIGTERM (`kill`) ends the app as `q` does: Textual leaves the alternate screen and restores
        # the terminal, then the demo's sandbox is removed on the way out.

        if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, lambda: app.exit(128 + signal.SIGTERM))
        metrics = None
        if getattr(args, "metrics_address", None):  # issue 14: --metrics on the one-host console
            from console.domain.fleet.metrics import start_metrics_server

            try:
                metrics = start_metrics_server([app.state], *args.metrics_address)
            except OSError as exc:
                return _fail(f"--metrics {args.metrics}: {exc.strerror or exc}", EXIT_USAGE)
        try:
            return await _run_view(app, args)
        finally:
            if metrics is not None:
                metrics.close()
            if app.recorder is not None:
                app.recorder.close()
                if app.recorder.path is not None and not args.screenshot:  # said on leaving: where it went
                    print(f"gpuconsole: this session was recorded in {app.recorder.path} "
                          f"(gpuconsole replay FILE; gpuconsole report FILE)", file=sys.__stderr__, flush=True)

    return await _with_session(args, profile, run_app)
