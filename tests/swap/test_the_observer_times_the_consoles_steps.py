"""A step the console runs is timed by the observer of the host, never by the executor: the executor
writes the step's intent, words and who; the observer dates the run's start and end as it sees them
(on the state's clock, kept in the recording). A step the host showed done before the console ran it
(the unit found installed) becomes the console's own when the console runs it: its times are the
console's run's, not the earlier sighting's."""

from __future__ import annotations

from types import SimpleNamespace

from console.core.derive.swap_view import SwapStep, SwapStepChanged
from console.core.state import HostState
from console.domain.swap.controller import SwapController

T0 = 1_800_000_000.0


def _writer() -> tuple[HostState, SimpleNamespace, list[float]]:
    now = [T0]
    state = HostState("h", clock=lambda: now[0])
    state.observe_host()
    return state, SimpleNamespace(state=state, host="h"), now


def test_the_consoles_step_is_dated_by_the_observer_from_its_start_to_its_end() -> None:
    state, ex, now = _writer()
    SwapController._set(ex, "stop_old", state="running", detail="", who="ana")  # type: ignore[arg-type]
    step = state.swap.steps["stop_old"]
    assert (step.state, step.who, step.started_at_s, step.ended_at_s) == ("running", "ana", T0, None)
    now[0] = T0 + 7
    SwapController._set(ex, "stop_old", detail="draining: GPU 0 1,200 MiB")  # type: ignore[arg-type]
    assert state.swap.steps["stop_old"].started_at_s == T0  # words only: the times stay
    now[0] = T0 + 9
    SwapController._set(ex, "stop_old", state="done", detail="stopped")  # type: ignore[arg-type]
    step = state.swap.steps["stop_old"]
    assert (step.state, step.started_at_s, step.ended_at_s, step.duration_s) == ("done", T0, T0 + 9, 9.0)
    assert not step.observed


def test_a_step_run_again_forgets_the_earlier_runs_times() -> None:
    state, ex, now = _writer()
    SwapController._set(ex, "preflight", state="running", detail="", who="ana")  # type: ignore[arg-type]
    now[0] = T0 + 1
    SwapController._set(ex, "preflight", state="refused", detail="the gate refuses")  # type: ignore[arg-type]
    now[0] = T0 + 60
    SwapController._set(ex, "preflight", state="running", detail="", who="ben")  # type: ignore[arg-type]
    step = state.swap.steps["preflight"]
    assert (step.started_at_s, step.ended_at_s, step.who) == (T0 + 60, None, "ben")


def test_a_step_that_fails_before_it_runs_is_dated_once() -> None:
    state, ex, now = _writer()
    SwapController._set(ex, "install", state="failed", detail="no drafted unit", who="ana")  # type: ignore[arg-type]
    step = state.swap.steps["install"]
    assert (step.started_at_s, step.ended_at_s) == (T0, T0)


def test_the_plans_skip_has_no_time() -> None:
    state, ex, _ = _writer()
    SwapController._set(ex, "stop_old", state="skipped", detail="in place: …", who=None)  # type: ignore[arg-type]
    step = state.swap.steps["stop_old"]
    assert step.state == "skipped" and step.started_at_s is None and step.ended_at_s is None


def test_a_step_seen_done_on_the_host_then_run_by_the_console_is_the_consoles() -> None:
    state, ex, now = _writer()
    seen = SwapStep("install", "Install the new unit", state="done", started_at_s=T0 - 300, ended_at_s=T0 - 300,
                    detail="new.service found installed (outside the console)", observed=True)
    state.apply(SwapStepChanged("h", seen))
    SwapController._set(ex, "install", state="running", detail="", who="ana")  # type: ignore[arg-type]
    now[0] = T0 + 2
    SwapController._set(ex, "install", state="done", detail="installed new.service")  # type: ignore[arg-type]
    step = state.swap.steps["install"]
    assert not step.observed and step.who == "ana"
    assert (step.started_at_s, step.ended_at_s) == (T0, T0 + 2)
