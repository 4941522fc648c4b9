"""The forbidden-prefix check normalises paths, lexically and on the host by realpath, in one rule
the gate and the lint share (issue 21, item 14): `/shared/../data/m` and `//data/m` passed a "no
path under /data" check."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from console.analysis.service_diff import HostFacts, lint
from console.parsers.sglang_argv import normalize
from console.paths import exists_and_real_script, forbidden_prefix, parse_exists_and_real
from console.swap.preflight import _under

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
