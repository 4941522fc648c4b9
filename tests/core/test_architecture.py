"""Layering: parsers, analysis, sources, transport and the core (HostState, codec, runner, recording)
never import Textual: they run headless (snapshot, serve, replay's reader)."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", [
    "console.parsers.host", "console.sources.host", "console.transport", "console.transport.ssh",
    "console.model", "console.config", "console.doctor", "console.snapshot", "console.backoff",
    "console.core.state", "console.core.codec", "console.core.runner", "console.core.recording",
    "console.model", "console.config", "console.doctor", "console.snapshot",
    "console.share.protocol", "console.share.server", "console.share.client",  # the pairing core runs headless
])
def test_headless_layers_do_not_import_textual(module: str) -> None:
    code = f"import sys, {module}; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_package_root_is_light() -> None:
    code = "import sys, console; print(sorted(m for m in ('textual', 'asyncssh', 'httpx') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_installed_wheel_carries_the_stylesheet() -> None:
    """A plain `pip install .` must ship styles/console.tcss inside the package."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("gpuconsole")
    except PackageNotFoundError:
        pytest.skip("gpuconsole is not installed")
    files = [str(f) for f in (dist.files or [])]
    if any(f.endswith(".pth") for f in files):
        pytest.skip("editable install: the stylesheet is read from the checkout")
    assert "console/styles/console.tcss" in files
