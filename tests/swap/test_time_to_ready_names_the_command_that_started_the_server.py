"""The report's time to ready says what started the new server: `systemctl start` of a unit,
`docker start` of a container, or a start seen on the host (no command of the console's)."""

from __future__ import annotations

from console.core.derive.swap_view import AuditAppended, AuditEntry, SwapStep, SwapStepChanged
from console.core.state import HostState

T0 = 1_800_000_000.0


def _started_by(command: str | None) -> str:
    state = HostState("h", clock=lambda: T0 + 100)
    if command is not None:
        state.apply(AuditAppended("h", AuditEntry("ana", T0 + 1, "start_new", command, 0, "", 0.5)))
    state.apply(SwapStepChanged("h", SwapStep("start_new", "Start", state="done", started_at_s=T0,
                                              ended_at_s=T0 + 30, who="ana" if command else None)))
    said = state.swap.time_to_ready()
    assert said is not None
    return said[1]


def test_a_unit_a_container_and_a_start_seen_on_the_host() -> None:
    assert _started_by("timeout -k 5 90 systemctl start -- new.service") == "the new unit's start (systemctl start)"
    assert _started_by("timeout -k 5 60 docker start -- sglang-new") == "the new container's start (docker start)"
    assert _started_by(None) == "the new server's start (seen on the host)"
