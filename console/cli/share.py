"""`gpuconsole serve`, `gpuconsole attach` and `gpuconsole --share`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import os
import re
import signal
import stat
import sys
from pathlib import Path
from typing import Any

from console.core.state import HostState
from console.share.protocol import clean_name

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def add_parsers(sub: Any, host: argparse.ArgumentParser) -> None:
    serve = sub.add_parser("serve", parents=[host], help="run the core headless and let consoles attach (pairing)")
    serve.add_argument("--socket", metavar="PATH", help="Unix socket (default: $XDG_RUNTIME_DIR/gpuconsole/HOST.sock)")
    serve.add_argument("--listen", metavar="[HOST:]PORT",
                       help="also listen on TCP (127.0.0.1 unless HOST names another address); needs the token")
    serve.add_argument("--web", metavar="[HOST:]PORT", help="serve the console to browsers (textual-serve)")
    serve.add_argument("--invite", metavar="NAME", action="append", default=[], type=_invite_name,
                       help="issue NAME an invite of their own (repeatable), written to a 0600 file whose path is "
                            "printed (never the token): who presents it is NAME, bound at first use to where it "
                            "came from (the two-person rule needs two people, not two names)")
    for action in serve._actions:  # the host options' --demo-scenario, said in serve's own help (issue 35, item 2)
        if action.dest == "demo_scenario":
            action.help = ("with --demo: which story the simulated host plays ('drive': nothing moves until the "
                           "driver acts; with --require-approval and --invite NAME, NAME approves the stop)")
    serve.add_argument("--no-record", action="store_true", default=argparse.SUPPRESS,
                       help="do not record this session (as before the subcommand)")
    serve.add_argument("--metrics", metavar="127.0.0.1:PORT", default=argparse.SUPPRESS,
                       help="also export the host's readings for Prometheus at this address (loopback only)")
    attach = sub.add_parser("attach", help="open the console as a client of a `gpuconsole serve`")
    attach.add_argument("address", nargs="?", metavar="ADDRESS",
                        help="socket path, unix:PATH or HOST:PORT (default: the one core serving on this machine)")
    attach.add_argument("--name", help="how the others see you (default: your user name)")
    attach.add_argument("--deployment", metavar="NAME",
                        help="attach to a deployment served by `gpuconsole --deployment NAME --share` (issue 37)")
    attach.add_argument("--token", help="the serve's token (TCP); better GPUCONSOLE_TOKEN or --token-file "
                                        "(a command line is visible to every local user in ps)")
    attach.add_argument("--token-file", metavar="PATH", help="read the token from this file")
    attach.add_argument("--wait", action="store_true", help="wait for the core to (re)start instead of exiting")
    attach.add_argument("--follow", action="store_true", help="mirror the driver's maximized pane")
    attach.add_argument("--observe", action="store_true",
                        help="join as an observer even if nobody drives (ask to drive when you mean to)")


def add_share_options(parser: argparse.ArgumentParser) -> None:
    """`--invite` beside the top level's `--share` (issue 35, item 2)."""
    parser.add_argument("--invite", metavar="NAME", action="append", default=[], type=_invite_name,
                        help="with --share: issue NAME an invite (a 0600 file; its path is shown) so that a second "
                             "person can attach and approve under --require-approval (repeatable)")


def _invite_name(value: str) -> str:
    name = value.strip()
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,32}", name) or name in ("anonymous", "web"):
        raise argparse.ArgumentTypeError(f"expected a person's name (letters, digits, . @ - _), got {value[:40]!r}")
    return name


MAX_TOKEN_FILE = 4096  # a token is 32 characters; a file far longer is not a token file


