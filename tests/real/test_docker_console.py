"""The console's Docker paths against the real daemon, over SSH (OpenSSH's sshd, the real docker CLI
on its PATH, DOCKER_HOST at the tests' own dockerd): the service diff, the log follow, the status
through warm-up, the GPU→container mapping, the container swap's steps (install, stop, drain, start,
ready, rollback; a crash-looping new container, a missing entrypoint binary, one that exits at once),
the compose service (Compose v2 as a CLI plugin of the run's own), an impostor with forged Compose
labels, escape sequences from a container, the daemon down and a compose file that does not parse.

The swap's steps are console/domain/swap/container_steps.py's, run with a stand-in controller
(tests/real/docker_host.PlanCtl): every docker command is the plan's, run for real."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from console.domain.swap import container_steps
from console.domain.swap.controller import StepFailed
from console.host.sources.container import ComposeLogFollower, ContainerWatcher
from console.host.sources.log import LogFollower
from console.host.sources.server import ServerWatcher
from tests.real.compose_plugin import install_plugin
from tests.real.daemons import IMAGE_TAG, Dockerd
from tests.real.docker_host import (
    CHECKOUT,
    PlanCtl,
    RealDockerHost,
    async_until,
    close_host,
    inspect,
    open_host,
    record,
    run_sglang,
    sglang_args,
    shim_dir,
    until,
)
from tests.real.ports import free_port

pytestmark = pytest.mark.real_docker
OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x1b\\"
OSC0 = "\x1b]0;pwned\x1b\\"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    for name in ("Qwen3-8B", "Qwen3-14B"):
        (root / name).mkdir()
    return root


@pytest.fixture(scope="module")
def pair(dockerd: Dockerd, models: Path) -> Iterator[tuple[str, str, int]]:
    """The module's two services: the old one serving, the new one created (not started), one port."""
    port = free_port()
    run_sglang(dockerd, "gc-old", port, model="/models/Qwen3-8B", models_dir=models)
    run_sglang(dockerd, "gc-new", port, create=True, model="/models/Qwen3-14B", models_dir=models,
               extra=("--tp-size", "1", "--mem-fraction-static", "0.8"))
    yield "gc-new", "gc-old", port
    dockerd.docker("rm", "-f", "gc-old", "gc-new", check=False)


@pytest.fixture
async def host(dockerd: Dockerd, tmp_path: Path) -> AsyncIterator[RealDockerHost]:
    h = await open_host(dockerd, tmp_path / "host")
    try:
        yield h
    finally:
        await close_host(h)


def _compose_file(dockerd: Dockerd, directory: Path, port: int, *, project: str = "gcseeds") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "compose.yaml"
    command = json.dumps(sglang_args(port, model="/models/Qwen3-14B"))
    path.write_text(f"""name: {project}
services:
  qwen:
    image: {IMAGE_TAG}
    network_mode: host
    command: {command}
    volumes:
      - {CHECKOUT / 'console'}:/gc/console:ro
      - {shim_dir(dockerd)}:/gc/sglang:ro
    environment:
      PYTHONPATH: /gc
      PYTHONUNBUFFERED: "1"
      GPUSIM_SPEED: "8"
""")
    return path


# -- reading ---------------------------------------------------------------------------------------------
async def test_the_service_diff_of_two_real_containers_over_ssh(host: RealDockerHost,
                                                                pair: tuple[str, str, int]) -> None:
    new, old, _port = pair
    report = await ContainerWatcher(host.transport, new, old).poll()
    assert report.new.error is None and report.old is not None and report.old.error is None
    flags = {c.flag: c for c in report.changes}
    assert flags["--model-path"].new == "/models/Qwen3-14B" and flags["--mem-fraction-static"].change == "added"
    assert report.new.active_state == "created" and report.old.active_state == "active"
    assert {new, old} <= set(report.units_on_host)
    assert not [c for c in report.changes if c.flag in ("ports", "shm-size", "ipc")]  # --network host: no ports


async def test_status_is_honest_through_warm_up_then_ready(host: RealDockerHost, dockerd: Dockerd) -> None:
    port = free_port()
    run_sglang(dockerd, "gc-warm", port, speed=2.0)  # about 12 s to ready
    try:
        watcher = ServerWatcher(host.transport, None, port, None)
        seen: list[str] = []

        async def ready() -> bool:
            status = await watcher.poll()
            seen.append(status.status)
            return status.status == "ready"

        deadline = asyncio.get_running_loop().time() + 90
        while not await ready():
            assert asyncio.get_running_loop().time() < deadline, seen
            await asyncio.sleep(0.3)
        assert seen[0] != "ready" and "ready" not in seen[:-1], seen  # never ready before it serves
    finally:
        dockerd.docker("rm", "-f", "gc-warm", check=False)


