"""SGLang in a container against OpenSSH's sshd (issue 26, the tests it asks for): this machine's
sshd on 127.0.0.1 whose sessions find the simulated `docker` first on PATH (`SetEnv`), so every
command of the console goes through a real SSH connection and a real login shell: the diff of the
seeds' two services as containers and as compose services, the log and the status, the swap end to
end, a failed start rolled back, the GPU-to-container mapping (a real process in a real cgroup).

The driven scenario's services run in this process (console/demo/hostsim/docker_drive.py lays them
out, the fake docker CLI's drive_* start and stop them); only the SSH side is OpenSSH's instead of
the simulator's own."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from console.core.runner import HostRunner
from console.core.state import HostState
from console.demo.hostsim import HostSimulator
from console.demo.hostsim.downloader import DownloadPlan
from console.demo.hostsim.fake_docker import MAP_FILE, add_container, append_log
from console.demo.hostsim.scenario import NEW_CONTAINER, OLD_CONTAINER, demo_profile, start_scenario, write_hub_cache
from console.host.session import HostSession, make_transport
from console.domain.swap.controller import SwapController
from console.demo.sshd import Sshd, start_sshd
from console.host.transport.ssh import SshTransport
from tests.kit.docker import inspect as _inspect
from tests.kit.hosts import require_sshd

pytestmark = pytest.mark.sshd
SPEED = 16.0
DATA = Path(__file__).parent.parent / "data" / "docker"
ENV_KEYS = ("PATH", "GPUSIM_ROOT", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE")

CID = hashlib.sha256(b"sglang-qwen397b").hexdigest()  # the simulated container's id (containers.container_id)


def _sshd_for(directory: Path, env: dict[str, str]) -> Sshd:
    return start_sshd(directory, extra_config="SetEnv " + " ".join(f"{k}={env[k]}" for k in ENV_KEYS if k in env)
                      + "\n")


async def _until(predicate: object, timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


# -- a bare host: the fake docker alone ------------------------------------------------------------
@dataclass
class Bare:
    root: Path
    sshd: Sshd
    transport: SshTransport

    async def docker(self, *args: str) -> tuple[int | None, str]:
        from console.host.transport.base import quote

        r = await self.transport.run("docker " + " ".join(quote(a) for a in args) + " 2>&1", timeout=30)
        return r.exit_status, r.text


@pytest.fixture
async def bare(tmp_path: Path) -> AsyncIterator[Bare]:
    require_sshd()
    root = tmp_path / "host"
    bin_dir = root / ".sim" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "docker").write_text(f"#!{sys.executable}\nimport sys\nfrom console.demo.hostsim.tools import main\n"
                                    "raise SystemExit(main('docker', sys.argv[1:]))\n")
    (bin_dir / "docker").chmod(0o755)
    parent = str(Path(__file__).resolve().parent.parent.parent)
    sshd = _sshd_for(tmp_path / "sshd", {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", "GPUSIM_ROOT": str(root),
                                         "PYTHONPATH": parent, "PYTHONDONTWRITEBYTECODE": "1"})
    transport = SshTransport(sshd.options())
    await transport.connect()
    try:
        yield Bare(root, sshd, transport)
    finally:
        await transport.close()
        sshd.stop()


def _compose_file(root: Path, *, container_names: bool) -> Path:
    """The seeds' compose file (tests/data/docker/compose.yaml) with host paths under the sandbox;
    without `container_name` Compose names the containers itself."""
    text = (DATA / "compose.yaml").read_text().replace("/data/models", str(root / "data" / "models")) \
        .replace("/shared/models", str(root / "shared" / "models"))
    if not container_names:
        text = "\n".join(ln for ln in text.splitlines() if "container_name:" not in ln) + "\n"
    path = root / "etc" / "sglang" / "compose.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


async def test_the_seeds_services_diff_over_sshd_as_containers_and_as_compose_services(bare: Bare) -> None:
    from console.host.sources.container import ContainerWatcher

    root = bare.root
    (root / "shared" / "models" / "Qwen3.5-122B-A10B").mkdir(parents=True)
    (root / "data" / "models" / "Qwen3.5-397B-A17B-NVFP4").mkdir(parents=True)
    add_container(root, _inspect(root, "sglang-qwen397b", "data/models", running=True,
                                 model="Qwen3.5-397B-A17B-NVFP4", extra=["--quantization", "modelopt_fp4"]))
    add_container(root, _inspect(root, "sglang-qwen122b", "shared/models", running=False,
                                 model="Qwen3.5-122B-A10B", extra=["--speculative-algorithm", "NEXTN"]))
    watcher = ContainerWatcher(bare.transport, "sglang-qwen122b", "sglang-qwen397b",
                               forbidden_prefixes=(str(root / "data"),))
    report = await watcher.poll()
    assert report.errors == ()
    flags = {c.flag: c for c in report.changes}
    assert flags["--quantization"].change == "removed" and flags["--speculative-algorithm"].change == "added"
    assert flags["mount /models"].new == f"bind {root}/shared/models (ro)"
    assert report.new.active_state == "exited" and report.old.active_state == "active"
    assert set(report.units_on_host) == {"sglang-qwen122b", "sglang-qwen397b"}

    # The same two services as compose services (the file's, with no container_name): the new side is
    # the compose service, the old the running container; Compose's name for it, PROJECT-SERVICE-1.
    compose = _compose_file(root, container_names=False)
    cw = ContainerWatcher(bare.transport, "qwen122b", "sglang-qwen397b", compose_file=str(compose),
                          compose_service="qwen122b", forbidden_prefixes=(str(root / "data"),))
    report = await cw.poll()
    assert report.new.error is None, report.new.error
    assert report.new.name == "sglang-qwen122b-1" and cw.compose_container == "sglang-qwen122b-1"
    flags = {c.flag: c for c in report.changes}
    assert flags["--quantization"].change == "removed"
    assert flags["--speculative-algorithm"].change == "added"  # --speculative-algo, SGLang's prefix match
    assert "--tp-size" not in flags  # --tp 4 is --tp-size 4
    assert not [x for x in report.lints if x.severity == "error"], report.lints


async def test_a_compose_file_without_container_name_is_found_by_composes_labels(bare: Bare) -> None:
    """Item 2: the container Compose created (its labels name the service and the project) is the
    new side, with no `container` in the profile; before it exists, PROJECT-SERVICE-1."""
    from console.host.sources.container import ContainerWatcher

    root = bare.root
    (root / "shared" / "models").mkdir(parents=True)
    compose = _compose_file(root, container_names=False)
    # A project name of the file's own (top-level `name:`) beats the directory's.
    compose.write_text("name: Seeds.Prod\n" + compose.read_text())
    cw = ContainerWatcher(bare.transport, "qwen122b", None, compose_file=str(compose), compose_service="qwen122b")
    await cw.poll()
    assert cw.compose_container == "seedsprod-qwen122b-1"
    rc, out = await bare.docker("compose", "-f", str(compose), "create", "--no-recreate", "--", "qwen122b")
    assert rc == 0 and " Container seedsprod-qwen122b-1  Created" in out, out
    # The operator renamed it afterwards (docker rename): the labels still find it.
    src = root / ".sim" / "containers" / "seedsprod-qwen122b-1.json"
    obj = json.loads(src.read_text())
    obj["Name"] = "/qwen-live"
    (root / ".sim" / "containers" / "qwen-live.json").write_text(json.dumps(obj))
    src.unlink()
    report = await cw.poll()
    assert cw.compose_container == "qwen-live" and report.new.name == "qwen-live"


async def test_a_compose_only_profile_follows_the_log_of_composes_container(bare: Bare) -> None:
    """Item 3: with `compose` and no `container`, the log follows `docker logs` of the container
    Compose made for the service (and its status comes from the same lines)."""
    from console.config import HostProfile
    from console.host.session import HostSession

    root = bare.root
    (root / "shared" / "models").mkdir(parents=True)
    compose = _compose_file(root, container_names=False)
    profile = HostProfile(name="c", host="127.0.0.1", port=bare.sshd.port, user=bare.sshd.user,
                          identity=str(bare.sshd.client_key), known_hosts=str(bare.sshd.known_hosts),
                          compose=str(compose), compose_service="qwen122b", server_port=1)
    session = HostSession(profile, bare.transport)
    follower = session.log_follower()
    assert follower is not None, "a compose-only profile follows no log"
    assert session.server_watcher() is not None  # the status reads the same lines
    rc, out = await bare.docker("compose", "-f", str(compose), "up", "-d", "--", "qwen122b")
    assert rc == 0 and " Container sglang-qwen122b-1  Started" in out, out
    append_log(root, "sglang-qwen122b-1", "[2026-11-28 07:41:20] Load weight begin. avail mem=139.21 GB")
    watcher = session.service_watcher()
    lines: list[str] = []
    errors: list[str] = []

    async def collect() -> None:
        async for batch in follower.batches():
            lines.extend(e.text for e in batch.events)
            if batch.error:
                errors.append(batch.error)

    task = asyncio.ensure_future(collect())
    try:
        await watcher.poll()  # the service reading names the container; the stream then starts
        await _until(lambda: any("Load weight begin" in t for t in lines), 30, f"the log line ({errors[-2:]})")
        append_log(root, "sglang-qwen122b-1", "[2026-11-28 07:41:59] The server is fired up and ready to roll!")
        await _until(lambda: any("fired up" in t for t in lines), 30, "the ready line")
        assert "sglang-qwen122b-1" in follower.container
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_docker_ps_prints_the_real_clis_table_and_json_over_ssh(bare: Bare) -> None:
    """Item 4: `docker ps` as the CLI prints it (tabwriter: minwidth 10, padding 3; the command
    quoted and cut at 20 runes with "…"); `{{json .}}` with Go's HTML-safe escapes; filters."""
    root = bare.root
    add_container(root, _inspect(root, "sglang-qwen397b", "data/models", running=True, model="M", extra=[]))
    rc, out = await bare.docker("ps")
    header, row = out.splitlines()
    assert header == ("CONTAINER ID   IMAGE                           COMMAND                  CREATED      "
                      "STATUS      PORTS                      NAMES")
    assert row == (f'{CID[:12]}   lmsysorg/sglang:v0.5.23-cu129   "/opt/nvidia/nvidia_…"   3 days ago   '
                   'Up 3 days   0.0.0.0:30000->30000/tcp   sglang-qwen397b')
    rc, out = await bare.docker("ps", "-a", "--no-trunc", "--format", "{{json .}}")
    assert '"Ports":"0.0.0.0:30000-\\u003e30000/tcp"' in out
    assert '"Command":"\\"/opt/nvidia/nvidia_entrypoint.sh python3 -m sglang.launch_server --model-path /models/M --tp-size 4\\""' in out
    rc, out = await bare.docker("ps", "--no-trunc", "--format", "{{.ID}} {{.Names}}")
    assert out.strip() == f"{CID} sglang-qwen397b"
    rc, out = await bare.docker("ps", "-a", "--filter", "label=com.docker.compose.service=x", "-q")
    assert rc == 0 and out.strip() == ""


