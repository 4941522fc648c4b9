"""What the real Docker CLI prints for the commands the console runs (both CLIs of this machine:
PATH's 28.x and Debian's 20.10, against Debian's dockerd 20.10), recorded into tests/data/real/
with GPUCONSOLE_RECORD_REAL=1, the console's parsers on it, and the simulator's fake docker printing
the same for the same commands (ids and times normalised, nothing else)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.host.parsers.docker import docker_error_text, parse_inspect, parse_ps
from console.host.sources.container import PS_TEMPLATE
from console.domain.swap import container_actions as ca
from tests.real.compose_plugin import install_plugin
from tests.real.daemons import DEBIAN_DOCKER_CLI, IMAGE_TAG, Dockerd
from tests.real.docker_host import CHECKOUT, inspect, normalise, record, run_sglang, until
from tests.real.ports import free_port

pytestmark = pytest.mark.real_docker
STATE_FORMAT = "{{.State.Status}} {{.State.Running}} {{.State.ExitCode}} {{.RestartCount}} {{.State.OOMKilled}}"


def _cli28(dockerd: Dockerd) -> str:
    return dockerd.clis[0]


@pytest.fixture(scope="module")
def serving(dockerd: Dockerd) -> Iterator[str]:
    """One simulated SGLang container for the module (--network host, a free loopback port)."""
    name = "gc-out-serving"
    run_sglang(dockerd, name, free_port(), labels=("com.example.team=llm",))
    yield name
    dockerd.docker("rm", "-f", name, check=False)


@pytest.fixture(scope="module")
def looping(dockerd: Dockerd) -> Iterator[str]:
    """A container Docker restarts in a loop (exits 1 at once, --restart always)."""
    name = "gc-out-looping"
    run_sglang(dockerd, name, 0, restart="always", command=["python3", "-c", "raise SystemExit(1)"])
    until(lambda: inspect(dockerd, name)["RestartCount"] >= 2, 60, "two restarts")
    yield name
    dockerd.docker("rm", "-f", name, check=False)


def _fake(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GPUSIM_ROOT=str(root), PYTHONPATH=str(CHECKOUT))
    code = "import sys; from console.demo.hostsim.tools import main; raise SystemExit(main('docker', sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=30,
                          check=False)


def test_inspect_of_a_missing_container_says_no_such_container_on_both_clis(dockerd: Dockerd) -> None:
    args = ["inspect", "--type", "container", "--", "gc-missing"]
    words = {}
    for cli in dockerd.clis:
        key = "inspect_missing_cli20" if cli == DEBIAN_DOCKER_CLI else "inspect_missing_cli28"
        got = record(dockerd, key, args, cli)
        assert got["rc"] == 1 and "No such object" not in got["stderr"]
        words[key] = got["stderr"].strip()
        assert got["stdout"].strip() == "[]"
    assert words.get("inspect_missing_cli28", "Error response from daemon: No such container: gc-missing") == \
        "Error response from daemon: No such container: gc-missing"
    if "inspect_missing_cli20" in words:
        assert words["inspect_missing_cli20"] == "Error: No such container: gc-missing"
    # The state check the swap runs: an empty line before the error, no state read from it
    got = record(dockerd, "inspect_state_missing", ["inspect", "--type", "container", "--format", STATE_FORMAT,
                                                    "--", "gc-missing"], _cli28(dockerd))
    assert got["rc"] == 1 and ca.parse_container_state(got["stdout"] + got["stderr"]) == {}


def test_a_crash_looping_container_is_running_and_restarting_with_a_growing_restart_count(
        dockerd: Dockerd, looping: str) -> None:
    def restarting() -> dict[str, str] | None:
        got = record(dockerd, "inspect_state_restarting",
                     ["inspect", "--type", "container", "--format", STATE_FORMAT, "--", looping], _cli28(dockerd),
                     note="a container that exits 1 at once under --restart always")
        state = ca.parse_container_state(got["stdout"])
        return state if state.get("status") == "restarting" else None

    state = until(restarting, 60, "a read that catches it restarting")
    assert state["running"] == "true" and int(state["restarts"]) >= 2  # Docker calls it running
    spec = parse_inspect(dockerd.docker("inspect", "--type", "container", "--", looping).stdout)[0]
    assert spec.state is not None and spec.state.restart_count >= 2


def test_stop_with_time_prints_a_deprecation_on_stdout_and_t_is_silent_on_both_clis(
        dockerd: Dockerd) -> None:
    name = "gc-out-stop"
    run_sglang(dockerd, name, 0, command=["sleep", "600"])
    try:
        got = record(dockerd, "stop_time_cli28", ["stop", "--time", "1", "--", name], _cli28(dockerd))
        if _cli28(dockerd) != DEBIAN_DOCKER_CLI:
            assert got["stdout"].splitlines() == ["Flag --time has been deprecated, use --timeout instead", name]
        for cli in dockerd.clis:
            dockerd.docker("start", "--", name, cli=cli)
            key = "stop_t_cli20" if cli == DEBIAN_DOCKER_CLI else "stop_t_cli28"
            got = record(dockerd, key, ["stop", "-t", "1", "--", name], cli)
            assert got["rc"] == 0 and got["stdout"].splitlines() == [name] and got["stderr"] == ""
        if DEBIAN_DOCKER_CLI in dockerd.clis:
            got = record(dockerd, "stop_timeout_cli20", ["stop", "--timeout", "1", "--", name], DEBIAN_DOCKER_CLI)
            assert got["rc"] == 125 and "unknown flag: --timeout" in got["stderr"]
        # The console's stop, rollback and restart say -t
        assert ca.stop_container(name).commands[0].script.split()[-5:] == ["stop", "-t", "60", "--", name]
    finally:
        dockerd.docker("rm", "-f", name, check=False)


def test_start_of_an_image_whose_entrypoint_binary_is_missing_says_why_then_failed_to_start(
        dockerd: Dockerd) -> None:
    name = "gc-out-nobinary"
    dockerd.docker("create", "--name", name, "--network", "none", IMAGE_TAG, "/opt/sglang/bin/missing-server")
    try:
        got = record(dockerd, "start_missing_binary", ["start", "--", name], _cli28(dockerd),
                     note="the container's entrypoint binary does not exist in the image")
        lines = got["stderr"].strip().splitlines()
        assert got["rc"] != 0 and lines[-1] == f"Error: failed to start containers: {name}"
        assert "/opt/sglang/bin/missing-server" in lines[0]
        said = docker_error_text(got["stderr"])
        assert "failed to start containers" not in said and "/opt/sglang/bin/missing-server" in said
    finally:
        dockerd.docker("rm", "-f", name, check=False)


def test_gpus_cannot_be_given_to_a_container_here_and_dockers_words_are_shown(dockerd: Dockerd) -> None:
    got = record(dockerd, "run_gpus_all", ["run", "--rm", "--gpus", "all", "--network", "none", IMAGE_TAG, "true"],
                 _cli28(dockerd), note="a machine with no NVIDIA container runtime")
    assert got["rc"] == 125
    assert 'could not select device driver "" with capabilities: [[gpu]]' in got["stderr"]
    name = "gc-out-gpus"
    dockerd.docker("create", "--name", name, "--gpus", "all", "--network", "none", IMAGE_TAG, "true")
    try:
        got = record(dockerd, "start_gpus_all", ["start", "--", name], _cli28(dockerd))
        assert got["rc"] != 0
        said = docker_error_text(got["stderr"])
        assert "could not select device driver" in said and "failed to start containers" not in said
        spec = parse_inspect(dockerd.docker("inspect", "--type", "container", "--", name).stdout)[0]
        assert spec.gpus is not None and spec.gpus.describe == "all"  # the request is real
    finally:
        dockerd.docker("rm", "-f", name, check=False)


def test_a_host_network_container_keeps_port_bindings_that_docker_discarded(dockerd: Dockerd) -> None:
    name = "gc-out-hostports"
    dockerd.docker("create", "--name", name, "--network", "host", "-p", "30000:30000", IMAGE_TAG, "true")
    try:
        got = record(dockerd, "inspect_host_network_ports", ["inspect", "--type", "container", "--", name],
                     _cli28(dockerd), note="docker create --network host -p 30000:30000")
        obj = json.loads(got["stdout"])[0]
        assert obj["HostConfig"]["PortBindings"] == {"30000/tcp": [{"HostIp": "", "HostPort": "30000"}]}
        assert obj["NetworkSettings"]["Ports"] in ({}, None)
        assert parse_inspect(got["stdout"])[0].ports == ()  # nothing published: not the server's ports
    finally:
        dockerd.docker("rm", "-f", name, check=False)


def test_the_consoles_ps_template_reads_the_same_rows_as_json_dot_on_both_clis(
        dockerd: Dockerd, serving: str) -> None:
    for cli in dockerd.clis:
        suffix = "cli20" if cli == DEBIAN_DOCKER_CLI else "cli28"
        ours = record(dockerd, f"ps_template_{suffix}", ["ps", "-a", "--no-trunc", "--format", PS_TEMPLATE], cli)
        full = record(dockerd, f"ps_json_{suffix}", ["ps", "-a", "--no-trunc", "--format", "{{json .}}"], cli)
        assert ours["rc"] == 0 and full["rc"] == 0
        assert '"Size"' in full["stdout"] and '"Size"' not in ours["stdout"]  # sizes only when asked
        mine = {r.name: r for r in parse_ps(ours["stdout"])}
        theirs = {r.name: r for r in parse_ps(full["stdout"])}
        assert serving in mine
        # A container Docker restarts in a loop moves between running and restarting from one call to
        # the next (CI's run caught it so): its state is compared by neither; every other one's must agree.
        looping = {name for name in mine if int(inspect(dockerd, name).get("RestartCount") or 0) > 0}
        assert serving not in looping
        for name, row in mine.items():
            other = theirs[name]
            assert (row.id, row.image, row.command, row.labels) == \
                (other.id, other.image, other.command, other.labels)
            if name not in looping:
                assert row.state == other.state, name
        assert mine[serving].label("com.example.team") == "llm" and mine[serving].state == "running"


def test_the_fake_docker_prints_what_the_real_cli_prints_for_the_consoles_commands(
        dockerd: Dockerd, serving: str, tmp_path: Path) -> None:
    """Same commands to both: the missing container (inspect, state check, start), the deprecated
    flag and -t, the state line and the ps template of a running container (ids/times normalised)."""
    from console.demo.hostsim.fake_docker import add_container

    real_obj = inspect(dockerd, serving)
    add_container(tmp_path, real_obj)
    cli = _cli28(dockerd)
    if cli == DEBIAN_DOCKER_CLI:
        pytest.skip("the fake prints CLI 28's words; this machine has only 20.10")  # pragma: no cover
    commands = [
        ["inspect", "--type", "container", "--", "gc-missing"],
        ["inspect", "--type", "container", "--format", STATE_FORMAT, "--", "gc-missing"],
        ["inspect", "--type", "container", "--format", STATE_FORMAT, "--", serving],
        ["inspect", "--type", "container", "-f", "{{.State.Running}}", "--", serving],
        ["start", "--", "gc-missing"],
        ["stop", "-t", "1", "--", "gc-missing"],
    ]
    for args in commands:
        real = dockerd.docker(*args, cli=cli, check=False)
        fake = _fake(tmp_path, *args)
        assert (fake.returncode, normalise(fake.stdout), normalise(fake.stderr)) == \
            (real.returncode, normalise(real.stdout), normalise(real.stderr)), args
    # A running container's ps line through the console's template: the same keys and values
    real = parse_ps(dockerd.docker("ps", "--no-trunc", "--filter", f"name={serving}", "--format", PS_TEMPLATE,
                                   cli=cli).stdout)
    fake = parse_ps(_fake(tmp_path, "ps", "--no-trunc", "--filter", f"name={serving}", "--format",
                          PS_TEMPLATE).stdout)
    assert [(r.id, r.name, r.image, r.command, r.state, r.labels) for r in fake] == \
        [(r.id, r.name, r.image, r.command, r.state, r.labels) for r in real]
    # stop --time on a running container: CLI 28's deprecation line on stdout, then the name
    for args in (["stop", "--time", "1", "--", serving], ["start", "--", serving]):
        real = dockerd.docker(*args, cli=cli, check=False)
        fake = _fake(tmp_path, *args)
        assert (fake.returncode, fake.stdout, fake.stderr) == (real.returncode, real.stdout, real.stderr), args


def test_compose_create_says_nothing_of_a_container_it_keeps_real_and_fake(dockerd: Dockerd, tmp_path: Path) -> None:
    """`docker compose create --no-recreate -- SERVICE` twice: the first creates and says so on stderr,
    the second keeps the container and prints nothing at all (the console's install reads that silence:
    no "Creating", so it compares Compose's hash with the container's label). The simulator's fake
    Compose said " Container NAME  Created" for the kept one."""
    install_plugin(dockerd.root / "cli-config")
    path = tmp_path / "compose.yaml"
    path.write_text(f"name: gcquiet\nservices:\n  svc:\n    image: {IMAGE_TAG}\n    network_mode: none\n"
                    "    command: [\"true\"]\n")
    args = ("compose", "-f", str(path), "create", "--no-recreate", "--", "svc")
    try:
        real = [dockerd.docker(*args, check=False) for _ in range(2)]
    finally:
        dockerd.docker("compose", "-f", str(path), "down", timeout_s=120, check=False)
    fake = [_fake(tmp_path / "root", *args) for _ in range(2)]
    said = [(r.returncode, r.stdout, r.stderr) for r in real]
    assert said == [(0, "", " Container gcquiet-svc-1  Creating\n Container gcquiet-svc-1  Created\n"), (0, "", "")]
    assert [(r.returncode, r.stdout, r.stderr) for r in fake] == said
