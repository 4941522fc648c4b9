"""The deployment swap stops and starts systemd units; a node whose profile serves SGLang from a
container (or names no unit) cannot be swapped by it. The preview raised "not a unit name: None" and
the run was refused with the same words; `gpuconsole deploy --deployment NAME --once --swap` died
with a traceback. Now every door says which node, why, and what to do instead, and nothing runs."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from console.domain.deploy.swap import DeploymentSwap
from console.domain.swap.actions import ActionError
from tests.kit.deploy import FakeWatch, deployment

CONTAINER_SAID = "node 0 runs SGLang in a container (sglang-new): the deployment swap stops and starts systemd units"


def _containers() -> FakeWatch:
    d = deployment(nodes=2)
    return FakeWatch(replace(d, nodes=tuple(replace(n, profile=replace(
        n.profile, unit=None, compare_unit=None, container="sglang-new", compare_container="sglang-old"))
        for n in d.nodes)))


def test_the_preview_and_the_run_say_which_node_runs_a_container_and_nothing_runs() -> None:
    watch = _containers()
    swap = DeploymentSwap(watch, who="ana")
    with pytest.raises(ActionError, match=re.escape(CONTAINER_SAID)):
        swap.preview()
    run = asyncio.run(swap.run(confirmed=True))
    assert run.outcome.startswith(f"refused: {CONTAINER_SAID}") and "gpuconsole --profile" in run.outcome
    assert not any(h.ran for h in watch.hosts.values() if h is not None)


def test_a_node_without_its_old_unit_is_named_with_the_key_it_lacks() -> None:
    d = deployment(nodes=2)
    watch = FakeWatch(replace(d, nodes=tuple(replace(n, profile=replace(n.profile, unit="new.service",
                                                                        compare_unit=None)) for n in d.nodes)))
    with pytest.raises(ActionError, match="node 0: its profile names no compare_unit"):
        DeploymentSwap(watch, who="ana").preview()


def test_the_command_line_says_it_in_one_line_and_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("""
[profiles.gpu-a]
host = "127.0.0.1"
port = 1
container = "sglang-new"
compare_container = "sglang-old"

[profiles.gpu-b]
host = "127.0.0.1"
port = 1
container = "sglang-new"
compare_container = "sglang-old"

[deployments.big]
kind = "multinode"
nodes = [{ profile = "gpu-a", node_rank = 0 }, { profile = "gpu-b", node_rank = 1 }]
""")
    env = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_STATE_HOME": str(tmp_path / "state")}
    r = subprocess.run([sys.executable, "-m", "console", "--config", str(config), "--deployment", "big",
                        "--once", "--swap"], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "node 0 runs SGLang in a container (sglang-new)" in r.stderr and "nothing ran" in r.stderr, r.stderr