async def test_bad_compose_input_is_one_line_over_ssh(bare: Bare) -> None:
    """Item 7: a compose file that does not parse, a missing one, an unknown service, a daemon that
    is down: the fake says what Compose says, the service pane one clean line."""
    from console.host.sources.container import ContainerWatcher

    root = bare.root
    bad = root / "bad.yaml"
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text("services:\n  qwen122b: [\n")
    rc, out = await bare.docker("compose", "-f", str(bad), "create")
    assert rc == 1 and out.strip() == "yaml: line 3: expected the node content, but found '<stream end>'"
    rc, out = await bare.docker("compose", "-f", str(root / "none.yaml"), "up", "-d")
    assert rc == 1 and out.strip() == f"open {root}/none.yaml: no such file or directory"
    good = _compose_file(root, container_names=True)
    rc, out = await bare.docker("compose", "-f", str(good), "create", "--", "qwen")
    assert rc == 1 and out.strip() == "no such service: qwen"
    cw = ContainerWatcher(bare.transport, "qwen122b", None, compose_file=str(bad), compose_service="qwen122b")
    report = await cw.poll()
    assert report.new.error is not None and "does not parse at line" in report.new.error
    assert "\n" not in report.new.error and cw.compose_container is None
    (root / ".sim" / "docker-down").write_text("")
    rc, out = await bare.docker("compose", "-f", str(good), "ps")
    assert rc == 1 and "Cannot connect to the Docker daemon" in out


