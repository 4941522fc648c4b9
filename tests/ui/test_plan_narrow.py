"""The swap plan in a narrow window (80x24 gives it ~72 columns): a step stays one line and the
downtime's "from …" goes on its own indented line; nothing wraps at column 0 (issue 22 item 18,
seen in session 4's walk: "seen on / the host", "from / 13:21:06")."""

from __future__ import annotations

from console.ui.panes.swap import format_plan
from tests.kit.swap import narrow_plan_state as _state


def test_a_narrow_plan_keeps_each_step_and_the_downtime_within_its_width() -> None:
    for width in (60, 72, 100):
        lines = format_plan(_state().swap, 200.0, width=width).plain.splitlines()
        steps = [ln for ln in lines if "Stop the old" in ln or "Start the new" in ln]
        assert len(steps) == 2 and all(len(ln) <= width for ln in steps), (width, steps)
        downtime = [ln for ln in lines if ln.startswith("downtime") or "from " in ln and "last served" in ln]
        assert all(len(ln) <= width for ln in downtime), (width, downtime)
        assert any("last served request" in ln for ln in lines)  # said, not cut away
    wide = format_plan(_state().swap, 200.0, width=200).plain
    assert "seen on the host" in wide and "Stop the old service and wait for its memory" in wide


def test_the_plan_docked_beside_the_panes_still_says_a_step_was_seen_on_the_host() -> None:
    """Docked at 120 columns the plan is 56 wide (about 50 inside): "seen on the host" did not fit
    and was dropped, so nothing said who ran the observed steps (a CI run of the lived story's test
    saw the plan redrawn at that width)."""
    for width in (48, 50, 52):
        lines = format_plan(_state().swap, 200.0, width=width).plain.splitlines()
        stop = next(ln for ln in lines if "Stop the old" in ln)  # seen on the host
        start = next(ln for ln in lines if "Start the new" in ln)  # ana's, from the console
        assert stop.endswith("  on host") and start.endswith("  ana"), (width, stop, start)
        assert len(stop) <= width and len(start) <= width, (width, stop, start)


def test_a_gate_check_named_with_nine_letters_keeps_a_space_before_its_reason() -> None:
    """Seen in the walk (issue 35 item 9): "✓ swap pathrestart: …"."""
    from console.core.derive.swap_view import GateCheck

    view = _state().swap
    view.gate = (GateCheck("swap path", True, "restart: the old service stops first"), GateCheck("flags", True, "ok"))
    plain = format_plan(view, 200.0, width=72).plain
    assert "✓ swap path restart:" in plain and "✓ flags     ok" in plain


def test_the_docked_plan_cuts_a_long_step_title_at_a_word_with_an_ellipsis() -> None:
    """Docked at 120 columns the plan is 56 cells wide (about 50 inside): a step's title that does not
    fit beside its state, time and author is cut at the end of a word with an ellipsis; it was cut
    mid-word ("Stop the old service, dra")."""
    import re

    from console.core.derive.swap_view import STEP_TITLES, SwapStep, SwapStepChanged

    state = _state()
    state.apply(SwapStepChanged("h", SwapStep("stop_old", STEP_TITLES["stop_old"], "done", 100.0, 104.0, "drained",
                                              who="root")))
    state.apply(SwapStepChanged("h", SwapStep("rollback", STEP_TITLES["rollback"], "pending")))
    row = re.compile(r"^ \S (.+?) +(done|pending) ")
    cut = 0
    for width in range(44, 57):
        lines = format_plan(state.swap, 200.0, width=width).plain.splitlines()
        for step in state.swap.ordered_steps():
            line = next(ln for ln in lines if row.match(ln) and ln[3:].startswith(step.title[:12]))
            shown = row.match(line).group(1)  # type: ignore[union-attr]
            assert len(line) <= width, (width, line)
            if shown == step.title:
                continue
            cut += 1
            kept = shown.removesuffix("…")
            assert shown.endswith("…") and step.title.startswith(kept), (width, shown)
            assert step.title[len(kept)] in " ,;:" and not kept.endswith((" ", ",")), (width, shown)  # at a word
    assert cut > 10  # the docked widths do cut the long titles (the check above ran)


def test_the_plan_gates_reason_is_cut_at_a_word_with_an_ellipsis() -> None:
    """A gate check's reason that does not fit the plan's width is cut at the end of a word with an
    ellipsis, like a step's title; it was cut mid-word ("… no error in the li")."""
    from console.core.derive.swap_view import GateCheck

    reason = "12 change(s), no error in the lints; the new unit's --model-path exists on the host"
    view = _state().swap
    view.gate = (GateCheck("diff", True, reason),)
    cut = 0
    for width in range(44, 100):
        line = next(ln for ln in format_plan(view, 200.0, width=width).plain.splitlines() if "✓ diff" in ln)
        shown = line.split("✓ diff", 1)[1].strip()
        assert len(line) <= width, (width, line)
        if shown == reason:
            continue
        cut += 1
        kept = shown.removesuffix("…")
        assert shown.endswith("…") and reason.startswith(kept), (width, shown)
        assert reason[len(kept)] in " ,;:" and not kept.endswith((" ", ",", ";")), (width, shown)  # at a word
    assert cut > 20  # the narrow widths do cut the reason (the check above ran)