async def test_docker_logs_follow_reads_the_boot_and_ends_when_the_container_stops(
        host: RealDockerHost, dockerd: Dockerd) -> None:
    run_sglang(dockerd, "gc-logs", free_port())
    try:
        follower = LogFollower(host.transport, container="gc-logs")
        events: list = []
        notes: list[str] = []
        stopped = False

        async def follow() -> None:
            nonlocal stopped
            async for batch in follower.batches():
                events.extend(batch.events)
                if batch.note and stopped:
                    notes.append(batch.note)
                    return
                if not stopped and any("server_args=ServerArgs" in e.text for e in events):
                    stopped = True
                    await asyncio.to_thread(dockerd.docker, "stop", "-t", "5", "--", "gc-logs")

        await asyncio.wait_for(follow(), 90)
        boot = next(e for e in events if "server_args=ServerArgs" in e.text)
        assert boot.kind == "boot" and boot.phase == "launch" and boot.ts is not None
        assert follower.since is not None and follower.since.endswith("Z") and len(follower.since) == 30
        assert notes  # the stream ended with the container, said as such
    finally:
        dockerd.docker("rm", "-f", "gc-logs", check=False)


async def test_beside_the_log_reads_the_new_containers_boot_while_the_old_one_serves(
        host: RealDockerHost, dockerd: Dockerd) -> None:
    """Two real containers followed at once: the new one started while the old one keeps running, its
    boot read from its own `docker logs`, each line saying which container wrote it."""
    run_sglang(dockerd, "gc-bo", free_port())
    run_sglang(dockerd, "gc-bn", free_port(), create=True)
    try:
        follower = LogFollower(host.transport, container="gc-bn", compare_container="gc-bo")
        events: list = []
        started = False

        async def follow() -> None:
            nonlocal started
            async for batch in follower.batches():
                events.extend(batch.events)
                if not started and any(e.fields.get("container") == "gc-bo" for e in events):
                    started = True
                    await asyncio.to_thread(dockerd.docker, "start", "--", "gc-bn")
                if any(e.phase == "launch" and e.fields.get("container") == "gc-bn" for e in events):
                    return

        await asyncio.wait_for(follow(), 90)
        assert inspect(dockerd, "gc-bo")["State"]["Running"] is True  # the old one served on throughout
        assert {e.fields.get("container") for e in events} == {"gc-bo", "gc-bn"}
    finally:
        dockerd.docker("rm", "-f", "gc-bo", "gc-bn", check=False)


async def test_the_gpu_to_container_mapping_reads_a_real_containers_cgroup(
        host: RealDockerHost, dockerd: Dockerd, pair: tuple[str, str, int]) -> None:
    import os

    from console.host.sources.gpu import GpuSource

    _new, old, _port = pair
    pid = inspect(dockerd, old)["State"]["Pid"]
    assert pid > 0
    source = GpuSource(host.transport, local=False)
    await source._lookup_containers([pid, os.getpid()])
    assert source._containers[pid] == old
    assert source._containers[os.getpid()] is None  # a process of this machine's own: no container


# -- the swap ---------------------------------------------------------------------------------------------
async def test_the_container_swap_steps_end_to_end_then_the_rollback(host: RealDockerHost, dockerd: Dockerd,
                                                                     models: Path) -> None:
    port = free_port()
    run_sglang(dockerd, "gc-swap-old", port, model="/models/Qwen3-8B", models_dir=models)
    run_sglang(dockerd, "gc-swap-new", port, create=True, model="/models/Qwen3-14B", models_dir=models)
    ctl = PlanCtl(host.transport, new="gc-swap-new", old="gc-swap-old", port=port)
    try:
        await ctl.read_service()
        said = await container_steps.run_install(ctl, "op")  # type: ignore[arg-type]
        assert said == f"{IMAGE_TAG} is on the host; gc-swap-new exists (created)"
        said = await container_steps.run_stop_old(ctl, "op")  # type: ignore[arg-type]
        assert said.startswith("gc-swap-old stopped")
        assert inspect(dockerd, "gc-swap-old")["State"]["Status"] == "exited"
        said = await container_steps.run_start_new(ctl, "op")  # type: ignore[arg-type]
        assert said.startswith("ready ") and "after docker start" in said
        assert inspect(dockerd, "gc-swap-new")["State"]["Running"] is True
        said = await container_steps.run_rollback(ctl, "op")  # type: ignore[arg-type]
        assert said.startswith("gc-swap-old ready again")
        assert inspect(dockerd, "gc-swap-new")["State"]["Running"] is False
        assert inspect(dockerd, "gc-swap-old")["State"]["Running"] is True
    finally:
        await ctl.close()
        dockerd.docker("rm", "-f", "gc-swap-old", "gc-swap-new", check=False)


