"""The plan said 'busy: preflight' (and would say 'busy: in place'): a step's raw key where the footer
calls it 'g gate'. A busy, queued or refused step is named as the plan's keys name it, else by its
title, in the plan and in what it says aloud."""

from __future__ import annotations

from console.core.derive.swap_view import SwapSetup, SwapStep, SwapStepChanged
from console.core.state import HostState
from console.ui.panes.swap import format_plan, step_words


def test_a_busy_gate_reads_as_the_keys_name_it() -> None:
    state = HostState("h", label="h")
    state.apply(SwapSetup("h", "old.service", "new.service", None, "/m", busy="preflight"))
    state.apply(SwapStepChanged("h", SwapStep("preflight", "Preflight gate", "running", 1.0)))
    plan = format_plan(state.swap, 2.0, width=80).plain
    assert "busy: gate —" in plan and "busy: preflight" not in plan, plan


def test_every_step_has_words_and_none_is_a_raw_key() -> None:
    assert [step_words(k) for k in ("preflight", "stop_old", "start_new", "install")] == [
        "gate", "stop old", "start new", "install unit"]
    assert step_words("in_place").startswith("update the weights in place")  # its title, not "in place"
