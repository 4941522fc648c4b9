"""The plan's last commands at the demo's 56 columns read '10:50:07 root [ok] systemctl stop sglan':
each command cut at a fixed 30 columns short of the width, mid-word and unmarked. A row takes the room
its head leaves, whole when it fits, else cut behind '…'."""

from __future__ import annotations

from console.core.derive.swap_view import AuditAppended, AuditEntry, SwapSetup
from console.core.state import HostState
from console.ui.panes.swap import format_plan


def _rows(width: int, command: str) -> list[str]:
    state = HostState("h", label="h")
    state.apply(SwapSetup("h", "old.service", "new.service", None, "/m"))
    state.apply(AuditAppended("h", AuditEntry("root", 1_000.0, "stop_old", command, 0, "", 1.0)))
    lines = format_plan(state.swap, 1_001.0, width=width).plain.splitlines()
    at = lines.index("last commands (A: every command in full)")
    return [lines[at + 1]]


def test_a_command_that_fits_is_whole() -> None:
    (row,) = _rows(60, "timeout -k 5 90 systemctl stop -- sglang-qwen397b.service")
    assert row.endswith("systemctl stop sglang-qwen397b.service") and len(row) <= 60, row


def test_a_command_too_long_is_cut_behind_an_ellipsis_within_the_width() -> None:
    (row,) = _rows(50, "timeout -k 5 90 systemctl stop -- sglang-qwen397b-nvfp4-with-a-long-name.service")
    assert row.endswith("…") and len(row) <= 50 and "systemctl stop" in row, row


def test_the_demos_files_are_named_as_its_host_names_them() -> None:
    """The demo's plan read '10:52:19 root [ok] sftp put /tmp/gpuconsole-swap-t…': this machine's
    sandbox of the simulated host, where the step above says '/etc/systemd/system/…'."""
    state = HostState("h", label="h")
    state.apply(SwapSetup("h", "old.service", "new.service", None, "/m"))
    state.apply(AuditAppended("h", AuditEntry("root", 1_000.0, "install",
                                              "sftp put /tmp/gpusim-ab12/etc/systemd/system/new.service", 0, "")))
    lines = format_plan(state.swap, 1_001.0, width=80, host_root="/tmp/gpusim-ab12").plain.splitlines()
    row = lines[lines.index("last commands (A: every command in full)") + 1]
    assert row.endswith("sftp put /etc/systemd/system/new.service"), row
