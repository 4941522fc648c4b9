"""SGLang stamps its lines in whole seconds: an OOM of the previous boot and the new server's launch
line can share one. The errors "since the boot" that name a server's death are told apart by the
host's time of each line (journald's, Docker's), where the source gave one."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from console.domain.analysis.log_state import LogTracker
from console.domain.analysis.server_status import HttpFacts, combine
from console.host.parsers.sglang_log import parse_line

T0 = dt.datetime(2026, 1, 1, 10, 0, 0).timestamp()
OOM = ("[2026-01-01 10:00:05 TP0] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
       "a total capacity of 95.59 GiB of which 1.12 GiB is free.")
LAUNCH = "[2026-01-01 10:00:05] server_args=ServerArgs(model_path='m', tp_size=2)"


def _status(*lines: tuple[str, float]) -> object:
    tracker = LogTracker("journal of u.service")
    tracker.feed([replace(parse_line(text), at_s=T0 + at) for text, at in lines])
    return combine("u.service", "active", 1, tracker.summary(), HttpFacts(None, "refused", {}), T0 + 6)


def test_the_previous_boots_oom_in_the_new_launchs_second_is_not_the_new_servers_cause() -> None:
    st = _status((OOM, 5.2), (LAUNCH, 5.6))  # written before the launch, stamped the same second
    assert "out of memory" not in st.reason and st.status not in ("dead", "degraded"), st


def test_an_oom_written_after_the_launch_in_its_second_is_the_new_servers_cause() -> None:
    st = _status((LAUNCH, 5.2), (OOM, 5.6))
    assert st.status == "degraded" and "out of memory" in st.reason, st
