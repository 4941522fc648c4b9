"""`gpuconsole --deployment NAME` and `--demo-deployment multinode|pd` (issue 37).

    --deployment NAME          the [deployments.NAME] of the config, on one screen
    --demo-deployment KIND     simulated hosts forming one deployment (console/demo/hostsim/deployment.py)
    --once                     no screen: watch until the nodes have answered (at most --wait
                               seconds), print the deployment as text, exit 0 when it is ready,
                               1 when not (scripts, CI)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from console.cli.share import parse_listen, read_token_file
from console.config import ConfigError, load_config
from console.core.recording import RecordingError
from console.domain.deploy.recording import ReplayWatch, is_deployment_recording
from console.domain.deploy.swap import DeploymentSwap, format_report
from console.domain.deploy.text import format_deployment
from console.domain.deploy.watch import DeploymentWatch
from console.domain.swap.controller import audit_path, default_who
from console.share.client import AttachError
from console.share.deployment import AttachedWatch

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _fail(message: str, code: int = EXIT_FAIL) -> int:
    print(f"gpuconsole: {message}", file=sys.stderr)
    return code


async def _swap_once(watch: Any, kind: str, yes: bool, wait_s: float, side: str | None = None) -> int:
    demo = any(h.state.demo for h in watch.fleet.hosts.values())
    own = watch.audit_file  # a demo run's own log, else the user's
    swap = DeploymentSwap(watch, who=default_who(), audit_file=own or audit_path(demo=demo))
    try:
        print("\n".join(swap.preview(kind, side)))
    except ValueError as exc:  # a node the swap cannot take (a container, no unit): one line, nothing ran
        return _fail(f"{watch.deployment.name}: {exc}; nothing ran", EXIT_USAGE)
    if not yes:
        print("nothing ran: add --yes to run these commands", file=sys.stderr)
        return EXIT_USAGE
    await watch.start()
    try:
        deadline = time.monotonic() + max(0.0, wait_s)
        while kind == "swap" and time.monotonic() < deadline:  # let the gate see every node first
            await watch.probe_all()
            if not swap.gate() and (side is None or "not read yet" not in (swap.side_refusal(side, kind) or "")):
                break
            await asyncio.sleep(2.0)
        run = await swap.run(kind, confirmed=True, side=side)
        print(format_report(run, watch.deployment))
        return EXIT_OK if run.outcome == "ready" else EXIT_FAIL
    finally:
        await watch.close()


async def _once(watch: Any, wait_s: float) -> int:
    await watch.start()
    try:
        deadline = time.monotonic() + max(0.0, wait_s)
        while time.monotonic() < deadline:
            view = watch.view()
            if view.status.status in ("ready", "failed"):
                break
            await asyncio.sleep(0.5)
        await watch.probe_all()
        view = watch.view()
        print(format_deployment(view, watch.checks()))
        return EXIT_OK if view.status.status == "ready" else EXIT_FAIL
    finally:
        await watch.close()


def _console_app() -> Any:
    from console.ui.app import ConsoleApp  # the Textual load, only when a screen is shown

    return ConsoleApp


def deployment_replay_app(args: argparse.Namespace) -> Any:
    """`gpuconsole replay DIR` of a deployment recording: its app, an exit code (a bad recording: one
    line, 2), or None when DIR is not a deployment's recording (the host replay reads it)."""
    path = Path(args.file)
    if not is_deployment_recording(path):
        return None
    try:
        watch = ReplayWatch(path, speed=args.speed, at_s=args.at)
    except RecordingError as exc:
        return _fail(str(exc), EXIT_USAGE)
    return _console_app().for_deployment_replay(
        watch, screenshot=getattr(args, "screenshot", None),
        screenshot_after_s=getattr(args, "screenshot_after", None) if getattr(args, "screenshot", None) else None)


