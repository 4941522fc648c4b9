"""The service source runs only an installed unit's interpreter, once per change of that unit,
says which binary ran, and never runs a local file's interpreter (issue 15, item 2); `nvidia-smi -L`
has its own round-trip (item 5)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from console.domain.analysis.service_report import build_report, side_from_text
from console.model import Reading
from console.ui.panes.service import format_service
from console.host.sources.service import ServiceWatcher, service_script
from console.host.transport import LocalTransport


def _fake_python(tmp_path: Path) -> tuple[Path, Path]:
    calls = tmp_path / "calls.txt"
    py = tmp_path / "bin" / "python3"
    py.parent.mkdir()
    py.write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\n"
                  "case \"$*\" in *__version__*) echo 0.5.99;; *--help*) echo '  --model-path MODEL_PATH';; esac\n")
    py.chmod(0o755)
    return py, calls


def _unit(py: Path, tp: int) -> str:
    return f"[Service]\nExecStart={py} -m sglang.launch_server --model-path /m --tp-size {tp}\n"


async def test_the_interpreter_runs_once_per_change_of_the_installed_unit(tmp_path: Path) -> None:
    py, calls = _fake_python(tmp_path)
    transport = LocalTransport()
    try:
        watcher = ServiceWatcher(transport, "new.service", None)
        side = side_from_text("new.service", _unit(py, 2))
        for _ in range(5):  # five polls of an unchanged unit
            new, facts = await watcher.facts_for(side)
        assert calls.read_text().count("__version__") == 1
        assert calls.read_text().count("--help") == 1
        assert watcher.flags_binary == str(py)
        report = build_report(None, new, facts, table=watcher.table, flags_source=watcher.flags_note,
                              flags_binary=watcher.flags_binary)
        assert report.flags_binary == str(py)
        changed = side_from_text("new.service", _unit(py, 4))
        await watcher.facts_for(changed)
        await watcher.facts_for(changed)
        assert calls.read_text().count("__version__") == 2, "once more after the unit changed, not per poll"
    finally:
        await transport.close()


async def test_a_local_files_interpreter_is_never_run(tmp_path: Path) -> None:
    py, calls = _fake_python(tmp_path)
    transport = LocalTransport()
    try:
        watcher = ServiceWatcher(transport, "new.service", None)
        local = side_from_text("local.service", _unit(py, 2))
        await watcher.facts_for(local, installed=False)
        assert not calls.exists()
        assert watcher.flags_binary is None
    finally:
        await transport.close()


def test_the_pane_says_which_binary_ran() -> None:
    old = side_from_text("a", "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m\n")
    new = side_from_text("b", "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m "
                              "--disable-cuda-graph\n")
    from console.domain.analysis.service_diff import HostFacts

    report = build_report(old, new, HostFacts(), flags_source="checked against the host's SGLang 0.5.99",
                          flags_binary="/opt/venv/bin/python")
    out = io.StringIO()
    Console(width=140, file=out).print(format_service(Reading("service", report, 0.0), width=140))
    assert "ran /opt/venv/bin/python" in out.getvalue()


def test_nvidia_smi_does_not_share_the_service_round_trip() -> None:
    assert "nvidia-smi" not in service_script(["a.service", "b.service"])


async def test_a_hanging_nvidia_smi_leaves_the_gpu_count_unknown_not_the_diff_failed(
        tmp_path: Path, monkeypatch) -> None:
    fake = tmp_path / "bin2"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\nsleep 600\n")
    (fake / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    monkeypatch.setattr("console.host.sources.service.GPU_COUNT_TIMEOUT_S", 1.0)
    transport = LocalTransport()
    try:
        watcher = ServiceWatcher(transport, "new.service", None)
        assert await watcher.gpu_count() is None
    finally:
        await transport.close()
