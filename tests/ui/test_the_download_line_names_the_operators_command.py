"""The plan's last commands read 'if timeout -k 5 10 systemctl is-active --quiet -- gpuconsole-down…'
for the model download: the first line of the script, the wrapper's check for a download already
running, not what the operator asked for. The line names the hf command the script starts (the
repository first, as the operator types it, so that a row cut at the plan's width keeps it; the
directory as quoted for the host), and stopping it reads as that."""

from __future__ import annotations

from console.core.derive.swap_view import audit_summary
from console.core.events import AuditEntry
from console.domain.swap.actions import download, stop_download
from console.ui.panes.swap import cut_words


def _line(action: str, script: str, note: str = "") -> str:
    return audit_summary(AuditEntry("root", 0.0, action, script, 0, "", note=note))


def test_the_download_reads_as_hf_download_of_the_repo_into_the_directory() -> None:
    (cmd,) = download("Qwen/Qwen3.5-122B-A10B", "/shared/models/Qwen3.5-122B-A10B").commands
    line = _line("download", cmd.script)
    assert line == "hf download Qwen/Qwen3.5-122B-A10B --local-dir /shared/models/Qwen3.5-122B-A10B (detached)"
    assert "timeout" not in line


def test_a_directory_the_shell_must_quote_is_shown_quoted() -> None:
    (cmd,) = download("org/model", "/models/my model").commands
    assert _line("download", cmd.script, "started") == \
        "hf download org/model --local-dir '/models/my model' (detached) (started)"


def test_stopping_the_download_reads_as_that_not_as_a_systemctl_stop_of_a_word() -> None:
    (cmd,) = stop_download("/shared/models/Qwen3.5-122B-A10B").commands
    line = _line("stop_download", cmd.script)
    assert line.startswith("stop the hf download in /shared/models/Qwen3.5-122B-A10B")
    assert "running'" not in line and "timeout" not in line


def test_the_row_cut_at_the_docked_plans_width_keeps_the_repository() -> None:
    """The plan docked at 120 columns is 56 wide: 37 columns after the time, who and status."""
    (cmd,) = download("Qwen/Qwen3.5-122B-A10B", "/shared/models/Qwen3.5-122B-A10B").commands
    assert cut_words(_line("download", cmd.script), 37).startswith("hf download Qwen/Qwen3.5-122B-A10B")