def run_deploy_attach(args: argparse.Namespace) -> int:
    """`gpuconsole attach --deployment NAME`: the served deployment's screen, from its nodes' shared
    states (console/share/deployment.py); this console watches and approves, the serving one swaps."""
    try:
        token = read_token_file(args.token_file) if getattr(args, "token_file", None) else \
            (getattr(args, "token", None) or os.environ.get("GPUCONSOLE_TOKEN", ""))
        watch = AttachedWatch.from_manifest(args.deployment, who=getattr(args, "name", None), token=token)
    except (AttachError, ValueError) as exc:
        return _fail(str(exc), EXIT_USAGE)
    app = _console_app().for_deployment(watch, attached=True)
    try:
        return int(app.run() or 0)
    except KeyboardInterrupt:
        return 130


def run_deploy_cli(args: argparse.Namespace) -> int:
    if getattr(args, "deployment", None) and getattr(args, "demo_deployment", None):
        return _fail("give --deployment NAME or --demo-deployment KIND, not both", EXIT_USAGE)
    web_at = None
    if getattr(args, "deploy_web", None):
        if not getattr(args, "share", False) or not (args.deployment or args.demo_deployment):
            return _fail("--web goes with --deployment NAME --share (a host is served to browsers by "
                         "gpuconsole serve --web)", EXIT_USAGE)
        try:
            web_at = parse_listen(args.deploy_web, "--web")
        except ValueError as exc:
            return _fail(str(exc), EXIT_USAGE)
    if not 0 <= args.wait <= 86400:
        return _fail(f"--wait must be 0-86400 seconds, got {args.wait:g}", EXIT_USAGE)
    sim = None
    try:
        if args.demo_deployment:
            from console.demo.hostsim.deployment import DECODE_TUNED_UNIT, DeploymentSimThread

            # swapped from the console: nothing moves on the hosts but what the swap runs
            sim = DeploymentSimThread(args.demo_deployment, speed=getattr(args, "demo_speed", None) or 1.0,
                                      operator=not (args.swap or args.rollback))
            try:
                started = sim.start()
            except Exception as exc:  # noqa: BLE001 - the demo failing to start is one line
                return _fail(f"the deployment simulator did not start: {exc}")
            cfg = Path(tempfile.mkdtemp(prefix="gpuconsole-deploy-")) / "config.toml"
            # --side decode: the decode node's unit is the demo's flag-only change (one side may go alone)
            cfg.write_text(started.config_toml(
                "demo", decode_unit=DECODE_TUNED_UNIT if getattr(args, "side", None) == "decode" else None))
            config_path: Path | None = cfg
            name = "demo"
        else:
            config_path = Path(args.config) if args.config else None
            name = args.deployment
        try:
            deployment = load_config(config_path).deployment(name)
        except ConfigError as exc:
            return _fail(str(exc), EXIT_USAGE)
        watch = DeploymentWatch(deployment, accept_new_host_key=bool(getattr(args, "accept_new_host_key", False)),
                                demo=sim is not None, audit_file=sim.audit_file if sim is not None else None)
        if getattr(args, "invite", None) and not getattr(args, "share", False):
            return _fail("--invite goes with --share (the deployment served to `attach --deployment`)", EXIT_USAGE)
        if getattr(args, "side", None) and not (args.swap or args.rollback):
            return _fail("--side goes with --swap or --rollback", EXIT_USAGE)
        if args.swap or args.rollback:
            if not args.once:
                return _fail("--swap and --rollback run with --once (the screen swaps with its S key)", EXIT_USAGE)
            return asyncio.run(_swap_once(watch, "rollback" if args.rollback else "swap", args.yes, args.wait,
                                          getattr(args, "side", None)))
        if args.once:
            return asyncio.run(_once(watch, args.wait))
        app = _console_app().for_deployment(watch, screenshot=getattr(args, "screenshot", None),
                                        screenshot_after_s=getattr(args, "screenshot_after", 3.0) or 3.0,
                                        demo=sim is not None, share=bool(getattr(args, "share", False)),
                                        record=not getattr(args, "no_record", False),
                                        invite=tuple(getattr(args, "invite", None) or ()), web=web_at)
        if getattr(args, "screenshot", None):
            width, height = (int(x) for x in str(getattr(args, "screenshot_size", "120x40")).lower().split("x"))
            return int(asyncio.run(app.run_async(headless=True, size=(width, height))) or 0)
        return int(app.run() or 0)
    except KeyboardInterrupt:
        return 130
    finally:
        if sim is not None:
            sim.stop()
