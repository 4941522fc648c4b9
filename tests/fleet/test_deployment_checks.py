"""The checks across a deployment's nodes (issue 37): a flag differing between node 0 and node 1
is an error unless it must (--node-rank) or may (--host) differ; the download complete on every
node; --dist-init-addr reachable from every node by the node's own bounded probe."""

from __future__ import annotations

from console.domain.analysis.download import DownloadProgress
from console.domain.deploy.checks import download_checks, flag_checks, rendezvous_checks, run_checks
from console.domain.deploy.probe import NodeProbe
from console.host.parsers.sglang_argv import normalize
from tests.kit.deploy import NOW, deployment, multinode_args, node_state


def cmd(args: str) -> object:
    return normalize(["python", "-m", "sglang.launch_server", *args.split()])


def errors(checks: list) -> list[str]:
    return [c.message for c in checks if c.severity == "error"]


def test_nodes_that_differ_only_in_node_rank_and_host_pass() -> None:
    checks = flag_checks([("node 0", 0, cmd(multinode_args(0))), ("node 1", 1, cmd(multinode_args(1)))])
    assert errors(checks) == []
    assert [c.message for c in checks] == ["node 1: the same flags as node 0 but --node-rank and --host"]


def test_a_flag_changed_on_one_node_only_is_an_error_naming_both_values() -> None:
    checks = flag_checks([("node 0", 0, cmd(multinode_args(0, extra="--mem-fraction-static 0.85"))),
                          ("node 1", 1, cmd(multinode_args(1, extra="--mem-fraction-static 0.80")))])
    assert errors(checks) == ["node 1: --mem-fraction-static is 0.85 on node 0 and 0.80 on node 1"]


def test_a_flag_present_on_one_node_only_is_an_error() -> None:
    checks = flag_checks([("node 0", 0, cmd(multinode_args(0, extra="--enable-metrics"))),
                          ("node 1", 1, cmd(multinode_args(1)))])
    assert errors(checks) == ["node 1: --enable-metrics is set on node 0 and absent on node 1"]


def test_node_rank_nnodes_and_dist_init_addr_must_match_the_deployment() -> None:
    same_rank = flag_checks([("node 0", 0, cmd(multinode_args(0))), ("node 1", 1, cmd(multinode_args(0)))])
    assert "node 1: --node-rank is 0, the deployment says 1" in errors(same_rank)
    assert "node 1: --node-rank is 0 on both node 0 and node 1: it must differ" in errors(same_rank)
    three = flag_checks([("node 0", 0, cmd(multinode_args(0, nnodes=3))), ("node 1", 1, cmd(multinode_args(1, nnodes=3)))])
    assert "node 0: --nnodes is 3, the deployment has 2 nodes" in errors(three)
    no_addr = "--model-path /m --tp-size 16 --nnodes 2 --node-rank {}"
    missing = flag_checks([("node 0", 0, cmd(no_addr.format(0))), ("node 1", 1, cmd(no_addr.format(1)))])
    assert "node 1: --dist-init-addr is absent: each node would wait at its own address" in errors(missing)


def test_a_node_whose_unit_is_not_read_is_unknown_not_ok() -> None:
    checks = flag_checks([("node 0", 0, cmd(multinode_args(0))), ("node 1", 1, None)])
    assert [(c.severity, c.message) for c in checks] == [("unknown", "node 1: its unit's command line is not read yet")]


def progress(done: int, total: int, complete: bool | None) -> DownloadProgress:
    return DownloadProgress("/models/q", None, None, done * 10, total * 10, done, total, done, total, (), None, None,
                            None, None, None, complete, (), NOW)


def test_the_download_must_be_complete_on_every_node() -> None:
    checks = download_checks([("node 0", progress(17, 17, True), None), ("node 1", progress(11, 12, False), None),
                              ("node 2", None, "No such file or directory")])
    assert [(c.severity, c.message) for c in checks] == [
        ("ok", "node 0: /models/q complete"),
        ("error", "node 1: /models/q is at 92 %, 11/12 shards: every node loads its own copy"),
        ("unknown", "node 2: the model dir is not read yet (No such file or directory)")]


def test_the_rendezvous_address_must_be_reachable_from_every_node() -> None:
    checks = rendezvous_checks("10.0.0.1:5000", [
        ("node 0", NodeProbe(NOW, resolves_to="10.0.0.1", tcp="refused")),
        ("node 1", NodeProbe(NOW, resolves_to="10.0.0.1", tcp="error: TimeoutError: timed out")),
        ("node 2", None)])
    assert [c.severity for c in checks] == ["ok", "error", "unknown"]
    assert checks[1].message == "node 1: 10.0.0.1:5000 not reachable: TimeoutError: timed out"
    assert errors(rendezvous_checks("10.0.0.1", [("node 0", None)])) == ["--dist-init-addr 10.0.0.1 is not HOST:PORT"]


def test_run_checks_reads_each_nodes_unit_from_its_own_state() -> None:
    states = {"node0": node_state("gpu-0", args=multinode_args(0)),
              "node1": node_state("gpu-1", args=multinode_args(1, extra="--tp-size 8"))}
    checks = run_checks(deployment(), states, {})
    assert "node 1: --tp-size is 16 on node 0 and 8 on node 1" in errors(list(checks))
    assert {c.name for c in checks} == {"flags", "download", "rendezvous", "fit"}


def test_a_flag_the_deployment_declares_may_differ_is_no_error() -> None:
    group = [("node 0", 0, cmd(multinode_args(0))), ("node 1", 1, cmd(multinode_args(1).replace("Qwen", "q")))]
    assert errors(flag_checks(group)) and not errors(flag_checks(group, ["--model-path"]))
    assert flag_checks(group, ["--model-path"])[0].message == \
        "node 1: the same flags as node 0 but --node-rank and --host and --model-path"
