"""SGLang in a container (issue 26): the launch as SGLang reads it, from `docker inspect`, a
compose file and `docker ps`; the diff of two containers; which container holds a GPU process."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from console.domain.analysis.container_diff import build_container_report, side_from_container
from console.domain.analysis.service_diff import HostFacts
from console.domain.analysis.service_report import report_json
from console.demo.hostsim.fake_docker import docker_state_time
from console.host.parsers import ParseError
from console.host.parsers.docker import (
    ContainerState,
    GpuRequest,
    container_id_from_cgroup,
    docker_time,
    parse_compose,
    parse_inspect,
    parse_ps,
    parse_size,
    runs_sglang,
    sglang_version_of_image,
)

DATA = Path(__file__).parent.parent / "data" / "docker"
SECRET = "hf_sImUlAtEdToKeNnOtReAl0123456789"
FACTS = HostFacts(forbidden_prefixes=("/data",), gpu_count=4)


def compose(service: str | None = None):
    return parse_compose((DATA / "compose.yaml").read_text(), service)


def test_inspect_reads_the_launch_gpus_mounts_shm_and_state():
    [spec] = parse_inspect((DATA / "inspect_qwen397b.json").read_text())
    assert spec.name == "sglang-qwen397b" and spec.image == "lmsysorg/sglang:v0.5.23-cu129"
    assert spec.argv[0] == "/opt/nvidia/nvidia_entrypoint.sh" and "--quantization" in spec.argv
    assert spec.gpus == GpuRequest(-1, ()) and spec.gpus.visible(4) == 4
    assert spec.shm_size_bytes == 64 * 1024**2 and spec.ipc_mode == "host"
    assert [(m.source, m.destination, m.read_only) for m in spec.mounts][0] == ("/data/models", "/models", True)
    assert spec.ports == ("0.0.0.0:30000->30000/tcp",) and spec.restart_policy == "unless-stopped"
    assert spec.state is not None and spec.state.running and spec.state.pid == 48213
    assert sglang_version_of_image(spec.image) == "0.5.23"
    side = side_from_container(spec)
    # the entrypoint wrapper in front of `python3 -m sglang.launch_server` is a launcher, not an argument
    assert side.command is not None and side.command.value("--tp-size") == "4"
    assert SECRET not in (side.text or "") and SECRET not in json.dumps(side.environment)


def test_dockers_own_start_and_exit_times_are_read_to_the_nanosecond_and_its_zero_time_is_unknown():
    """`State.StartedAt`/`State.FinishedAt` as Docker prints them (Go's RFC3339Nano, trailing zeros
    of the fraction dropped): the service reading carries them; Docker's zero time, a date before
    1970 or anything not such a time is unknown (None), never an error or the epoch."""
    [spec] = parse_inspect((DATA / "inspect_qwen397b.json").read_text())
    side = side_from_container(spec)
    assert side.started_at_s == pytest.approx(1795851673.002117455, abs=1e-6) and side.finished_at_s is None
    real = json.loads((DATA.parent / "real" / "docker_inspect_host_network_ports.json").read_text())["stdout"]
    [created] = parse_inspect(real)  # the real dockerd's never-started container: both zero
    assert (side_from_container(created).started_at_s, side_from_container(created).finished_at_s) == (None, None)
    assert docker_time("2026-12-03T17:09:15.123456789Z") - docker_time("2026-12-03T17:09:15.123456Z") \
        == pytest.approx(789e-9, abs=1e-7)
    assert docker_time("2026-12-03T17:09:15.5Z") == docker_time("2026-12-03T18:09:15.5+01:00") \
        == docker_time("2026-12-03T17:09:15Z") + 0.5
    # the simulated Docker prints them the same way: its times read back as they were written
    for ns in (1796332166920414255, 1796332166000000000, 1796332166500000000):
        assert docker_time(docker_state_time(ns)) == pytest.approx(ns / 1e9, abs=1e-6)
    assert docker_state_time(1796332166500000000).endswith(":26.5Z") and docker_state_time(None) == \
        "0001-01-01T00:00:00Z"
    for bad in ("0001-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "2026-02-30T10:00:00Z", "2026-12-03T25:00:00Z",
                "2026-12-03 17:09:15Z", "2026-12-03T17:09:15.1234567891Z", "yesterday", "", None, 12,
                "2026-12-03T17:09:15Z" + "0" * 100):
        assert docker_time(bad) is None, bad


def test_compose_services_diff_as_the_seeds_units_do():
    old, new = compose("qwen397b"), compose("qwen122b")
    report = build_container_report(old, new, FACTS)
    flags = {c.flag: c for c in report.changes}
    assert flags["--quantization"].change == "removed" and flags["--speculative-algorithm"].change == "added"
    assert "--tp-size" not in flags  # --tp 4 is --tp-size 4
    # what only a container has: the model's host directory moved off /data
    assert flags["mount /models"].old == "bind /data/models (ro)"
    assert flags["mount /models"].new == "bind /shared/models (ro)"
    # each change says what it means (before: "gpus device=0,1,2,3 → all" and the mount, with no why)
    assert flags["mount /models"].reason == "the weights' host directory: /data/models → /shared/models"
    gpus = flags.get("gpus")
    if gpus is not None and gpus.new == "all":
        assert gpus.reason and "sees every GPU of the host" in gpus.reason, gpus
    # the old service's env_file is gone: a blind spot made visible
    gone = flags["env-file /etc/sglang/qwen397b.env"]
    assert gone.change == "removed" and "gone" in (gone.reason or "")
    assert not [x for x in report.lints if x.severity == "error"], report.lints
    text = json.dumps(report_json(report))
    assert SECRET not in text and "container" in text


def test_a_model_path_that_is_not_mounted_is_an_error():
    new = compose("qwen122b")
    unmounted = replace(new, mounts=tuple(m for m in new.mounts if m.destination != "/models"))
    lints = build_container_report(compose("qwen397b"), unmounted, FACTS).lints
    assert any(x.severity == "error" and "not mounted into the container" in x.message for x in lints)


def test_forbidden_prefix_applies_to_host_paths_not_container_paths():
    old = compose("qwen397b")  # mounts /data/models on the host: forbidden
    lints = build_container_report(None, old, FACTS).lints
    assert any(x.severity == "error" and "/data/models is under /data" in x.message for x in lints)
    # a container path under /data whose host path is /shared is fine
    new = compose("qwen122b")
    moved = replace(new, mounts=tuple(replace(m, destination="/data") if m.destination == "/models" else m
                                      for m in new.mounts),
                    argv=tuple(a.replace("/models/", "/data/") for a in new.argv))
    lints = build_container_report(None, moved, FACTS).lints
    assert not [x for x in lints if x.severity == "error"], lints


def test_a_change_of_the_gpus_given_says_what_the_server_sees():
    old, new = compose("qwen397b"), compose("qwen122b")
    four, every = replace(old, gpus=GpuRequest(None, ("0", "1", "2", "3"))), replace(new, gpus=GpuRequest(-1))
    flags = {c.flag: c for c in build_container_report(four, every, FACTS).changes}
    assert flags["gpus"].old == "device=0,1,2,3" and flags["gpus"].new == "all"
    assert "sees every GPU of the host (the old one device=0,1,2,3)" in flags["gpus"].reason
    back = {c.flag: c for c in build_container_report(every, four, FACTS).changes}
    assert back["gpus"].reason == "the new container sees only device=0,1,2,3 (the old one every GPU of the host)"
    moved = replace(four, gpus=GpuRequest(None, ("4", "5", "6", "7")))
    assert "device=0,1,2,3 → device=4,5,6,7" in {c.flag: c for c in build_container_report(
        four, moved, FACTS).changes}["gpus"].reason


def test_tp_larger_than_the_gpus_the_container_sees():
    new = compose("qwen122b")
    two = replace(new, gpus=GpuRequest(None, ("0", "1")))
    lints = build_container_report(None, two, FACTS).lints
    assert any(x.flag == "--tp-size" and "sees 2" in x.message for x in lints)
    env_limited = replace(new, gpus=GpuRequest(-1), env=new.env + (("CUDA_VISIBLE_DEVICES", "0,1,2"),))
    lints = build_container_report(None, env_limited, FACTS).lints
    assert any(x.flag == "--tp-size" and "sees 3" in x.message for x in lints)
    none = replace(new, gpus=None)
    assert any(x.flag == "gpus" for x in build_container_report(None, none, FACTS).lints)


def test_tp_without_shared_memory_is_a_warning():
    new = replace(compose("qwen122b"), ipc_mode=None, shm_size_bytes=None)
    lints = build_container_report(None, new, FACTS).lints
    assert any(x.flag == "shm-size" and x.severity == "warning" for x in lints)
    ok = replace(new, shm_size_bytes=parse_size("32g"))
    assert not any(x.flag == "shm-size" for x in build_container_report(None, ok, FACTS).lints)


def test_a_container_restarting_in_a_loop_says_so_with_its_exit_code():
    [spec] = parse_inspect((DATA / "inspect_qwen397b.json").read_text())
    looping = replace(spec, state=ContainerState("restarting", restarting=True, exit_code=137, oom_killed=True,
                                                 restart_count=7))
    lints = build_container_report(None, looping, FACTS).lints
    [loop] = [x for x in lints if x.flag == "restart"]
    assert "7 restarts" in loop.message and "137" in loop.message and "OOM" in loop.message


def test_an_image_with_no_sglang_is_one_clear_error():
    spec = replace(compose("qwen122b"), argv=("nginx", "-g", "daemon off;"), image="nginx:1.27")
    side = side_from_container(spec)
    assert side.command is None and "does not run SGLang" in (side.error or "")
    report = build_container_report(None, spec, FACTS)
    assert report.errors and "nginx:1.27" in report.errors[0]


def test_an_image_version_other_than_the_flag_table_is_said():
    new = replace(compose("qwen122b"), image="lmsysorg/sglang:v0.5.5-cu126")
    lints = build_container_report(compose("qwen397b"), new, FACTS)
    image = [c for c in lints.changes if c.flag == "image"][0]
    assert "0.5.23 → 0.5.5" in (image.reason or "")
    assert any(x.flag == "image" and "SGLang 0.5.5" in x.message for x in lints.lints)
    assert sglang_version_of_image("lmsysorg/sglang:latest") is None


@pytest.mark.parametrize("text, why", [
    ("services: [unclosed", "does not parse"),
    ("version: '3'\n", "no services"),
    ("services:\n  web:\n    image: nginx\n", "0 of its services run SGLang"),
])
def test_a_compose_file_that_does_not_parse_or_has_no_sglang(text, why):
    with pytest.raises(ParseError, match=why):
        parse_compose(text)


def test_compose_finds_the_sglang_service_or_asks_for_a_name():
    with pytest.raises(ParseError, match="2 of its services run SGLang"):
        compose()
    with pytest.raises(ParseError, match="no service 'nope'"):
        compose("nope")


@pytest.mark.parametrize("text", ["[", "{}", "[1]", '[{"Config": 3, "HostConfig": {}}]', "[" * 100000])
def test_bad_inspect_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse_inspect(text)


def test_ps_lists_containers_and_which_run_sglang():
    rows = parse_ps((DATA / "ps.jsonl").read_text() + "not json\n{\n")
    assert [r.name for r in rows] == ["sglang-qwen397b", "prometheus"]
    assert [runs_sglang(r.command) for r in rows] == [True, False]


def test_gpu_processes_map_to_their_container_through_the_cgroup():
    cid = "3f1c9e2a7b6d4c5e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9012a3b4c5d6e7"
    assert container_id_from_cgroup((DATA / "cgroup_v2_docker.txt").read_text()) == cid
    assert container_id_from_cgroup((DATA / "cgroup_v1_docker.txt").read_text()) == cid
    assert container_id_from_cgroup((DATA / "cgroup_host.txt").read_text()) is None


def test_gpuconsole_diff_takes_compose_services_and_inspect_files(tmp_path):
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "c"), "XDG_DATA_HOME": str(tmp_path / "d"),
           "PATH": "/usr/bin:/bin"}
    old, new = f"{DATA / 'compose.yaml'}:qwen397b", f"{DATA / 'compose.yaml'}:qwen122b"
    out = subprocess.run([sys.executable, "-m", "console", "diff", old, new, "--json"], capture_output=True,
                         text=True, timeout=60, env=env, cwd=Path(__file__).parent.parent.parent)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert any(c["flag"] == "mount /models" for c in data["changes"]) and SECRET not in out.stdout
    inspect = str(DATA / "inspect_qwen397b.json")
    out = subprocess.run([sys.executable, "-m", "console", "diff", inspect, new, "--json"], capture_output=True,
                         text=True, timeout=60, env=env, cwd=Path(__file__).parent.parent.parent)
    assert out.returncode == 0, out.stderr
    assert any(c["flag"] == "--quantization" for c in json.loads(out.stdout)["changes"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("services: [unclosed")
    out = subprocess.run([sys.executable, "-m", "console", "diff", f"{bad}:x", new], capture_output=True,
                         text=True, timeout=60, env=env, cwd=Path(__file__).parent.parent.parent)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_a_docker_inspect_of_8_mib_is_read_and_a_larger_one_is_refused_as_not_docker_output() -> None:
    from console.host.parsers.docker import ParseError, parse_inspect

    doc = json.dumps([{"Id": "c0ffee", "Name": "/sglang-new", "Config": {"Image": "lmsysorg/sglang:v0.5.23"},
                       "HostConfig": {}}])
    at_cap = doc + " " * ((8 << 20) - len(doc))
    (spec,) = parse_inspect(at_cap)
    assert spec.name == "sglang-new"
    with pytest.raises(ParseError, match=r"^docker inspect: 8388609 bytes is not a container's inspect$"):
        parse_inspect(at_cap + " ")
