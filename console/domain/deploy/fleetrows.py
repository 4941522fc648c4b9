"""The fleet shows each deployment whose hosts it holds as one row with its nodes (issue 37):
derived from the fleet's own HostStates (no probe in the fleet: clocks are 'not measured')."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from console.domain.deploy.profile import Deployment
from console.domain.deploy.state import derive
from console.domain.deploy.text import format_fleet_row


def deployment_rows(deployments: Mapping[str, Deployment], states_by_profile: Mapping[str, Any],
                    width: int = 160) -> list[str]:
    """One line per deployment all of whose nodes' profiles are hosts of this fleet."""
    rows = []
    for d in deployments.values():
        if not all(n.profile.name in states_by_profile for n in d.nodes):
            continue
        states = {n.key: states_by_profile[n.profile.name] for n in d.nodes}
        rows.append(format_fleet_row(derive(d, states), width))
    return rows


def rows_for(deployments: Mapping[str, Deployment], states: Callable[[], Mapping[str, Any]]) -> Callable[[], list[str]]:
    return lambda: deployment_rows(deployments, states())
