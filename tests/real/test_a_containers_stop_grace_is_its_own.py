"""The grace a container gets between SIGTERM and SIGKILL is its own: `docker run --stop-timeout N`
and Compose's `stop_grace_period` set Docker's Config.StopTimeout, which a plain `docker stop` uses.
The console stopped every container with `-t 60` whatever it said. The real dockerd and Compose
plugin create the containers; their `docker inspect` and the compose file are read by the console's
parsers, and its stop commands carry the container's own grace."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.domain.swap import container_actions as ca
from console.host.parsers.docker import parse_compose, parse_inspect
from tests.real.compose_plugin import install_plugin
from tests.real.daemons import IMAGE_TAG, Dockerd

pytestmark = pytest.mark.real_docker
GRACES = {"gc-grace-7s": "7s", "gc-grace-1500ms": "1500ms", "gc-grace-1m30s": "1m30s", "gc-grace-none": None}


@pytest.fixture(scope="module")
def compose_file(dockerd: Dockerd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A compose file of one service per grace (none for the last), its containers created."""
    install_plugin(dockerd.root / "cli-config")
    path = tmp_path_factory.mktemp("grace") / "compose.yaml"
    lines = ["name: gcgrace", "services:"]
    for name, grace in GRACES.items():
        lines += [f"  {name}:", f"    image: {IMAGE_TAG}", "    network_mode: none", "    command: [\"true\"]"]
        if grace is not None:
            lines.append(f"    stop_grace_period: {grace}")
    path.write_text("\n".join(lines) + "\n")
    dockerd.docker("compose", "-f", str(path), "create", timeout_s=180)
    yield path
    dockerd.docker("compose", "-f", str(path), "down", "-t", "1", timeout_s=120, check=False)


def _inspect(dockerd: Dockerd, name: str) -> dict:
    return json.loads(dockerd.docker("inspect", "--type", "container", "--", name).stdout)[0]


def test_docker_run_stop_timeout_is_the_consoles_stop_grace(dockerd: Dockerd) -> None:
    for name, given in (("gc-grace-run-9", ["--stop-timeout", "9"]), ("gc-grace-run-none", [])):
        dockerd.docker("rm", "-f", name, check=False)
        dockerd.docker("create", "--name", name, "--network", "none", *given, IMAGE_TAG, "true")
        try:
            raw = dockerd.docker("inspect", "--type", "container", "--", name).stdout
            (spec,) = parse_inspect(raw)
            assert json.loads(raw)[0]["Config"].get("StopTimeout") == (9 if given else None)
            assert spec.stop_timeout_s == (9 if given else None)
            action = ca.stop_container(name, grace=ca.stop_grace(spec))
            (cmd,) = action.commands
            assert action.display()[-1].startswith("then wait: GPU memory drained (SIGKILL after "), action.display()
            assert ("its StopTimeout, 9 s" if given else "sets no StopTimeout") in action.display()[-1]
            assert cmd.script == (f"timeout -k 5 39 docker stop -t 9 -- {name}" if given
                                  else f"timeout -k 5 90 docker stop -t 60 -- {name}"), cmd.script
            assert ("its StopTimeout, 9 s" if given else "sets no StopTimeout") in cmd.purpose, cmd.purpose
        finally:
            dockerd.docker("rm", "-f", name, check=False)


def test_composes_stop_grace_period_is_what_docker_inspect_says_and_the_file_reads_the_same(
        dockerd: Dockerd, compose_file: Path) -> None:
    text = compose_file.read_text()
    for service in GRACES:
        docker_says = _inspect(dockerd, f"gcgrace-{service}-1")["Config"].get("StopTimeout")
        (from_docker,) = parse_inspect(json.dumps([_inspect(dockerd, f"gcgrace-{service}-1")]))
        from_file = parse_compose(text, service, str(compose_file))
        assert from_docker.stop_timeout_s == docker_says, (service, docker_says)
        assert from_file.stop_timeout_s == docker_says, (service, from_file.stop_timeout_s, docker_says)
