"""The command line's option groups that every start parses (the fleet's, the deployment's) and
the two questions asked of every parse: is this a fleet, is this a deployment. Only argparse here:
`gpuconsole --help` and each headless command start without loading the fleet or the deployment
(console/cli/fleet.py, console/cli/deploy.py load theirs once one is asked for)."""

from __future__ import annotations

import argparse

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


def add_deploy_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("deployment options (one model over several hosts)")
    g.add_argument("--deployment", metavar="NAME", help="open a [deployments.NAME] of the config on one screen")
    g.add_argument("--demo-deployment", choices=["multinode", "pd"],
                   help="a simulated deployment: two nodes over --nnodes 2, or prefill/decode behind a router")
    g.add_argument("--once", action="store_true",
                   help="with --deployment: print the deployment as text once and exit (0: ready)")
    g.add_argument("--wait", type=float, default=30.0, metavar="SECONDS",
                   help="with --once: how long to let the nodes answer first (default 30)")
    g.add_argument("--swap", action="store_true",
                   help="with --once: swap every node from its compare_unit to its unit (prints the commands; "
                        "runs them only with --yes), then print the report")
    g.add_argument("--rollback", action="store_true", help="with --once: the swap back, every node")
    g.add_argument("--side", choices=["prefill", "decode"],
                   help="with --swap/--rollback on a pd deployment: that side alone, behind the router "
                        "(refused when the two sides would run different weights)")
    g.add_argument("--yes", action="store_true", help="confirm the --swap/--rollback printed before it")
    g.add_argument("--web", metavar="[HOST:]PORT", dest="deploy_web",
                   help="with --deployment --share: the deployment to browsers too (each tab attaches as its "
                        "person; the addresses in 0600 files, their paths shown)")


def is_deployment(args: argparse.Namespace) -> bool:
    """A deployment's console (or `--web` given outside one: refused there, with why)."""
    return bool(getattr(args, "deployment", None) or getattr(args, "demo_deployment", None)
                or getattr(args, "deploy_web", None))
