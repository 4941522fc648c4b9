"""The deployment's one timeline dates each node's line by the host's time of the line (journald's
µs, Docker's ns: `LogEvent.at_s`) minus the node's measured clock skew, not by the server's
whole-second stamp and not by when the console received it. Two nodes' lines of one whole second
keep the order in which the hosts logged them; a node whose zone was not measured is still dated
where its line carries the host's time (an epoch needs no zone)."""

from __future__ import annotations

from dataclasses import replace

from console.core.state import LogAppended
from console.domain.deploy.probe import NodeProbe
from console.domain.deploy.state import derive
from console.host.parsers.sglang_log import parse_line
from tests.kit.deploy import NOW, deployment, node_state


def logged(name: str, *lines: tuple[str, float | None]) -> object:
    """A node whose log source gave each line the host's time (None: a file's line, no host time)."""
    state = node_state(name)
    state.apply(LogAppended(name, tuple(replace(parse_line(text), at_s=at) for text, at in lines)))
    return state


def test_two_nodes_lines_of_one_whole_second_are_ordered_by_the_hosts_time_of_each() -> None:
    # both stamped 08:00:02; node 1 logged its line at .20 on its clock (1.5 s ahead: .70 - 1.5 on
    # the console's), node 0 at .60: node 1's came first though both stamps and arrival say otherwise
    states = {"node0": logged("gpu-0", ("[2026-12-03 08:00:02 TP0] Init torch distributed begin.", NOW + 2.60)),
              "node1": logged("gpu-1", ("[2026-12-03 08:00:02 TP8] Init torch distributed begin.", NOW + 3.70))}
    probes = {"node0": NodeProbe(NOW, clock_skew_s=0.0, utc_offset_s=0),
              "node1": NodeProbe(NOW, clock_skew_s=1.5, utc_offset_s=0)}
    view = derive(deployment(), states, probes, now_s=NOW + 10)
    assert [line.label for line in view.timeline] == ["node 1 TP8", "node 0 TP0"]
    assert abs(view.timeline[0].at_s - (NOW + 2.20)) < 1e-6, view.timeline[0]
    assert abs(view.timeline[1].at_s - (NOW + 2.60)) < 1e-6, view.timeline[1]


def test_a_line_with_the_hosts_time_is_dated_without_the_nodes_zone() -> None:
    # the probe measured the skew but not the zone: the stamp (local time) cannot be placed, the
    # host's time of the line (an epoch) can
    states = {"node0": logged("gpu-0", ("[2026-12-03 10:00:02 TP0] Init torch distributed begin.", NOW + 2.25))}
    view = derive(deployment(nodes=1), states, {"node0": NodeProbe(NOW, clock_skew_s=0.25, utc_offset_s=None)},
                  now_s=NOW + 10)
    assert view.timeline[0].at_s is not None and abs(view.timeline[0].at_s - (NOW + 2.0)) < 1e-6


def test_a_files_line_without_the_hosts_time_keeps_its_stamp_minus_the_offset() -> None:
    states = {"node0": logged("gpu-0", ("[2026-12-03 08:00:04 TP0] Init torch distributed begin.", None),
                              ("[Gloo] Rank 0 is connected to 15 peer ranks.", None))}
    view = derive(deployment(nodes=1), states, {"node0": NodeProbe(NOW, clock_skew_s=3.0, utc_offset_s=0)},
                  now_s=NOW + 10)
    assert [line.at_s for line in view.timeline] == [NOW + 1, NOW + 1]
