"""`gpuconsole serve`, `gpuconsole attach` and `gpuconsole --share`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from console.share.protocol import clean_name

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def add_parsers(sub: Any, host: argparse.ArgumentParser) -> None:
    serve = sub.add_parser("serve", parents=[host], help="run the core headless and let consoles attach (pairing)")
    serve.add_argument("--socket", metavar="PATH", help="Unix socket (default: $XDG_RUNTIME_DIR/gpuconsole/HOST.sock)")
    serve.add_argument("--listen", metavar="[HOST:]PORT",
                       help="also listen on TCP (127.0.0.1 unless HOST names another address); needs the token")
    serve.add_argument("--web", metavar="[HOST:]PORT", help="serve the console to browsers (textual-serve)")
    serve.add_argument("--invite", metavar="NAME", action="append", default=[],
                       help="issue NAME a token of their own (repeatable): who presents it is NAME, and only they "
                            "(the two-person rule needs two people, not two names)")
    serve.add_argument("--no-record", action="store_true", default=argparse.SUPPRESS,
                       help="do not record this session (as before the subcommand)")
    serve.add_argument("--metrics", metavar="127.0.0.1:PORT", default=argparse.SUPPRESS,
                       help="also export the host's readings for Prometheus at this address (loopback only)")
    attach = sub.add_parser("attach", help="open the console as a client of a `gpuconsole serve`")
    attach.add_argument("address", nargs="?", metavar="ADDRESS",
                        help="socket path, unix:PATH or HOST:PORT (default: the one core serving on this machine)")
    attach.add_argument("--name", help="how the others see you (default: your user name)")
    attach.add_argument("--token", help="the serve's token (TCP); better GPUCONSOLE_TOKEN or --token-file "
                                        "(a command line is visible to every local user in ps)")
    attach.add_argument("--token-file", metavar="PATH", help="read the token from this file")
    attach.add_argument("--wait", action="store_true", help="wait for the core to (re)start instead of exiting")
    attach.add_argument("--follow", action="store_true", help="mirror the driver's maximized pane")


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


def _socket_path(given: str | None, host: str) -> Path:
    from console.share.server import socket_path_for

    return Path(os.path.abspath(given)) if given else socket_path_for(host)


def _logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    share = logging.getLogger("gpuconsole.share")
    share.addHandler(handler)
    share.setLevel(logging.INFO)


async def run_serve(args: argparse.Namespace, session: Any, *, record: bool) -> int:
    from console.core.recording import Recorder, default_dir
    from console.core.runner import HostRunner
    from console.core.state import HostState
    from console.fleet.metrics import MetricsAddressError, parse_metrics_address, start_metrics_server
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
    runner = HostRunner(session, state)
    # The recorder first: the session's first event is in the recording (issue 20).
    recorder = Recorder(state, default_dir() / "demo" if session.demo else None).start() if record else None
    runner.announce()
    server = ShareServer(state, runner)
    invited = {clean_name(n): server.invite(n) for n in getattr(args, "invite", None) or []}
    try:
        sock = _socket_path(args.socket, state.host)
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
            from console.share.web import WebShare

            web = await WebShare(sock, web_at[0], web_at[1], server.token,
                                 people={t: n for n, t in invited.items()}, token_files=token_files).start()
        print(f"gpuconsole serve: {state.label}", flush=True)
        print(f"  attach:  gpuconsole attach {sock}", flush=True)
        # The token goes in a file (0600) or the environment, never on a command line: every local
        # user reads command lines in `ps` (issue 21, item 16).
        if server.tcp_address is not None:
            host, port = server.tcp_address
            print(f"  tcp:     gpuconsole attach {host}:{port} --token-file {token_files['']}", flush=True)
        if web is not None:
            print(f"  browser: {web.url}", flush=True)
        for name, token in invited.items():
            print(f"  {name}: GPUCONSOLE_TOKEN={token} (theirs alone: give it to {name}"
                  + (f"; browser {web.url_with(token)}" if web is not None else "") + ")", flush=True)
        if server.tcp_address is None and web is None:
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
            with contextlib.suppress(OSError):
                path.unlink()
        if metrics is not None:
            metrics.close()
        if web is not None:
            await web.close()
        await server.close()
        await runner.close()
        if recorder is not None:
            recorder.close()


def _write_tokens(sock: Path, token: str, invited: dict[str, str]) -> dict[str, Path]:
    """The serve's token ('' key) and each invited person's, each in a 0600 file by the socket
    (a directory of this user's, 0700): for `attach --token-file` and a browser tab's attach."""
    files: dict[str, Path] = {}
    for name, value in {"": token, **invited}.items():
        path = sock.with_name(sock.name + (f".{name}" if name else "") + ".token")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            os.fchmod(fh.fileno(), 0o600)
            fh.write(value + "\n")
        files[name] = path
    return files


async def run_attach(args: argparse.Namespace, run_view: Any) -> int:
    from console.share.app import CORE_GONE_EXIT, SharedConsoleApp
    from console.share.client import AttachError, RemoteControl, attach, find_socket
    from console.share.server import runtime_dir

    name = clean_name(args.name) if args.name else None
    token = args.token or os.environ.get("GPUCONSOLE_TOKEN", "")
    if getattr(args, "token_file", None):
        try:
            token = Path(args.token_file).read_text().strip()[:128]  # noqa: ASYNC240 - a small local file, once
        except (OSError, UnicodeDecodeError) as exc:
            print(f"gpuconsole: --token-file {args.token_file}: {exc.strerror if isinstance(exc, OSError) else exc}",
                  file=sys.stderr)
            return EXIT_USAGE
    waited = False
    while True:
        try:
            address = args.address or find_socket(runtime_dir())
            client = await attach(address, name=name, token=token)
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
    from console.share.app import SharedConsoleApp
    from console.share.client import default_name
    from console.share.server import ShareError, ShareServer, socket_path_for

    app = SharedConsoleApp.for_session(
        session, record=not args.no_record, record_dir=default_dir() / "demo" if session.demo else None,
        screenshot=args.screenshot, screenshot_after_s=args.screenshot_after if args.screenshot else None,
        seat=None, exit_when_core_goes=False)
    server = ShareServer(app.state, app.runner)
    try:
        sock = socket_path_for(app.state.host)
        await server.start(unix_path=sock)
    except (ShareError, OSError) as exc:
        print(f"gpuconsole: cannot share: {exc}", file=sys.stderr)
        return EXIT_FAIL
    seat = server.local(default_name())
    app.control = app.seat = seat
    print(f"gpuconsole: sharing; others attach with: gpuconsole attach {sock}", file=sys.stderr, flush=True)
    try:
        return int(await run_view(app, args))
    finally:
        with contextlib.suppress(Exception):
            await server.close()
        if app.recorder is not None:
            app.recorder.close()
