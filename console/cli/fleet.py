"""The fleet modes of the command line: `--host A --host B`, `--group NAME`, `--demo-hosts N`
(many hosts over SSH) and `--prometheus URL` (the fleet read from an existing Prometheus)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from console.config import ConfigError, HostProfile, load_config
from console.domain.deploy.fleetrows import rows_for
from console.domain.fleet.metrics import MetricsAddressError, parse_metrics_address, start_metrics_server
from console.domain.fleet.prom import PrometheusFleet, PromQueryError, check_match, check_url

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
MAX_DEMO_HOSTS = 200


def _demo_hosts(text: str) -> int:
    """1-MAX_DEMO_HOSTS, refused at the edge (`--demo-hosts 0` opened this machine's console)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text[:40]!r}") from None
    if not 1 <= value <= MAX_DEMO_HOSTS:
        raise argparse.ArgumentTypeError(f"must be 1-{MAX_DEMO_HOSTS}, got {value}")
    return value


def add_fleet_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("fleet options")
    g.add_argument("--group", metavar="NAME", help="open every host of a [groups] entry of the config")
    g.add_argument("--demo-hosts", type=_demo_hosts, metavar="N", help="a fleet of N simulated GPU hosts")
    g.add_argument("--prometheus", metavar="URL", help="read the fleet from this Prometheus (its HTTP API)")
    g.add_argument("--match", metavar="LABELS", help='label matchers for --prometheus, e.g. job="gpu",dc="a"')
    g.add_argument("--ssh-to-labels", action="store_true",
                   help="with --prometheus: Enter opens SSH to a host named by a label even without a profile")
    g.add_argument("--prometheus-interval", type=float, default=15.0, metavar="SECONDS",
                   help="seconds between queries (15: a usual scrape interval; querying faster shows nothing new)")
    g.add_argument("--metrics", metavar="127.0.0.1:PORT",
                   help="serve every host's readings to Prometheus on this loopback address")


def is_fleet(args: argparse.Namespace) -> bool:
    hosts = getattr(args, "hosts", None) or []
    return bool(len(hosts) > 1 or getattr(args, "group", None) or getattr(args, "demo_hosts", None)
                or getattr(args, "prometheus", None))


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
    if addr is None:
        return None

    return start_metrics_server(states, *addr)


async def _run_ssh_fleet(args: argparse.Namespace, profiles: list[HostProfile],
                         metrics_addr: tuple[str, int] | None) -> int:
    from console.ui.app import FleetApp
    from console.domain.fleet.hosts import Fleet

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
