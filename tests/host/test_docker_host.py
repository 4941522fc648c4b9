"""Containers on a (simulated) host over the one SSH connection (issue 26): the service source
reads `docker inspect`/`docker ps` through the host's `docker` CLI, the log follows
`docker logs --follow --timestamps`, and hostile names or a daemon that is down give one line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from console.demo.hostsim.fake_docker import DAEMON_DOWN, add_container, append_log
from console.host.sources.container import ContainerWatcher
from console.host.sources.log import LogFollower
from tests.kit.docker import inspect as _inspect

DATA = Path(__file__).parent.parent / "data" / "docker"
REAL_DECODE = ("[2025-03-05 07:34:52 TP0] Decode batch. #running-req: 1, #token: 1024, token usage: 0.00, "
               "gen throughput (token/s): 54.09, #queue-req: 0")  # sglang_real_lines.txt's shape


async def test_the_service_source_reads_two_containers_through_the_hosts_docker(sim, sim_transport):
    root = sim.root
    (root / "shared" / "models" / "Qwen3.5-122B-A10B").mkdir(parents=True)
    add_container(root, _inspect(root, "sglang-qwen397b", "data/models", running=True,
                                 model="Qwen3.5-397B-A17B-NVFP4", extra=["--quantization", "modelopt_fp4"]))
    add_container(root, _inspect(root, "sglang-qwen122b", "shared/models", running=False,
                                 model="Qwen3.5-122B-A10B", extra=["--speculative-algorithm", "NEXTN"]))
    watcher = ContainerWatcher(sim_transport, "sglang-qwen122b", "sglang-qwen397b",
                               forbidden_prefixes=(str(root / "data"),))
    report = await watcher.poll()
    assert report.errors == ()
    flags = {c.flag: c for c in report.changes}
    assert flags["--quantization"].change == "removed" and flags["--speculative-algorithm"].change == "added"
    assert flags["mount /models"].new == f"bind {root}/shared/models (ro)"
    assert report.new.active_state == "exited" and report.old is not None and report.old.active_state == "active"
    assert set(report.units_on_host) == {"sglang-qwen122b", "sglang-qwen397b"}
    # the new model's directory exists on the host (through the mount): no "not mounted"/"does not exist" error
    assert not [x for x in report.lints if x.severity == "error"], report.lints
    # the old container's host path is under the forbidden prefix: said on the old side only when it is the new
    watcher.swap()
    swapped = await watcher.poll()
    assert any("is under" in x.message and x.severity == "error" for x in swapped.lints)


async def test_a_daemon_that_is_down_or_a_missing_container_is_one_line(sim, sim_transport):
    watcher = ContainerWatcher(sim_transport, "nope", None)
    report = await watcher.poll()
    # The real CLI's words (tests/data/real/docker_inspect_missing.*): never "No such object" with --type
    assert report.new.error == "nope: Error response from daemon: No such container: nope"
    (sim.root / ".sim" / "docker-down").write_text("")
    report = await watcher.poll()
    assert report.new.error == f"nope: {DAEMON_DOWN}"


async def test_hostile_container_names_reach_docker_as_one_operand(sim, sim_transport, tmp_path):
    marker = tmp_path / "pwned"
    for name in (f"x; touch {marker}", f"$(touch {marker})", "--help", f"`touch {marker}`", "-f\nls"):
        report = await ContainerWatcher(sim_transport, name, None).poll()
        assert report.new.error is not None and "No such container" in report.new.error
        assert "\n" not in report.new.error
    assert not marker.exists()


async def test_escape_sequences_in_docker_output_never_reach_the_pane(sim, sim_transport):
    name = "evil\x1b]0;TITLE\x07"
    report = await ContainerWatcher(sim_transport, name, None).poll()
    assert report.new.error is not None and "\x1b" not in report.new.error and "\x07" not in report.new.error


async def test_the_log_follows_docker_logs_with_dockers_timestamps_and_resumes_without_repeats(sim, sim_transport):
    root = sim.root
    add_container(root, _inspect(root, "sglang-qwen122b", "shared/models", running=True,
                                 model="Qwen3.5-122B-A10B", extra=[]),
                  ["INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)", REAL_DECODE])
    follower = LogFollower(sim_transport, container="sglang-qwen122b")
    assert follower.label == "docker logs of sglang-qwen122b"
    seen: list = []

    async def read(n: int) -> None:
        async for batch in follower.batches():
            seen.extend(batch.events)
            if len(seen) >= n:
                return

    await asyncio.wait_for(read(2), 30)
    uvicorn, decode = seen[0], seen[1]
    assert uvicorn.ts is not None and uvicorn.ts[:2] == "20"  # Docker's time: the line had none
    assert decode.kind == "decode" and decode.ts == "2025-03-05 07:34:52"  # SGLang's own time wins
    first_since = follower.since
    assert first_since is not None
    # a reconnect resumes with --since the last line's timestamp; a line at that very instant is not repeated
    command, note = await follower._command()
    assert f"--since {first_since}" in command and note is not None and "-- sglang-qwen122b" in command
    assert follower._decode(f"{first_since} again".encode()) is None
    append_log(root, "sglang-qwen122b", "later line")
    await asyncio.wait_for(read(3), 30)
    assert seen[2].text.endswith("later line")


async def test_a_unit_not_installed_yet_says_so_not_a_parse_error(sim, sim_transport):
    """`systemctl cat` of a unit with no file exits 1; the script read the exit status of its own
    `echo` (always 0), so the pane said "(error) · not a unit file" (issue 22 item 10)."""
    from console.host.sources.service import ServiceWatcher

    report = await ServiceWatcher(sim_transport, "sglang-nothere.service", None).poll()
    assert report.new.error == "sglang-nothere.service: not installed yet"


class _ScriptedTransport:
    """Answers the one lookup script with what a Docker host prints (cgroup v2, docker ps)."""

    def __init__(self, text: str) -> None:
        self.text, self.scripts = text, []

    async def run(self, script: str, *, timeout: float = 10.0):
        from console.host.transport.base import CommandResult

        self.scripts.append(script)
        return CommandResult(0, self.text.encode(), b"", 0.01)


async def test_gpu_processes_are_named_by_their_container():
    from console.model import GpuDevice, GpuProcess
    from console.ui.panes.gpu import format_gpu_status
    from console.host.sources.gpu import GpuSource

    cid = "3f1c9e2a7b6d4c5e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9012a3b4c5d6e7"
    transport = _ScriptedTransport(f"@@pid48213\n{(DATA / 'cgroup_v2_docker.txt').read_text()}"
                                   f"@@pid777\n{(DATA / 'cgroup_host.txt').read_text()}"
                                   f"@@names\n{cid} sglang-qwen397b\n")
    source = GpuSource(transport, local=False)  # type: ignore[arg-type]
    gpu = GpuDevice(0, "NVIDIA H200", "GPU-0", 1000, 143771, 0, 30, 100.0, 700.0,
                    processes=(GpuProcess(48213, "python3", 90000), GpuProcess(777, "python3", 2000)))
    first = source._status("nvml", (gpu,), (), None)
    assert all(p.container is None for p in first.data.gpus[0].processes)  # looked up in the background
    await source._container_task
    assert transport.scripts and "for p in 777 48213;" in transport.scripts[0]
    second = source._status("nvml", (gpu,), (), None)
    by_pid = {p.pid: p.container for p in second.data.gpus[0].processes}
    assert by_pid == {48213: "sglang-qwen397b", 777: None}
    text = format_gpu_status(second, width=100, height=12).plain
    assert "sglang-qwen397b: python3" in text
    source._status("nvml", (gpu,), (), None)
    assert len(transport.scripts) == 1  # known pids are not looked up again


async def test_the_container_lookup_script_runs_in_a_real_shell():
    import os

    from console.host.sources.gpu import GpuSource
    from console.host.transport.local import LocalTransport

    source = GpuSource(LocalTransport(), local=True)
    await source._lookup_containers([os.getpid()])
    assert os.getpid() in source._containers  # answered (this process is in no Docker container here or is)


async def test_the_log_moves_from_the_old_container_to_the_new_when_the_old_stops(sim, sim_transport):
    """`docker logs -f` ends when its container stops; the follower then follows the running one."""
    from console.demo.hostsim.fake_docker import main as docker_cli

    root = sim.root
    add_container(root, _inspect(root, "old", "data/models", running=True, model="A", extra=[]), ["old line 1"])
    add_container(root, _inspect(root, "new", "shared/models", running=False, model="B", extra=[]), [])
    follower = LogFollower(sim_transport, container="new", compare_container="old")
    seen: list = []
    notes: list = []

    async def read(pred) -> None:
        async for batch in follower.batches():
            seen.extend(e.text for e in batch.events)
            notes.extend(n for n in (batch.note, batch.error) if n)
            if pred():
                return

    await asyncio.wait_for(read(lambda: "old line 1" in seen), 30)
    import os
    os.environ["GPUSIM_ROOT"] = str(root)
    try:
        docker_cli(["stop", "old"])
        docker_cli(["start", "new"])
    finally:
        del os.environ["GPUSIM_ROOT"]
    append_log(root, "new", "new line 1")
    await asyncio.wait_for(read(lambda: "new line 1" in seen), 60)
    assert seen.count("old line 1") == 1, (seen, notes)


async def test_the_docker_demo_scenario_shows_the_seeds_services_as_containers(tmp_path):
    from console.demo.hostsim import HostSimulator
    from console.demo.hostsim.scenario import NEW_CONTAINER, OLD_CONTAINER, demo_profile, start_scenario
    from console.host.transport.ssh import SshTransport
    from tests.kit.hosts import sim_options, wait_for

    sim = HostSimulator(tmp_path / "host", scenario="docker")
    await sim.start()
    transport = SshTransport(sim_options(sim))
    try:
        await start_scenario(sim)
        profile = demo_profile(sim)
        assert (profile.unit, profile.container, profile.compare_container) == (None, NEW_CONTAINER, OLD_CONTAINER)
        old_json = sim.root / ".sim" / "containers" / f"{OLD_CONTAINER}.json"
        # Running, not only mirrored: under load the file appears before the old service's process runs.
        await wait_for(lambda: old_json.exists() and json.loads(old_json.read_text())["State"]["Running"], 30)
        await transport.connect()
        watcher = ContainerWatcher(transport, NEW_CONTAINER, OLD_CONTAINER,
                                   forbidden_prefixes=profile.forbidden_prefixes)
        report = await watcher.poll()
        assert report.errors == () and report.old is not None and report.old.active_state == "active"
        flags = {c.flag: c for c in report.changes}
        assert flags["--quantization"].change == "removed"
        assert flags["mount /models"].new == f"bind {sim.root}/shared/models (ro)"
    finally:
        await transport.close()
        await sim.stop()


async def test_the_docker_demo_names_the_container_holding_each_gpus_memory(tmp_path):
    """The GPU pane names a process's container from `/proc/PID/cgroup` and `docker ps`, as on a
    real Docker host (systemd cgroup driver): the simulated GPU processes answer with their
    container's cgroup, and a pid of no simulated container answers as the host's own."""
    from console.demo.hostsim import HostSimulator, story
    from console.demo.hostsim.scenario import NEW_CONTAINER, OLD_CONTAINER, start_scenario
    from console.host.sources.gpu import GpuSource
    from console.host.transport.ssh import SshTransport
    from console.ui.panes.gpu import format_gpu_status
    from tests.kit.hosts import sim_options

    sim = HostSimulator(tmp_path / "host", scenario="docker")
    await sim.start()
    transport = SshTransport(sim_options(sim))
    try:
        await start_scenario(sim)
        await transport.connect()
        source = GpuSource(transport, local=False)
        source.container_retry_s = 1.0  # a container docker ps did not list yet: asked again soon

        async def first_named():
            async for reading in source.readings():
                procs = [p for g in (reading.data.gpus if reading.data else ()) for p in g.processes]
                # named, not by the 12 digits of an id docker ps did not list yet (looked up again)
                if procs and all(p.container and p.container.startswith("sglang-") for p in procs):
                    return reading

        reading = await asyncio.wait_for(first_named(), 60)
        held = {p.pid: p.container for g in reading.data.gpus for p in g.processes}
        assert held == {story.OLD_PID_BASE + i: OLD_CONTAINER for i in range(story.GPU_COUNT)}
        assert f"{OLD_CONTAINER}: sglang::scheduler_TP0" in format_gpu_status(reading, width=120, height=20).plain
        await source._lookup_containers([1])  # this machine's init: in no container
        assert source._containers[1] is None and NEW_CONTAINER not in held.values()  # not started yet
    finally:
        await transport.close()
        await sim.stop()


async def test_beside_the_log_follows_the_new_container_while_the_old_one_keeps_running(sim, sim_transport):
    """Beside, the old container serves on while the new one boots: both logs are followed at once,
    each line saying which container wrote it, and each resumes at its own last line's time."""
    from console.demo.hostsim.fake_docker import main as docker_cli

    root = sim.root
    add_container(root, _inspect(root, "old", "data/models", running=True, model="A", extra=[]), ["old line 1"])
    add_container(root, _inspect(root, "new", "shared/models", running=False, model="B", extra=[]), [])
    follower = LogFollower(sim_transport, container="new", compare_container="old")
    seen: list = []

    async def read(pred) -> None:
        async for batch in follower.batches():
            seen.extend((e.fields.get("container"), e.text) for e in batch.events)
            if pred():
                return

    await asyncio.wait_for(read(lambda: ("old", "old line 1") in seen), 30)
    import os
    os.environ["GPUSIM_ROOT"] = str(root)
    try:
        docker_cli(["start", "new"])  # the old one is not stopped
    finally:
        del os.environ["GPUSIM_ROOT"]
    append_log(root, "new", "[2026-12-01 08:00:00] server_args=ServerArgs(model_path='/models/B', tp_size=4)")
    append_log(root, "old", "old line 2")
    await asyncio.wait_for(read(lambda: ("old", "old line 2") in seen and any(w == "new" for w, _ in seen)), 60)
    assert follower.tracker.summary().boot[0].phase == "launch"  # the new container's boot, read live
    # The stream read again (a reconnect): each container resumes after its own last line
    append_log(root, "new", "new line 2")
    append_log(root, "old", "old line 3")
    await asyncio.wait_for(read(lambda: ("new", "new line 2") in seen and ("old", "old line 3") in seen), 60)
    texts = [t for _, t in seen]
    assert [texts.count(t) for t in ("old line 1", "old line 2", "new line 2")] == [1, 1, 1], seen