async def test_gpu_processes_map_to_their_container_through_a_real_cgroup(bare: Bare) -> None:
    """Item 1's GPU-to-container mapping: a real process moved into a real cgroup named as Docker
    names its containers' (cgroup v1 `/docker/<id>`); its pid's /proc/PID/cgroup read over SSH, the
    id looked up in `docker ps`."""
    from console.model import GpuDevice, GpuProcess
    from console.ui.panes.gpu import format_gpu_status
    from console.host.sources.gpu import GpuSource

    cid = CID
    group = Path("/sys/fs/cgroup/pids/docker") / cid
    proc = subprocess.Popen(["sleep", "120"])
    try:
        try:
            group.mkdir(parents=True)
            (group / "cgroup.procs").write_text(str(proc.pid))
        except OSError as exc:
            pytest.skip(f"no writable cgroup v1 pids hierarchy here ({exc})")
        add_container(bare.root, _inspect(bare.root, "sglang-qwen397b", "data/models", running=True, model="M",
                                          extra=[]))
        source = GpuSource(bare.transport, local=False)
        gpu = GpuDevice(0, "NVIDIA H200", "GPU-0", 1000, 143771, 0, 30, 100.0, 700.0,
                        processes=(GpuProcess(proc.pid, "python3", 90000), GpuProcess(os.getpid(), "python3", 2000)))
        source._status("nvml", (gpu,), (), None)
        await source._container_task
        status = source._status("nvml", (gpu,), (), None)
        by_pid = {p.pid: p.container for p in status.data.gpus[0].processes}
        assert by_pid == {proc.pid: "sglang-qwen397b", os.getpid(): None}
        assert "sglang-qwen397b: python3" in format_gpu_status(status, width=100, height=12).plain
    finally:
        proc.kill()
        proc.wait()
        if group.exists():
            group.rmdir()


