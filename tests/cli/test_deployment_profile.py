"""A deployment in the profile (issue 37): its nodes are host profiles (reached as those hosts are)
in a role at a node rank; every malformed table is one ConfigError line naming what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.config import ConfigError, load_config

HOSTS = """
[profiles.gpu-a]
host = "10.0.0.1"
user = "ana"
identity = "~/.ssh/id_gpu"
unit = "sglang.service"
model_dir = "/models/q"

[profiles.gpu-b]
host = "gpu-b.internal"
port = 2222
unit = "sglang.service"

[profiles.edge]
host = "10.0.0.9"
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.toml"
    p.write_text(HOSTS + text)
    return p


def test_a_multinode_deployment_names_its_hosts_profiles_with_their_ssh_options(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, """
[deployments.big]
kind = "multinode"
nodes = [{ profile = "gpu-a", node_rank = 0 }, { profile = "gpu-b", node_rank = 1, unit = "sglang-n1.service" }]
"""))
    d = cfg.deployment("big")
    assert [n.key for n in d.nodes] == ["node0", "node1"]
    assert d.nodes[0].profile.user == "ana" and d.nodes[0].profile.identity == "~/.ssh/id_gpu"
    assert d.nodes[1].profile.port == 2222 and d.nodes[1].profile.unit == "sglang-n1.service"
    assert [n.label for n in d.groups[0][1]] == ["node 0", "node 1"]


def test_a_pd_deployment_has_prefill_decode_and_a_router(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, """
[deployments.pd]
kind = "pd"
nodes = [{ profile = "gpu-a", role = "prefill" }, { profile = "gpu-b", role = "decode" },
         { profile = "edge", role = "router" }]
"""))
    d = cfg.deployment("pd")
    assert [g for g, _ in d.groups] == ["prefill", "decode"]
    assert d.node("router").profile.host == "10.0.0.9"


@pytest.mark.parametrize("table, says", [
    ('nodes = [{ profile = "gpu-a" }]', "at least two nodes"),
    ('nodes = [{ profile = "gpu-a" }, { profile = "nope", node_rank = 1 }]', "no profile named 'nope'"),
    ('nodes = [{ profile = "gpu-a" }, { profile = "gpu-b", node_rank = 0 }]', "same role and node_rank: node0"),
    ('nodes = [{ profile = "gpu-a" }, { profile = "gpu-b", node_rank = 2 }]', "node_rank must be 0..1"),
    ('nodes = [{ profile = "gpu-a" }, { profile = "gpu-b", node_rank = "1" }]', "node_rank must be a whole number"),
    ('nodes = [{ profile = "gpu-a" }, { profile = "gpu-b", node_rank = 1, role = "boss" }]', "role must be one of"),
    ('nodes = [{ profile = "gpu-a" }, { profile = "gpu-b", node_rank = 1, host = "x" }]', "unknown keys: host"),
    ('nodes = [{ profile = "gpu-a" }, { profile = "gpu-b", node_rank = 1, unit = "--evil" }]', "unit must be a name"),
    ('kind = "ring"\nnodes = []', "kind must be multinode or pd"),
    ('kind = "pd"\nnodes = [{ profile = "gpu-a", role = "prefill" }]', "needs at least one decode node"),
    ('nodes = [{ profile = "gpu-a", role = "prefill" }, { profile = "gpu-b", role = "decode" }]', "belong to kind"),
])
def test_a_malformed_deployment_is_one_config_error_naming_it(tmp_path: Path, table: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, f"\n[deployments.big]\n{table}\n"))
    assert says in str(err.value) and "deployment 'big'" in str(err.value)
    assert "\n" not in str(err.value)


def test_an_unknown_deployment_lists_the_known_ones(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, """
[deployments.big]
nodes = [{ profile = "gpu-a" }, { profile = "gpu-b", node_rank = 1 }]
"""))
    with pytest.raises(ConfigError, match=r"no deployment named 'small'.*\(deployments: big\)"):
        cfg.deployment("small")


def test_may_differ_names_flags_but_never_the_rendezvous_ones(tmp_path: Path) -> None:
    base = '\n[deployments.big]\nnodes = [{ profile = "gpu-a" }, { profile = "gpu-b", node_rank = 1 }]\n'
    assert load_config(write(tmp_path, base + 'may_differ = ["--model-path"]\n')).deployment("big").may_differ == \
        ("--model-path",)
    with pytest.raises(ConfigError, match="cannot hold --node-rank"):
        load_config(write(tmp_path, base + 'may_differ = ["--node-rank"]\n'))
    with pytest.raises(ConfigError, match="list of flags"):
        load_config(write(tmp_path, base + 'may_differ = ["model-path"]\n'))


def test_attach_to_a_deployment_not_served_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from console.cli.main import main

    assert main(["attach", "--deployment", "qwen-397b"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpuconsole: no deployment 'qwen-397b' is served here (no "), err
