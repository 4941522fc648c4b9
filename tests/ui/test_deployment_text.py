"""The deployment as text (issue 37): the status line, one line per node (reach, GPUs, ranks,
server, download, version, clock), the timeline with node, rank and clock note, the checks, the
fleet's one row with its nodes; every line within the width at every width."""

from __future__ import annotations

import pytest

from console.domain.deploy.checks import Check
from console.domain.deploy.probe import NodeProbe
from console.domain.deploy.state import derive
from console.domain.deploy.text import format_deployment, format_fleet_row, format_nodes, format_status_line, format_timeline
from tests.kit.deploy import NOW, deployment, launch, multinode_args, node_state


def waiting_view() -> object:
    states = {"node0": node_state("gpu-0", args=multinode_args(0), lines=tuple(launch("2026-12-03 08:00:00", range(8))),
                                  server="starting"),
              "node1": node_state("gpu-1", args=multinode_args(1), last_line_at_s=NOW - 40)}
    probes = {"node0": NodeProbe(NOW, clock_skew_s=0.0, utc_offset_s=0, sglang_version="0.5.23"),
              "node1": NodeProbe(NOW, clock_skew_s=-4.2, utc_offset_s=0, sglang_version="0.5.23")}
    return derive(deployment(), states, probes, now_s=NOW)


def test_the_status_line_says_who_rank_zero_waits_for() -> None:
    assert format_status_line(waiting_view()) == (
        "big (over --nnodes, 2 nodes) · WAITING: waiting for node 1 (no line from it for 40 s) at distributed init")


def test_each_node_says_its_ranks_download_version_and_clock() -> None:
    lines = format_nodes(waiting_view(), width=300)
    assert "TP0–TP7 at distributed init (8/8 begun, 0 ended)" in lines[0]
    assert "TP8–TP15 not launched" in lines[1] and "clock -4.2 s" in lines[1] and "SGLang 0.5.23" in lines[1]
    assert "clock in step" in lines[0]


def test_the_timeline_shows_console_time_node_rank_and_text() -> None:
    lines = format_timeline(waiting_view().timeline, height=3, width=200)
    assert lines[-1] == "08:00:00  node 0 TP7     Init torch distributed begin."
    assert len(lines) == 3


def test_the_fleet_row_is_the_deployment_with_its_nodes() -> None:
    row = format_fleet_row(waiting_view(), width=200)
    assert row.startswith("big              WAITING   node 0 … · node 1 …  waiting for node 1")


@pytest.mark.parametrize("width", [40, 80, 120, 200])
def test_every_line_fits_the_width(width: int) -> None:
    checks = [Check("download", "node 1", "error", "node 1: /models/q is at 92 %, 11/12 shards: " + "x" * 300)]
    text = format_deployment(waiting_view(), checks, width=width)
    assert all(len(line) <= width for line in text.splitlines())
    assert "✗ download" in text