async def test_a_crash_looping_new_container_is_named_at_install_and_at_start(host: RealDockerHost,
                                                                               dockerd: Dockerd) -> None:
    # The simulated SGLang runs out of GPU memory while booting (exit 1); --restart always brings it back.
    port = free_port()
    run_sglang(dockerd, "gc-loop", port, restart="always", env=("GPUSIM_OOM=1",), speed=16)
    run_sglang(dockerd, "gc-loop2", port, create=True, restart="always", env=("GPUSIM_OOM=1",), speed=16)
    ctl = PlanCtl(host.transport, new="gc-loop", old="gc-nothing", port=port, ready_timeout_s=60)
    ctl2 = PlanCtl(host.transport, new="gc-loop2", old="gc-nothing", port=port, ready_timeout_s=60)
    try:
        until(lambda: inspect(dockerd, "gc-loop")["RestartCount"] >= 1, 60, "a restart")
        await ctl.read_service()
        with pytest.raises(StepFailed) as failed:
            await container_steps.run_install(ctl, "op")  # type: ignore[arg-type]
        assert "already running" not in str(failed.value) and "restarting in a loop" in str(failed.value)
        with pytest.raises(StepFailed) as failed:
            await container_steps.run_start_new(ctl2, "op")  # type: ignore[arg-type] # the start succeeds; the loop fails
        assert "restarting in a loop" in str(failed.value) and "since the start" in str(failed.value)
    finally:
        await ctl.close()
        await ctl2.close()
        dockerd.docker("rm", "-f", "gc-loop", "gc-loop2", check=False)


async def test_an_image_whose_entrypoint_binary_is_missing_fails_the_start_with_dockers_reason(
        host: RealDockerHost, dockerd: Dockerd) -> None:
    run_sglang(dockerd, "gc-nobin", 0, create=True, command=["/opt/sglang/bin/launch"])
    ctl = PlanCtl(host.transport, new="gc-nobin", old="gc-nothing", port=free_port())
    try:
        with pytest.raises(StepFailed) as failed:
            await container_steps.run_start_new(ctl, "op")  # type: ignore[arg-type]
        said = str(failed.value)
        assert said.startswith("docker start gc-nobin exited 1")
        assert "/opt/sglang/bin/launch: no such file or directory" in said
        assert "failed to start containers" not in said
    finally:
        await ctl.close()
        dockerd.docker("rm", "-f", "gc-nobin", check=False)


async def test_a_container_that_exits_at_once_fails_the_start_with_its_exit_code(
        host: RealDockerHost, dockerd: Dockerd) -> None:
    run_sglang(dockerd, "gc-exits", 0, create=True, command=["python3", "-c", "raise SystemExit(3)"])
    ctl = PlanCtl(host.transport, new="gc-exits", old="gc-nothing", port=free_port())
    try:
        with pytest.raises(StepFailed) as failed:
            await container_steps.run_start_new(ctl, "op")  # type: ignore[arg-type]
        assert "gc-exits exited (exit code 3)" in str(failed.value)
        report = await ContainerWatcher(host.transport, "gc-exits", None).poll()
        assert report.new.active_state == "exited"
    finally:
        await ctl.close()
        dockerd.docker("rm", "-f", "gc-exits", check=False)


# -- compose ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compose_plugin(dockerd: Dockerd) -> Path:
    plugin = install_plugin(dockerd.root / "cli-config")
    version = dockerd.docker("compose", "version", "--short").stdout.strip()
    assert version.lstrip("v") == "2.40.3", version
    return plugin