# -- the driven scenario over sshd: the swap ------------------------------------------------------
@dataclass
class Driven:
    sim: HostSimulator
    sshd: Sshd
    state: HostState
    runner: HostRunner


def _offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sshd or a skip; no Hub on the network, the console's cache and data dirs under the test's."""
    require_sshd()
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:1")
    monkeypatch.setenv("GPUCONSOLE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    write_hub_cache(tmp_path / "cache", DownloadPlan())


@contextlib.asynccontextmanager
async def _over_sshd(tmp_path: Path, sim: HostSimulator, profile: Any,
                     setup: Callable[[Any], None] | None = None) -> AsyncIterator[Driven]:
    """A console's core on `sim` through OpenSSH's sshd (the simulator's environment passed on),
    its swap controller polling every 0.2 s (`setup` changes it further before the start); closed
    after, the simulator left to the caller."""
    sshd = _sshd_for(tmp_path / "sshd", sim.env())
    profile = replace(profile, port=sshd.port, identity=str(sshd.client_key), known_hosts=str(sshd.known_hosts),
                      user=sshd.user)
    session = HostSession(profile, make_transport(profile), demo=True, bench_path=tmp_path / "bench.jsonl")
    state = HostState(sim.host_path("/"), label="sshd")
    runner = HostRunner(session, state, swap=SwapController)
    runner.swap.poll_s = 0.2
    if setup is not None:
        setup(runner.swap)
    runner.announce()
    await runner.start()
    try:
        yield Driven(sim, sshd, state, runner)
    finally:
        runner.swap.cancel()
        try:
            await asyncio.wait_for(runner.close(), 60)
        finally:
            sshd.stop()


async def _driven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, oom: bool = False) -> AsyncIterator[Driven]:
    _offline(tmp_path, monkeypatch)
    sim = HostSimulator(tmp_path / "host", speed=SPEED, scenario="docker-drive")
    await sim.start()
    try:
        await start_scenario(sim, oom=oom)

        def small_bench(swap: Any) -> None:
            swap.bench_plan = [(1, 2, 32, 16)]

        async with _over_sshd(tmp_path, sim, demo_profile(sim).with_overrides({"gpu_interval_s": 0.5}),
                              small_bench) as d:
            yield d
    finally:
        await asyncio.wait_for(sim.stop(), 60)


@pytest.fixture
async def driven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Driven]:
    async for d in _driven(tmp_path, monkeypatch):
        yield d


@pytest.fixture
async def driven_oom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Driven]:
    async for d in _driven(tmp_path, monkeypatch, oom=True):
        yield d


async def _run(d: Driven, key: str, timeout: float = 90) -> tuple[str, str]:
    why = d.runner.swap.request(key)
    assert why is None, why
    await d.runner.swap.wait_idle(timeout)
    s = d.state.swap.steps[key]
    return s.state, s.detail


async def _running(d: Driven, name: str) -> str:
    r = await d.runner.session.transport.run(f"docker inspect -f '{{{{.State.Running}}}}' -- {name}", timeout=10)
    return r.text.strip()


async def _to_the_stop(d: Driven) -> None:
    await _until(lambda: d.state.data("gpu") is not None and d.state.data("service") is not None
                 and d.state.data("service").old is not None, 30, "GPU and service readings")
    state, detail = await _run(d, "install", 60)
    assert state == "done", detail
    for check in d.runner.swap.evaluate_gate():
        if not check.passes:  # the download/verify checks cannot pass without a download: overridden by name
            assert d.runner.swap.override(check.name, check.name) is None
    state, detail = await _run(d, "stop_old", 60)
    assert state == "done" and f"{OLD_CONTAINER} stopped" in detail and "drained" in detail, detail


async def test_the_log_status_and_swap_end_to_end_over_sshd(driven: Driven) -> None:
    d = driven
    # The log and the status: the old container's `docker logs`, its honest ready.
    await _until(lambda: d.state.data("server") is not None and d.state.data("server").status == "ready", 60,
                 "the old server ready")
    await _until(lambda: d.state.data("log") is not None and d.state.data("log").lines_seen > 0, 30, "log lines")
    assert f"docker logs of {NEW_CONTAINER} and {OLD_CONTAINER}" in d.state.data("log").source
    await _until(lambda: d.state.data("service") is not None, 30, "the service reading")
    assert d.state.data("service").new.name == NEW_CONTAINER
    await _to_the_stop(d)
    assert await _running(d, OLD_CONTAINER) == "false"
    state, detail = await _run(d, "start_new", 120)
    assert state == "done" and "after docker start" in detail, detail
    assert await _running(d, NEW_CONTAINER) == "true"
    # the downtime's end is the observer's, from the new server's ready on the host: it can land
    # after the executor's outcome (a loaded machine saw it not written yet)
    await _until(lambda: d.state.swap.downtime is not None and d.state.swap.downtime.ended_at_s is not None,
                 30, "the downtime's end")
    assert d.state.swap.downtime.end_source == f"{NEW_CONTAINER} ready"
    state, detail = await _run(d, "benchmark", 120)
    assert state == "done", detail
    audit = [(e.command, e.exit_status) for e in d.state.swap.audit]
    assert (f"timeout -k 5 90 docker stop -t 60 -- {OLD_CONTAINER}", 0) in audit
    assert (f"timeout -k 5 60 docker start -- {NEW_CONTAINER}", 0) in audit
    # the log moved to the new container, through its boot
    await _until(lambda: any(b.phase == "ready" for b in (d.state.data("log").boot or ())), 30, "the new boot")


async def test_a_failed_start_over_sshd_is_rolled_back(driven_oom: Driven) -> None:
    d = driven_oom
    await _to_the_stop(d)
    state, detail = await _run(d, "start_new", 120)
    assert state == "failed" and f"{NEW_CONTAINER} exited (exit code 1)" in detail, detail
    assert "out of memory" in detail.lower(), detail
    state, detail = await _run(d, "rollback", 120)
    assert state == "done" and f"{OLD_CONTAINER} ready again" in detail, detail
    assert await _running(d, OLD_CONTAINER) == "true" and await _running(d, NEW_CONTAINER) == "false"


async def test_a_hostile_name_on_composes_labels_is_not_taken(bare: Bare) -> None:
    """Item 7: a container on the host that carries the service's Compose labels under a name Docker
    would never give (a leading dash, a metacharacter) is not what the console names, follows or
    acts on: it keeps Compose's own PROJECT-SERVICE-1."""
    from console.host.sources.container import ContainerWatcher

    root = bare.root
    (root / "shared" / "models").mkdir(parents=True)
    compose = _compose_file(root, container_names=False)
    obj = _inspect(root, "x", "shared/models", running=True, model="M", extra=[])
    obj["Name"] = "/--rm;touch pwned"
    obj["Config"]["Labels"] = {"com.docker.compose.project": "sglang", "com.docker.compose.service": "qwen122b"}
    add_container(root, obj)
    cw = ContainerWatcher(bare.transport, "qwen122b", None, compose_file=str(compose), compose_service="qwen122b")
    report = await cw.poll()
    assert cw.compose_container == "sglang-qwen122b-1" and report.new.name == "sglang-qwen122b-1"


# -- item 5 end to end: in place on a container, over sshd -------------------------------------------
async def test_in_place_on_a_container_end_to_end_over_sshd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24's in-place scenario with the serving unit mirrored as a container (its models'
    directory bound at its own path) and the new container created beside it, not started: the
    paths step reads both config.json through the mounts and chooses in place; the update goes to
    the containerised server (the fake SGLang) and succeeds; the step names the launch of a later
    restart; rolling back restarts the old container."""
    from console.demo.hostsim import downtime_scenario as ds

    _offline(tmp_path, monkeypatch)
    sim = HostSimulator(tmp_path / "host", speed=4 * SPEED, scenario="drive")  # the update and the reboot: seconds
    await sim.start()
    dt = await ds.start(sim, "in-place")
    try:
        await _in_place_on_containers(tmp_path, sim, dt)
    finally:
        await dt.close()
        await asyncio.wait_for(sim.stop(), 60)


async def _in_place_on_containers(tmp_path: Path, sim: HostSimulator, dt: Any) -> None:
    from console.demo.hostsim import downtime_scenario as ds
    from console.demo.hostsim.containers import container_inspect, mirror_units_as_containers
    from console.demo.hostsim.downloader import qwen122b_config, qwen122b_files
    from console.demo.hostsim.scenario import NEW_UNIT

    sizes = [f.size for f in qwen122b_files() if f.path.endswith(".safetensors")]
    ds.write_model(sim.path(ds.FT_MODEL_DIR), qwen122b_config(), sizes)  # downloaded beside (the download step's)
    old, new = "sglang-qwen122b", "sglang-qwen122b-ft"
    (sim.root / ".sim" / MAP_FILE).write_text(json.dumps({"containers": {old: NEW_UNIT}}))
    sim.add_task(mirror_units_as_containers(sim, {NEW_UNIT: (old, "/shared/models", "lmsysorg/sglang:v0.5.23-cu129",
                                                             "=")}, every_s=0.1))
    created = container_inspect(sim, NEW_UNIT, new, "/shared/models", {"active": "inactive"}, inside="=")
    created["Args"] = [a.replace("Qwen3.5-122B-A10B", "Qwen3.5-122B-A10B-ft") for a in created["Args"]]
    created["State"].update(Status="created")
    add_container(sim.root, created)
    profile = replace(dt.profile.with_overrides({"gpu_interval_s": 0.5}), unit=None, compare_unit=None,
                      unit_draft=None, container=new, compare_container=old)
    async with _over_sshd(tmp_path, sim, profile, _recordings_in(tmp_path)) as d:
        state, swap = d.state, d.runner.swap
        await _until(lambda: state.data("server") is not None and state.data("server").status == "ready", 120,
                     "the containerised server ready")
        await _until(lambda: state.data("service") is not None and state.data("service").old is not None
                     and state.data("gpu") is not None, 30, "service and GPU readings")
        st, detail = await _run(d, "paths", 120)
        assert st == "done", detail
        assert swap.fast.chosen == "in-place", swap.fast.plan.lines()
        assert swap.fast.old_model_path == sim.host_path("/shared/models/Qwen3.5-122B-A10B")
        st, detail = await _run(d, "install", 60)
        assert st == "done" and f"{new} exists (created)" in detail, detail
        (action,) = swap.build("in_place")
        assert f'"model_path": "{sim.host_path(ds.FT_MODEL_DIR)}"' in action.commands[0].script
        st, detail = await _run(d, "in_place", 300)
        assert st == "done" and "weights updated in place" in detail, detail
        assert f"a later restart is `docker start {new}`" in detail, detail
        assert await _running(d, old) == "true" and await _running(d, new) == "false"
        why, preview = swap.preview("rollback")
        assert preview is not None, why
        assert f"timeout -k 5 120 docker restart -t 60 -- {old}" in preview.lines
        st, detail = await _run(d, "rollback", 300)
        assert st == "done" and f"{old} ready again" in detail and "the old weights" in detail, detail


def _recordings_in(tmp_path: Path) -> Callable[[Any], None]:
    def setup(swap: Any) -> None:
        swap.fast.recordings_dir = tmp_path / "recordings"

    return setup


async def test_beside_on_containers_end_to_end_over_sshd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24's beside host (8 GPUs, the 397B on 0-3, a router) with both services as containers:
    the new one created with `--gpus '"device=4,5,6,7"'` and the next port; paths chooses beside, the
    new container starts and gets ready while the old serves, the router moves the traffic and the
    old container stops with `docker stop`: downtime 0."""
    from console.demo.hostsim import downtime_scenario as ds

    _offline(tmp_path, monkeypatch)
    sim = HostSimulator(tmp_path / "host", speed=4 * SPEED, scenario="drive")
    await sim.start()
    dt = await ds.start(sim, "beside")
    try:
        await _beside_on_containers(tmp_path, sim, dt)
    finally:
        await dt.close()
        await asyncio.wait_for(sim.stop(), 60)


