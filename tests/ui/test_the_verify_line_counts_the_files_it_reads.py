"""The plan's last commands said 'sha256 of 1 file(s)' for the demo's verify of 40 files: the line
counted quote marks, and a name is quoted only when the shell needs it. It counts the names of the
loop `v` runs (the script the verify step builds), quoted or not."""

from __future__ import annotations

from types import SimpleNamespace

from console.core.derive.swap_view import audit_summary
from console.core.events import AuditEntry
from console.domain.analysis.download import ExpectedFile, ExpectedFiles
from console.domain.swap.shared_steps import verify_commands


def _verify_script(names: list[str], model_dir: str = "/shared/models/Qwen3.5-122B-A10B") -> str:
    expected = ExpectedFiles("hub", tuple(ExpectedFile(n, 10, "ab" * 32) for n in names), 10 * len(names))
    watcher = SimpleNamespace(model_dir=model_dir, finished_files={n: 10 for n in names},
                              state=SimpleNamespace(tree_expected=None, hub_expected=expected))
    (command,), why = verify_commands(SimpleNamespace(session=SimpleNamespace(_download=watcher)))
    assert why is None
    return command.script


def _line(script: str) -> str:
    return audit_summary(AuditEntry("root", 0.0, "verify", script, None, "", note="started"))


def test_forty_plain_names_read_as_forty_files() -> None:
    names = [f"model-{i:05d}-of-00040.safetensors" for i in range(1, 41)]
    assert _line(_verify_script(names)) == "sha256 of 40 files (started)"


def test_names_the_shell_must_quote_count_once_each() -> None:
    names = ["a b.safetensors", "it's.safetensors", "plain.safetensors"]
    assert _line(_verify_script(names, "/models/my model")) == "sha256 of 3 files (started)"


def test_one_file_is_one_file() -> None:
    assert _line(_verify_script(["model.safetensors"])) == "sha256 of 1 file (started)"
