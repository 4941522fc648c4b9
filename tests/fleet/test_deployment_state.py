"""A deployment's state, derived from its nodes' HostStates (issue 37): one server status over all
nodes (ready only when rank 0 answers and every node's ranks are up; the node rank 0 waits for,
named with its silence), one timeline labelled by node and rank and ordered by each node's clock
plus its measured offset, and the faults (unreachable node, another SGLang version, a
--dist-init-addr resolving differently per node) each said, nothing guessed."""

from __future__ import annotations

from console.domain.deploy.probe import NodeProbe
from console.domain.deploy.state import derive
from tests.kit.deploy import NOW, deployment, init_ends, launch, multinode_args, node_state

T0 = "2026-12-03 08:00:00"


def nodes_joined(server0: str = "ready") -> dict[str, object]:
    n0 = launch(T0, range(0, 8)) + init_ends("2026-12-03 08:00:05", range(0, 8)) + \
        ["[2026-12-03 08:00:30] The server is fired up and ready to roll!"]
    n1 = launch("2026-12-03 08:00:04", range(8, 16)) + init_ends("2026-12-03 08:00:05", range(8, 16)) + \
        ["[2026-12-03 08:00:20 TP8] Dummy health check server started in background thread at 10.0.0.2:30000"]
    return {"node0": node_state("gpu-0", args=multinode_args(0), lines=tuple(n0), server=server0),
            "node1": node_state("gpu-1", args=multinode_args(1), lines=tuple(n1))}


def test_the_deployment_is_ready_when_rank_zero_answers_and_every_nodes_ranks_are_up() -> None:
    view = derive(deployment(), nodes_joined(), now_s=NOW + 60)
    assert view.status.status == "ready", view.status
    assert view.nodes[1].expected_ranks == tuple(f"TP{r}" for r in range(8, 16))


def test_rank_zero_answering_is_not_ready_while_node_one_has_no_dummy_health_server() -> None:
    states = nodes_joined()
    n1 = launch("2026-12-03 08:00:04", range(8, 16)) + init_ends("2026-12-03 08:00:05", range(8, 16))
    states["node1"] = node_state("gpu-1", args=multinode_args(1), lines=tuple(n1), last_line_at_s=NOW + 5)
    view = derive(deployment(), states, now_s=NOW + 60)
    assert view.status.status == "starting"
    assert "node 1's ranks are not up (no line from it for 55 s)" in view.status.reason


def test_rank_zero_waiting_at_distributed_init_names_the_node_that_never_joined() -> None:
    states = {"node0": node_state("gpu-0", args=multinode_args(0), lines=tuple(launch(T0, range(0, 8))),
                                  server="starting"),
              "node1": node_state("gpu-1", args=multinode_args(1), last_line_at_s=NOW - 40)}
    view = derive(deployment(), states, now_s=NOW)
    assert view.status.status == "waiting"
    assert view.status.reason == "waiting for node 1 (no line from it for 40 s) at distributed init"


def test_an_unreachable_node_is_said_and_never_counted_as_up() -> None:
    states = nodes_joined()
    states["node1"] = node_state("gpu-1", connected=False, detail="[Errno 113] No route to host")
    view = derive(deployment(), states, now_s=NOW + 60)
    assert view.status.status == "unknown" and "node 1 unreachable over SSH" in view.status.reason
    assert any("node 1 (10.0.0.2) unreachable over SSH: failed: [Errno 113] No route to host" in f for f in view.faults)


def test_a_node_that_failed_names_its_error() -> None:
    states = nodes_joined(server0="starting")
    states["node1"] = node_state("gpu-1", args=multinode_args(1), lines=tuple(
        launch("2026-12-03 08:00:04", range(8, 16)) + init_ends("2026-12-03 08:00:05", range(8, 16)) +
        ["[2026-12-03 08:00:06 TP8] Scheduler hit an exception: Traceback (most recent call last):"]))
    view = derive(deployment(), states, now_s=NOW + 60)
    assert view.status.status == "failed" and view.status.reason.startswith("node 1 failed: Scheduler hit")


