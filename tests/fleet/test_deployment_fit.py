"""The fit per node (issue 37): the single host's fit planner applied to each node of a deployment,
with that node's GPUs and its share of TP × PP (TP16 over 2 nodes: 8 ranks a node), prefill and decode
planned separately, a node short of GPUs or of memory named, and what is not read yet unknown."""

from __future__ import annotations

from console.demo.hostsim.downloader import qwen122b_config
from console.domain.deploy.checks import run_checks
from console.domain.deploy.fit import node_fit
from console.domain.deploy.text import format_checks
from tests.kit.deploy import deployment, multinode_args, node_state

H200 = 143_771  # MiB, as nvidia-smi reports an H200
WEIGHTS = 240_000_000_000  # the index's total_size


def fits(checks: tuple) -> list[tuple[str, str, str]]:
    return [(c.node, c.severity, c.message) for c in checks if c.name == "fit"]


def test_tp16_over_two_eight_gpu_nodes_fits_on_each_with_its_eight_ranks() -> None:
    d = deployment()
    states = {f"node{r}": node_state(f"gpu-{r}", args=multinode_args(r), config=qwen122b_config(),
                                     gpus=(8, H200), weights_bytes=WEIGHTS) for r in range(2)}
    out = fits(run_checks(d, states, {}))
    assert [(n, s) for n, s, _ in out] == [("node 0", "ok"), ("node 1", "ok")], out
    assert out[1][2].startswith("node 1: 8 × 140 GiB, TP8–TP15 here, weights 14.0 GiB/GPU of the "), out
    assert out[1][2].endswith(" KV tokens: fits"), out
    # the single host's planner, asked about one 8-GPU host, refuses TP16: the node's share is what counts
    assert "✓ fit        node 0: 8 × 140 GiB, TP0–TP7 here" in "\n".join(format_checks(run_checks(d, states, {}), 200))


def test_a_node_with_fewer_gpus_than_its_ranks_does_not_fit_and_says_why() -> None:
    d = deployment()
    states = {"node0": node_state("gpu-0", args=multinode_args(0), config=qwen122b_config(), gpus=(8, H200),
                                  weights_bytes=WEIGHTS),
              "node1": node_state("gpu-1", args=multinode_args(1), config=qwen122b_config(), gpus=(4, H200),
                                  weights_bytes=WEIGHTS)}
    out = dict((n, (s, m)) for n, s, m in fits(run_checks(d, states, {})))
    assert out["node 0"][0] == "ok"
    assert out["node 1"] == ("error", "node 1: 4 × 140 GiB, needs 8 GPUs for TP8–TP15: does not fit "
                                      "(TP×PP 16 over 2 nodes)")


def test_a_node_whose_gpus_are_too_small_does_not_fit_with_the_planners_reason() -> None:
    d = deployment()
    states = {f"node{r}": node_state(f"gpu-{r}", args=multinode_args(r), config=qwen122b_config(),
                                     gpus=(8, 16_384 if r == 1 else H200), weights_bytes=WEIGHTS) for r in range(2)}
    out = dict((n, (s, m)) for n, s, m in fits(run_checks(d, states, {})))
    assert out["node 0"][0] == "ok"
    severity, message = out["node 1"]
    assert severity == "error" and message.startswith("node 1: 8 × 16 GiB, TP8–TP15 here, weights 14.0 GiB/GPU: "
                                                      "does not fit: "), message


def test_what_is_not_read_yet_is_unknown_never_fits() -> None:
    d = deployment()
    no_unit = node_fit(d.nodes[0], node_state("gpu-0"))
    no_gpus = node_fit(d.nodes[0], node_state("gpu-0", args=multinode_args(0), config=qwen122b_config()))
    no_config = node_fit(d.nodes[0], node_state("gpu-0", args=multinode_args(0), gpus=(8, H200)))
    no_size = node_fit(d.nodes[0], node_state("gpu-0", args=multinode_args(0), config=qwen122b_config(),
                                              gpus=(8, H200)))
    assert (no_unit.severity, no_unit.message) == ("unknown", "node 0: fit unknown: its unit's command line is not read yet")
    assert (no_gpus.severity, no_gpus.message) == ("unknown", "node 0: fit unknown: its GPUs are not read yet")
    assert (no_config.severity, no_config.message) == (
        "unknown", "node 0: 8 × 140 GiB; fit unknown: no config.json read from its model directory yet")
    assert no_size.severity == "unknown" and "cannot tell: weights unknown" in no_size.message, no_size.message
    assert node_fit(d.nodes[0], None).severity == "unknown"


def test_prefill_and_decode_are_planned_separately_with_their_own_flags() -> None:
    d = deployment("pd")
    base = "--model-path /models/Qwen3.5-397B-A17B --disaggregation-mode {} --port 30000 --tp-size {}"
    states = {"prefill0": node_state("gpu-a", args=base.format("prefill", 8), config=qwen122b_config(),
                                     gpus=(8, H200), weights_bytes=WEIGHTS),
              "decode0": node_state("gpu-b", args=base.format("decode", 4), config=qwen122b_config(),
                                    gpus=(4, 81_559), weights_bytes=WEIGHTS),
              "router": node_state("edge")}
    out = fits(run_checks(d, states, {}))
    assert [n for n, _, _ in out] == ["prefill 0", "decode 0"]  # the router runs no model
    assert out[0][1] == "ok" and "8 × 140 GiB, TP0–TP7 here, weights 28.0 GiB/GPU" in out[0][2], out
    assert out[1][1] == "ok" and "4 × 80 GiB, TP0–TP3 here, weights 55.9 GiB/GPU" in out[1][2], out
