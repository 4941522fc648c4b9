"""The fleet modes of the command line: `--host A --host B`, `--group NAME`, `--demo-hosts N`
(many hosts over SSH) and `--prometheus URL` (the fleet read from an existing Prometheus)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from console.cli.options import MAX_DEMO_HOSTS
from console.config import ConfigError, HostProfile, load_config

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _fail(message: str, code: int = EXIT_FAIL) -> int:
    print(f"gpuconsole: {message}", file=sys.stderr)
    return code


def fleet_profiles(args: argparse.Namespace) -> list[HostProfile]:
    """The profiles named by --group and the --host flags, flags on top (ConfigError: bad input)."""
    config = load_config(Path(args.config) if args.config else None)
    profiles: list[HostProfile] = []
    if args.group:
        profiles.extend(config.group(args.group))
    for host in getattr(args, "hosts", None) or []:
        profiles.append(config.pick(None, host))
    overrides = {k: getattr(args, k, None) for k in (
        "port", "user", "identity", "known_hosts", "model_dir", "repo_id", "unit",
        "compare_unit", "log_file", "server_port", "connect_timeout_s")}
    return [p.with_overrides(overrides) for p in profiles]


def run_fleet_cli(args: argparse.Namespace) -> int:
    """Validate, start the simulators if asked, and run the fleet console."""
    # The fleet's modules are loaded once a fleet is asked for: the parser's options (every
    # command's --help and start) need none of them.
    from console.domain.fleet.metrics import MetricsAddressError, parse_metrics_address
    from console.domain.fleet.prom import PromQueryError, check_match, check_url

    metrics_addr = None
    if args.metrics:
        try:
            metrics_addr = parse_metrics_address(args.metrics)
        except MetricsAddressError as exc:
            return _fail(str(exc), EXIT_USAGE)
    if args.prometheus:
        try:
            check_url(args.prometheus)
            if args.match:
                check_match(args.match)
        except PromQueryError as exc:
            return _fail(str(exc), EXIT_USAGE)
        if not args.prometheus_interval > 0:
            return _fail("--prometheus-interval must be > 0", EXIT_USAGE)
    elif args.match:
        return _fail("--match needs --prometheus URL", EXIT_USAGE)
    if args.demo_hosts is not None and not 1 <= args.demo_hosts <= MAX_DEMO_HOSTS:
        return _fail(f"--demo-hosts must be 1-{MAX_DEMO_HOSTS}", EXIT_USAGE)
    try:
        profiles = [] if args.prometheus else fleet_profiles(args)
        config = load_config(Path(args.config) if args.config else None)
    except ConfigError as exc:
        return _fail(str(exc), EXIT_USAGE)

    sim = None
    if args.demo_hosts:
        from console.demo.fleet_demo import FleetSimulator

        sim = FleetSimulator(args.demo_hosts, speed=args.demo_speed or 1.0, oom_every=7)
        try:
            profiles = sim.start() + profiles
        except Exception as exc:  # noqa: BLE001 - the demo failing to start is one line, too
            sim.stop()
            return _fail(f"the simulated hosts did not start: {exc}")
    try:
        if args.prometheus:
            return asyncio.run(_run_prometheus(args, config, metrics_addr))
        return asyncio.run(_run_ssh_fleet(args, profiles, metrics_addr))
    except KeyboardInterrupt:
        return 130
    finally:
        if sim is not None:
            sim.stop()


async def _run_view(app: Any, args: argparse.Namespace) -> int:
    if args.screenshot:
        width, height = (int(x) for x in args.screenshot_size.lower().split("x"))
        result = await app.run_async(headless=True, size=(width, height))
    else:
        result = await app.run_async()
    return int(result or 0)


def _start_metrics(states: Any, addr: tuple[str, int] | None) -> Any:
    from console.domain.fleet.metrics import start_metrics_server

    if addr is None:
        return None
    return start_metrics_server(states, *addr)


async def _run_ssh_fleet(args: argparse.Namespace, profiles: list[HostProfile],
                         metrics_addr: tuple[str, int] | None) -> int:
    from console.domain.fleet.hosts import Fleet
    from console.ui.app import FleetApp

    fleet = Fleet(profiles, accept_new_host_key=bool(args.accept_new_host_key),
                  demo=bool(args.demo_hosts))
    try:
        metrics = _start_metrics(lambda: fleet.states, metrics_addr)
    except OSError as exc:
        return _fail(f"--metrics {args.metrics}: {exc.strerror or exc}", EXIT_USAGE)

    def host_for(key: str) -> Any:
        host = fleet.hosts.get(key)
        return None if host is None else (host.state, host.runner, None)

    deployment_lines = None
    if not args.demo_hosts:  # issue 37: the config's deployments whose hosts this fleet holds, one row each
        from console.domain.deploy.fleetrows import rows_for

        deployments = load_config(Path(args.config) if args.config else None).deployments
        if deployments:
            deployment_lines = rows_for(deployments, lambda: {h.profile.name: h.state for h in fleet.hosts.values()})
    app = FleetApp(fleet.states, host_for=host_for, start=fleet.start, close=fleet.close,
                   title=f"{len(fleet.hosts)} hosts over SSH", screenshot=args.screenshot,
                   screenshot_after_s=args.screenshot_after if args.screenshot else None,
                   deployment_lines=deployment_lines)
    try:
        return await _run_view(app, args)
    finally:
        if metrics is not None:
            metrics.close()


async def _run_prometheus(args: argparse.Namespace, config: Any, metrics_addr: tuple[str, int] | None) -> int:
    from console.domain.fleet.prom import PrometheusFleet
    from console.ui.app import ConsoleApp, FleetApp

    fleet = PrometheusFleet(args.prometheus, match=args.match, interval_s=args.prometheus_interval,
                            config=config, accept_new_host_key=bool(args.accept_new_host_key),
                            ssh_to_labels=bool(getattr(args, "ssh_to_labels", False)))
    app: ConsoleApp | None = None

    def host_for(key: str) -> Any:
        return fleet.drill_down(key)

    def on_new_hosts(states: Any) -> None:
        if app is not None and app.fleet_screen is not None:
            app.fleet_screen.add_states(states)

    fleet.on_new_hosts = on_new_hosts
    try:
        metrics = _start_metrics(lambda: list(fleet.states.values()), metrics_addr)
    except OSError as exc:
        return _fail(f"--metrics {args.metrics}: {exc.strerror or exc}", EXIT_USAGE)
    app = FleetApp([], host_for=host_for, start=fleet.run, close=fleet.close,
                   title=f"Prometheus {fleet.base_url}", screenshot=args.screenshot,
                   screenshot_after_s=args.screenshot_after if args.screenshot else None)
    try:
        return await _run_view(app, args)
    finally:
        if metrics is not None:
            metrics.close()