def test_another_sglang_version_on_one_node_is_a_fault() -> None:
    probes = {"node0": NodeProbe(NOW, sglang_version="0.5.23"), "node1": NodeProbe(NOW, sglang_version="0.5.22")}
    view = derive(deployment(), nodes_joined(), probes, now_s=NOW + 60)
    assert "the nodes run different SGLang versions (node 0 0.5.23, node 1 0.5.22): every node must run the same" \
        in view.faults


def test_a_dist_init_addr_resolving_differently_per_node_is_a_fault() -> None:
    probes = {"node0": NodeProbe(NOW, resolves_to="10.0.0.1", address_is_local=True),
              "node1": NodeProbe(NOW, resolves_to="10.8.0.7")}
    view = derive(deployment(), nodes_joined(), probes, now_s=NOW + 60)
    assert ("--dist-init-addr 10.0.0.1:5000 resolves to a different host on each node "
            "(10.0.0.1 on node 0, 10.8.0.7 on node 1)") in view.faults
    same = {"node0": NodeProbe(NOW, resolves_to="10.0.0.1", address_is_local=True),
            "node1": NodeProbe(NOW, resolves_to="10.0.0.1")}
    assert not [f for f in derive(deployment(), nodes_joined(), same, now_s=NOW + 60).faults if "resolves" in f]


def test_the_timeline_orders_lines_by_each_nodes_clock_plus_its_offset_and_labels_node_rank_and_skew() -> None:
    # node 1's clock runs 3 s ahead: its 08:00:04 line happened at 08:00:01 on the console's clock,
    # before node 0's 08:00:02 line, though its own stamp is later.
    states = {"node0": node_state("gpu-0", lines=("[2026-12-03 08:00:02 TP0] Init torch distributed begin.",)),
              "node1": node_state("gpu-1", lines=("[2026-12-03 08:00:04 TP8] Init torch distributed begin.",
                                                  "[Gloo] Rank 8 is connected to 15 peer ranks. Expected number "
                                                  "of connected peer ranks is : 15"))}
    probes = {"node0": NodeProbe(NOW, clock_skew_s=0.0, utc_offset_s=0),
              "node1": NodeProbe(NOW, clock_skew_s=3.0, utc_offset_s=0)}
    view = derive(deployment(), states, probes, now_s=NOW + 10)
    assert [(line.label, line.text[:11]) for line in view.timeline] == [
        ("node 1 TP8", "Init torch "), ("node 1", "[Gloo] Rank"), ("node 0 TP0", "Init torch ")]
    assert view.timeline[0].at_s == NOW + 1 and view.timeline[0].clock == "clock +3.0 s"
    assert view.timeline[2].clock == ""


def test_a_node_whose_clock_was_not_measured_is_labelled_so() -> None:
    states = {"node0": node_state("gpu-0", lines=("[2026-12-03 08:00:02 TP0] Init torch distributed begin.",)),
              "node1": node_state("gpu-1", lines=("[2026-12-03 08:00:01 TP8] Init torch distributed begin.",))}
    view = derive(deployment(), states, {"node0": NodeProbe(NOW, clock_skew_s=0.0, utc_offset_s=0)}, now_s=NOW)
    by = {line.label: line for line in view.timeline}
    assert by["node 1 TP8"].clock == "clock not measured" and by["node 1 TP8"].at_s is None


def test_a_pd_deployment_is_ready_only_with_both_sides_and_the_router() -> None:
    states = {"prefill0": node_state("gpu-a", args="--model-path /m --disaggregation-mode prefill", server="ready",
                                     lines=("[2026-12-03 08:00:00] server_args=ServerArgs()",)),
              "decode0": node_state("gpu-b", args="--model-path /m --disaggregation-mode decode", server="starting",
                                    lines=("[2026-12-03 08:00:00] server_args=ServerArgs()",)),
              "router": node_state("edge", server="ready")}
    view = derive(deployment("pd"), states, now_s=NOW)
    assert view.status.status == "starting" and view.status.reason.startswith("decode: decode 0")
    states["decode0"] = node_state("gpu-b", args="--model-path /m --disaggregation-mode decode", server="ready")
    assert derive(deployment("pd"), states, now_s=NOW).status.status == "ready"
    states["router"] = node_state("edge", server="starting")
    assert derive(deployment("pd"), states, now_s=NOW).status.reason.startswith("prefill and decode are ready; router")
