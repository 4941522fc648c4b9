"""The demo's plan read '13:33:49 root [done] sha256 of 40 files (started)': the row's status said
the verification was done and its note, written when it began, still said started. The status of
what runs on is the state of its step now; the row says it once."""

from __future__ import annotations

from console.core.derive.swap_view import AuditAppended, AuditEntry, SwapSetup, SwapStep, SwapStepChanged
from console.core.state import HostState
from console.ui.panes.swap import format_plan

SCRIPT = "cd -- /m && for f in a.safetensors b.safetensors; do sha256sum -- \"$f\"; done"


def _row(step_state: str | None) -> str:
    state = HostState("h", label="h")
    state.apply(SwapSetup("h", "old.service", "new.service", None, "/m"))
    state.apply(AuditAppended("h", AuditEntry("root", 1_000.0, "verify", SCRIPT, None, "", note="started")))
    if step_state is not None:
        state.apply(SwapStepChanged("h", SwapStep("verify", "Verify the files (sha256)", step_state, 1_000.0,
                                                  None if step_state == "running" else 1_020.0)))
    lines = format_plan(state.swap, 1_030.0, width=80).plain.splitlines()
    return lines[lines.index("last commands (A: every command in full)") + 1]


def test_a_done_verification_reads_done_alone() -> None:
    row = _row("done")
    assert "[done] sha256 of 2 files" in row and "started" not in row, row


def test_a_failed_verification_reads_failed_alone() -> None:
    row = _row("failed")
    assert "[failed] sha256 of 2 files" in row and "started" not in row, row


def test_a_running_verification_reads_started_once() -> None:
    row = _row("running")
    assert row.count("started") == 1 and "[started] sha256 of 2 files" in row, row