async def test_the_compose_service_is_created_by_the_install_and_the_snapshot_reads_the_serving_log(
        host: RealDockerHost, dockerd: Dockerd, compose_plugin: Path, tmp_path: Path) -> None:
    port = free_port()
    run_sglang(dockerd, "gc-cold", port)
    compose = _compose_file(dockerd, tmp_path / "seeds", port)
    ctl = PlanCtl(host.transport, new=None, old="gc-cold", port=port, compose=str(compose), compose_service="qwen")
    try:
        report = await ctl.read_service()
        assert report.new.error is None, report.new.error
        assert report.new.name == "gcseeds-qwen-1"  # Compose's name for it, before it exists
        assert not [c for c in report.changes if c.flag in ("shm-size", "ipc")], report.changes
        said = await container_steps.run_install(ctl, "op")  # type: ignore[arg-type]
        assert said.endswith(f"created gcseeds-qwen-1 from {compose}")
        created = inspect(dockerd, "gcseeds-qwen-1")
        assert created["State"]["Status"] == "created"
        assert created["Config"]["Labels"]["com.docker.compose.project.config_files"] == str(compose)
        # snapshot --json: the log of the service's container, the serving one while the new is only created
        await async_until(lambda: "server_args" in (lambda r: r.stdout + r.stderr)(dockerd.docker("logs", "gc-cold")),
                          60, "gc-cold's boot")
        follower = ComposeLogFollower(host.transport, ctl.watcher, compare_container="gc-cold")
        events = await follower.read_backlog()
        assert any("server_args=ServerArgs" in e.text for e in events), [e.text for e in events][:5]
        assert not any("No such container" in e.text for e in events)
    finally:
        await ctl.close()
        dockerd.docker("rm", "-f", "gc-cold", "gcseeds-qwen-1", check=False)


async def test_an_impostor_container_with_forged_compose_labels_is_not_taken(
        host: RealDockerHost, dockerd: Dockerd, compose_plugin: Path, tmp_path: Path) -> None:
    compose = _compose_file(dockerd, tmp_path / "seeds", free_port(), project="gcimp")
    dockerd.docker("compose", "-f", str(compose), "create", "--", "qwen")
    labels = ("com.docker.compose.project=gcimp", "com.docker.compose.service=qwen",
              "com.docker.compose.container-number=0", "com.docker.compose.oneoff=False",
              f"com.docker.compose.project.config_files={compose}")
    run_sglang(dockerd, "aaa-impostor", 0, create=True, labels=labels, command=["true"])
    try:
        watcher = ContainerWatcher(host.transport, "qwen", None, compose_file=str(compose), compose_service="qwen")
        report = await watcher.poll()
        assert watcher.compose_container == "gcimp-qwen-1" and report.new.name == "gcimp-qwen-1"
    finally:
        dockerd.docker("rm", "-f", "aaa-impostor", "gcimp-qwen-1", check=False)


# -- hostile and faulty ---------------------------------------------------------------------------------------
async def test_escape_sequences_in_a_real_containers_inspect_never_reach_the_pane(
        host: RealDockerHost, dockerd: Dockerd) -> None:
    run_sglang(dockerd, "gc-evil", 0, create=True, model=f"/models/M{OSC52}", env=(f"NOTE=x{OSC0}",),
               labels=(f"team=llm{OSC52}", f"t{OSC0}=1"))
    try:
        assert inspect(dockerd, "gc-evil")["Args"][3] == f"/models/M{OSC52}"  # Docker keeps them
        watcher = ContainerWatcher(host.transport, "gc-evil", None)
        report = await watcher.poll()
        spec = watcher.specs["new"]
        texts = [report.new.text or "", " ".join(spec.argv), json.dumps(spec.labels), json.dumps(spec.env),
                 *(r.command + json.dumps(r.labels) for r in watcher.rows)]
        assert all("\x1b" not in t and "\x07" not in t for t in texts), texts
        assert "--model-path /models/M" in (report.new.text or "")
    finally:
        dockerd.docker("rm", "-f", "gc-evil", check=False)


async def test_the_daemon_down_and_a_compose_file_that_does_not_parse_are_one_line_each(
        host: RealDockerHost, dockerd: Dockerd, compose_plugin: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad" / "compose.yaml"
    bad.parent.mkdir()
    bad.write_text("services:\n  qwen:\n    image: [unclosed\n")
    got = record(dockerd, "compose_unparsable", ["compose", "-f", str(bad), "create", "--", "qwen"], dockerd.clis[0])
    assert got["rc"] != 0 and "yaml" in got["stderr"].lower()
    report = await ContainerWatcher(host.transport, "qwen", None, compose_file=str(bad), compose_service="qwen").poll()
    assert report.new.error is not None and "\n" not in report.new.error
    assert report.new.error.startswith(f"{bad}: compose file does not parse at line")
    # The daemon down: a host whose DOCKER_HOST names a socket nobody listens on
    down = await open_host(dockerd, tmp_path / "down", docker_host=f"unix://{tmp_path}/nobody.sock")
    try:
        code, text = await down.sh("docker inspect --type container -- gc-old 2>&1")
        assert code == 1 and "Cannot connect to the Docker daemon" in text
        report = await ContainerWatcher(down.transport, "gc-old", None).poll()
        assert report.new.error is not None and "\n" not in report.new.error
        assert report.new.error.startswith("gc-old: Cannot connect to the Docker daemon at unix://")
    finally:
        await close_host(down)