async def _beside_on_containers(tmp_path: Path, sim: HostSimulator, dt: Any) -> None:
    from console.demo.hostsim import downtime_scenario as ds
    from console.demo.hostsim.containers import mirror_units_as_containers
    from console.demo.hostsim.downloader import qwen122b_config, qwen122b_files
    from console.demo.hostsim.scenario import NEW_UNIT, OLD_UNIT
    from console.demo.hostsim.services import UNITS_DIR
    from console.domain.swap.fastpath import beside_unit_text

    sizes = [f.size for f in qwen122b_files() if f.path.endswith(".safetensors")]
    ds.write_model(sim.path("/shared/models/Qwen3.5-122B-A10B"), qwen122b_config(), sizes)
    port = sim.server_port + 1
    draft = Path(dt.profile.unit_draft or "").read_text()
    sim.path(f"{UNITS_DIR}/{NEW_UNIT}").write_text(beside_unit_text(draft, (4, 5, 6, 7), port))  # docker create …
    old, new = "sglang-qwen397b", "sglang-qwen122b"
    (sim.root / ".sim" / MAP_FILE).write_text(json.dumps({"containers": {old: OLD_UNIT, new: NEW_UNIT}}))
    image = "lmsysorg/sglang:v0.5.23-cu129"
    sim.add_task(mirror_units_as_containers(sim, {OLD_UNIT: (old, "/data/models", image, "="),
                                                  NEW_UNIT: (new, "/shared/models", image, "=")}, every_s=0.1))
    profile = replace(dt.profile.with_overrides({"gpu_interval_s": 0.5, "router_url": dt.router_url}), unit=None,
                      compare_unit=None, unit_draft=None, container=new, compare_container=old)
    async with _over_sshd(tmp_path, sim, profile, _recordings_in(tmp_path)) as d:
        state, swap = d.state, d.runner.swap
        await _until(lambda: state.data("server") is not None and state.data("server").status == "ready", 120,
                     "the old server ready")
        await _until(lambda: state.data("service") is not None and state.data("service").old is not None
                     and state.data("gpu") is not None and len(state.data("gpu").gpus) == 8
                     and any(g.processes for g in state.data("gpu").gpus), 60, "service and GPU readings")
        st, detail = await _run(d, "paths", 120)
        assert st == "done" and swap.fast.chosen == "beside", (detail, swap.fast.plan and swap.fast.plan.lines())
        (action,) = swap.build("beside")
        check, start = (c.script for c in action.commands)  # the port first: the containers share the host's network
        assert "-- /proc/net/tcp /proc/net/tcp6" in check and start == f"timeout -k 5 60 docker start -- {new}"
        st, detail = await _run(d, "beside", 300)
        assert st == "done" and f"ready on port {port} (GPUs 4,5,6,7)" in detail, detail
        assert await _running(d, old) == "true"
        st, detail = await _run(d, "switch_traffic", 300)
        assert st == "done" and "downtime 0" in detail, detail
        assert await _running(d, old) == "false" and await _running(d, new) == "true"
        audit = [e.command for e in state.swap.audit]
        assert f"timeout -k 5 90 docker stop -t 60 -- {old}" in audit
        assert not any("systemctl" in c for c in audit)
