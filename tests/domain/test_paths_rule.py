"""The forbidden-prefix check normalises paths, lexically and on the host by realpath, in one rule
the gate and the lint share (issue 21, item 14): `/shared/../data/m` and `//data/m` passed a "no
path under /data" check."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from console.domain.analysis.service_diff import HostFacts, lint
from console.host.parsers.sglang_argv import normalize
from console.domain.paths import exists_and_real_script, forbidden_prefix, parse_exists_and_real
from console.domain.swap.preflight import _under

UNDER = ["/data/m", "/shared/../data/m", "//data/m", "///data/m", "/data/./m", "/data", "/data/", "/./data/x/../m"]
NOT_UNDER = ["/database/m", "/shared/m", "/shared/data/m", "/dat"]


def _lint_errors(path: str, facts: HostFacts) -> list[str]:
    cmd = normalize(["python", "-m", "sglang.launch_server", "--model-path", path, "--tp-size", "1"])
    return [x.message for x in lint(cmd, facts) if x.severity == "error" and "forbids" in x.message]


@pytest.mark.parametrize("path", UNDER)
def test_a_path_under_the_prefix_in_any_spelling_is_refused_by_gate_and_lint(path: str) -> None:
    assert _under(path, "/data") and _under(path, "/data/")
    assert _lint_errors(path, HostFacts(forbidden_prefixes=("/data",)))


@pytest.mark.parametrize("path", NOT_UNDER)
def test_a_path_outside_it_passes_both(path: str) -> None:
    assert not _under(path, "/data")
    assert not _lint_errors(path, HostFacts(forbidden_prefixes=("/data",)))


def test_a_symlink_into_the_prefix_is_under_it_by_the_hosts_realpath(tmp_path: Path) -> None:
    data, shared = tmp_path / "data", tmp_path / "shared"
    (data / "m").mkdir(parents=True)
    shared.mkdir()
    (shared / "m").symlink_to(data / "m")
    paths = [str(shared / "m"), str(shared / "new")]
    out = subprocess.run(["/bin/sh", "-c", exists_and_real_script(paths)], capture_output=True, text=True, timeout=10)
    exists, real = parse_exists_and_real(paths, out.stdout)
    assert exists == {paths[0]: True, paths[1]: False}
    assert real[paths[0]] == str(data / "m")
    assert forbidden_prefix(paths[0], (str(data),)) is None  # lexically outside
    assert forbidden_prefix(paths[0], (str(data),), real[paths[0]]) == str(data)
    assert _under(paths[0], str(data), real[paths[0]])
    facts = HostFacts(forbidden_prefixes=(str(data),), real_paths=real, paths_exist=exists)
    assert _lint_errors(paths[0], facts)


def _gate_says(path: str, prefix: str, real: dict[str, str]) -> str:
    """What the swap gate's paths check tells the operator for a new unit whose --model-path is `path`."""
    from types import SimpleNamespace

    from console.domain.swap.preflight import check_paths

    cmd = normalize(["python", "-m", "sglang.launch_server", "--model-path", path])
    report = SimpleNamespace(new=SimpleNamespace(command=cmd), real_paths=real)
    check = check_paths(SimpleNamespace(data=lambda name: report if name == "service" else None), (prefix,), None)
    assert check.ok is not None, check
    return check.reason if check.ok is False else ""


def _host_real(paths: list[str]) -> dict[str, str]:
    out = subprocess.run(["/bin/sh", "-c", exists_and_real_script(paths)], capture_output=True, text=True, timeout=10)
    return parse_exists_and_real(paths, out.stdout)[1]


def test_a_symlink_outside_the_prefix_pointing_into_it_is_refused_by_gate_and_lint(tmp_path: Path) -> None:
    """/shared/m -> /data/m: the host's realpath is under /data, so the operator reads the refusal."""
    data, shared = tmp_path / "data", tmp_path / "shared"
    (data / "m").mkdir(parents=True)
    shared.mkdir()
    (shared / "m").symlink_to(data / "m")
    path = str(shared / "m")
    real = _host_real([path])
    assert f"--model-path {path} is under {data}" in _gate_says(path, str(data), real)
    assert _lint_errors(path, HostFacts(forbidden_prefixes=(str(data),), real_paths=real))


def test_a_path_under_the_prefix_that_is_a_symlink_out_of_it_is_still_refused(tmp_path: Path) -> None:
    """/data/m -> /shared/m: written under /data, it is under /data whatever it points to (the
    profile forbids the spelling as much as the place)."""
    data, shared = tmp_path / "data", tmp_path / "shared"
    (shared / "m").mkdir(parents=True)
    data.mkdir()
    (data / "m").symlink_to(shared / "m")
    path = str(data / "m")
    real = _host_real([path])
    assert real[path] == str(shared / "m")  # the host resolves it out of /data
    assert f"--model-path {path} is under {data}" in _gate_says(path, str(data), real)
    assert _lint_errors(path, HostFacts(forbidden_prefixes=(str(data),), real_paths=real))


def test_a_symlink_that_stays_outside_the_prefix_passes_the_gate(tmp_path: Path) -> None:
    data, shared, other = tmp_path / "data", tmp_path / "shared", tmp_path / "other"
    (other / "m").mkdir(parents=True)
    data.mkdir()
    shared.mkdir()
    (shared / "m").symlink_to(other / "m")
    path = str(shared / "m")
    assert _gate_says(path, str(data), _host_real([path])) == ""