def read_token_file(path: str) -> str:
    """The token in `path`: a regular file, readable by its owner only, at most `MAX_TOKEN_FILE`
    bytes (issue 34, item 11: /dev/zero grew to 3 GB, a FIFO hung, a 0644 file passed). ValueError
    with one line otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        raise ValueError(f"--token-file {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"--token-file {path}: not a regular file")
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise ValueError(f"--token-file {path}: readable by others (mode {stat.S_IMODE(info.st_mode):04o}); "
                             f"chmod 600 it")
        data = os.read(fd, MAX_TOKEN_FILE + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_TOKEN_FILE:
        raise ValueError(f"--token-file {path}: longer than {MAX_TOKEN_FILE} bytes: not a token file")
    try:
        token = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise ValueError(f"--token-file {path}: not a token (not ASCII)") from None
    if not token or len(token) > 128 or any(c.isspace() for c in token):
        raise ValueError(f"--token-file {path}: not a token (one word of at most 128 characters)")
    return token


def parse_listen(value: str, what: str, *, any_port: bool = False) -> tuple[str, int]:
    """`PORT` or `HOST:PORT` (`[::1]:PORT`); port 0 (any free one) only with `any_port`;
    ValueError with one line otherwise."""
    host, sep, port = value.rpartition(":")
    host = host.strip("[]") if sep else "127.0.0.1"
    if not port.isdigit() or not (0 if any_port else 1) <= int(port) < 65536:
        raise ValueError(f"{what} {value!r}: expected [HOST:]PORT")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if host != "localhost":
            raise ValueError(f"{what} {value!r}: HOST must be an IP address") from None
    return host, int(port)


def _socket_path(given: str | None, host: str, *, session_only: bool = False) -> Path:
    """`--socket`, else the host's socket; `session_only` (a demo, `--share`): this session's own
    (every demo's host is 127.0.0.1: they had shared one socket name; issue 35, item 3)."""
    from console.share.server import socket_path_for

    if given:
        return Path(os.path.abspath(given))
    return socket_path_for(f"{host}-{os.getpid()}" if session_only else host)


def _logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    share = logging.getLogger("gpuconsole.share")
    share.addHandler(handler)
    share.setLevel(logging.INFO)


async def run_serve(args: argparse.Namespace, session: Any, *, record: bool) -> int:
    from console.core.recording import Recorder, default_dir
    from console.core.runner import HostRunner
    from console.domain.fleet.metrics import MetricsAddressError, parse_metrics_address, start_metrics_server
    from console.domain.swap.controller import SwapController
    from console.share.server import ShareError, ShareServer

    try:
        listen = parse_listen(args.listen, "--listen", any_port=True) if args.listen else None
        web_at = parse_listen(args.web, "--web") if args.web else None
        metrics_at = parse_metrics_address(args.metrics) if getattr(args, "metrics", None) else None
    except (ValueError, MetricsAddressError) as exc:
        print(f"gpuconsole: {exc}", file=sys.stderr)
        return EXIT_USAGE
    _logging()
    state = HostState(session.profile.host or "local", label=session.transport.label, demo=session.demo)
    runner = HostRunner(session, state, swap=SwapController)
    # The recorder first: the session's first event is in the recording (issue 20).
    recorder = Recorder(state, default_dir() / "demo" if session.demo else None).start() if record else None
    runner.announce()
    server = ShareServer(state, runner, recorder=recorder)
    invited = {clean_name(n): server.invite(n) for n in getattr(args, "invite", None) or []}
    try:
        sock = _socket_path(args.socket, state.host, session_only=session.demo)
        await server.start(unix_path=sock, tcp=listen)
        token_files = _write_tokens(sock, server.token, invited)
    except (ShareError, OSError) as exc:
        print(f"gpuconsole: cannot serve: {exc}", file=sys.stderr)
        return EXIT_FAIL
    web = metrics = None
    try:
        if metrics_at is not None:  # issue 14: Prometheus out, from the headless core too
            metrics = start_metrics_server([state], *metrics_at)
            print(f"  metrics: http://{metrics_at[0]}:{metrics_at[1]}/metrics", flush=True)
        if web_at is not None:
            from console.ui.web import WebShare

            web = await WebShare(sock, web_at[0], web_at[1], server.token, owner=server.owner,
                                 people={t: n for n, t in invited.items()}, token_files=token_files).start()
            for name in invited:  # a person's first browser address: in their file too, never printed
                _write_secret(token_files[name].with_suffix(".url"), web.url_for(name))
        print(f"gpuconsole serve: {state.label}", flush=True)
        print(f"  attach:  gpuconsole attach {sock}", flush=True)
        # The token goes in a file (0600) or the environment, never on a command line: every local
        # user reads command lines in `ps` (issue 21, item 16).
        if server.tcp_address is not None:
            host, port = server.tcp_address
            print(f"  tcp:     gpuconsole attach {host}:{port} --token-file {token_files['']}", flush=True)
        if web is not None:
            print(f"  browser: {web.url}", flush=True)
        # An invite goes where only its person should read it, never on the operator's terminal
        # (issue 34, item 2): its file's path is printed, and who issued it is the audit's.
        for name in invited:
            print(f"  {name}: {invite_line(name, sock, token_files[name], server.owner)}"
                  + (f"; browser address in {token_files[name].with_suffix('.url')}" if web is not None else ""),
                  flush=True)
        if server.tcp_address is None and web is None and not invited:
            print("  (no token: the Unix socket is this user's only)", flush=True)
        await runner.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        return EXIT_OK
    except OSError as exc:
        print(f"gpuconsole: cannot serve: {exc}", file=sys.stderr)
        return EXIT_FAIL
    finally:
        for path in token_files.values():
            for leftover in (path, path.with_suffix(".url")):
                with contextlib.suppress(OSError):
                    leftover.unlink()
        if metrics is not None:
            metrics.close()
        if web is not None:
            await web.close()
        await server.close()
        await runner.close()
        if recorder is not None:
            recorder.close()
            say_recorded(recorder.path)


def say_recorded(path: Path | None) -> None:
    """On leaving: where this session's recording went (issue 35 item 10)."""
    if path is not None:
        print(f"gpuconsole: this session was recorded in {path} (gpuconsole replay FILE; gpuconsole report FILE)",
              file=sys.__stderr__, flush=True)


def invite_line(name: str, sock: Path, token_file: Path, owner: str) -> str:
    """What the operator is told of an invite: where it is and the command its person runs."""
    return (f"invite issued by {owner}, in {token_file} (0600; hand the file to {name}, who attaches with: "
            f"gpuconsole attach {sock} --token-file {token_file})")


def _write_secret(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        os.fchmod(fh.fileno(), 0o600)
        fh.write(value + "\n")


def _write_tokens(sock: Path, token: str, invited: dict[str, str]) -> dict[str, Path]:
    """The serve's token ('' key) and each invited person's, each in a 0600 file by the socket
    (a directory of this user's, 0700): for `attach --token-file` and a browser tab's attach."""
    files: dict[str, Path] = {}
    for name, value in {"": token, **invited}.items():
        path = sock.with_name(sock.name + (f".{name.replace(' ', '_')}" if name else "") + ".token")
        _write_secret(path, value)
        files[name] = path
    return files


async def run_attach(args: argparse.Namespace, run_view: Any) -> int:
    from console.share.client import AttachError, RemoteControl, attach, find_socket
    from console.share.server import runtime_dir
    from console.ui.attach_app import CORE_GONE_EXIT, SharedConsoleApp

    name = clean_name(args.name) if args.name else None
    token = args.token or os.environ.get("GPUCONSOLE_TOKEN", "")
    if getattr(args, "token_file", None):
        try:
            token = read_token_file(args.token_file)
        except ValueError as exc:
            print(f"gpuconsole: {exc}", file=sys.stderr)
            return EXIT_USAGE
    waited = False
    while True:
        try:
            address = args.address or find_socket(runtime_dir())
            client = await attach(address, name=name, token=token, observe=getattr(args, "observe", False))
        except AttachError as exc:
            if args.wait and not exc.final:
                if not waited:
                    print(f"gpuconsole: {exc}; waiting for it (--wait)", file=sys.stderr)
                    waited = True
                await asyncio.sleep(1.0)
                continue
            print(f"gpuconsole: {exc}", file=sys.stderr)
            return EXIT_FAIL
        waited = False
        app = SharedConsoleApp(client.state, RemoteControl(client), seat=RemoteControl(client), follow=args.follow,
                               start=client.pump, close=client.close, mode="attach",
                               screenshot=args.screenshot,
                               screenshot_after_s=args.screenshot_after if args.screenshot else None)
        client.on_lost = app.core_lost
        code = await run_view(app, args)
        if code != CORE_GONE_EXIT:
            return code
        if not args.wait:
            print(f"gpuconsole: {client.lost or 'the core is gone'}", file=sys.stderr)
            return EXIT_FAIL
        print(f"gpuconsole: {client.lost}; waiting for it to come back (--wait)", file=sys.stderr)


async def run_shared_app(args: argparse.Namespace, session: Any, run_view: Any) -> int:
    """`gpuconsole --host … --share`: the usual console, and its core also serves."""
    from console.core.recording import default_dir
    from console.share.client import default_name
    from console.share.server import ShareError, ShareServer
    from console.ui.attach_app import SharedConsoleApp

    app = SharedConsoleApp.for_session(
        session, record=not args.no_record, record_dir=default_dir() / "demo" if session.demo else None,
        screenshot=args.screenshot, screenshot_after_s=args.screenshot_after if args.screenshot else None,
        seat=None, exit_when_core_goes=False)
    server = ShareServer(app.state, app.runner)
    invited = {clean_name(n): server.invite(n) for n in getattr(args, "invite", None) or []}
    token_files: dict[str, Path] = {}
    try:
        sock = _socket_path(None, app.state.host, session_only=True)  # this session's own (issue 35, item 3)
        await server.start(unix_path=sock)
        token_files = {n: f for n, f in _write_tokens(sock, server.token, invited).items() if n}
        sock.with_name(sock.name + ".token").unlink()  # no TCP here: the serve's token is of no use
    except (ShareError, OSError) as exc:
        print(f"gpuconsole: cannot share: {exc}", file=sys.stderr)
        return EXIT_FAIL
    seat = server.local(default_name())
    app.control = app.seat = seat
    # The address on screen while sharing (issue 35, item 3), and on stderr for the scrollback.
    lines = [f"sharing: others attach with: gpuconsole attach {sock}"]
    lines += [f"{name}: {invite_line(name, sock, path, server.owner)}" for name, path in token_files.items()]
    app.share_lines, app.share_address = tuple(lines), str(sock)
    for line in lines:
        print(f"gpuconsole: {line}", file=sys.stderr, flush=True)
    try:
        return int(await run_view(app, args))
    finally:
        for path in token_files.values():
            with contextlib.suppress(OSError):
                path.unlink()
        with contextlib.suppress(Exception):
            await server.close()
        print(f"gpuconsole: sharing ended ({sock} removed)", file=sys.stderr, flush=True)
        if app.recorder is not None:
            app.recorder.close()
            if not args.screenshot:
                say_recorded(app.recorder.path)
