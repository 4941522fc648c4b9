"""What every simulated tool reads: the sandbox's root, the scenario's state and clock, and which
tools there are. Below the tools and the simulator alike (tools.py dispatches to the fake tools,
which read this; the simulator installs the tools by these names)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

TOOLS: tuple[str, ...] = ("hostname", "df", "nvidia-smi", "systemctl", "journalctl", "sha256sum", "systemd-run",
                          "hf", "docker")


def install_pylib(pylib: Path) -> None:
    """Python modules the host's `python3` finds first (a simulated `pynvml`)."""
    source = Path(__file__).with_name("fake_pynvml.py").read_text()
    (pylib / "pynvml.py").write_text(source)


def scenario_time() -> float:
    state = load_state()
    return (time.time() - float(state["start_s"])) * float(state.get("speed", 1.0))


def root() -> Path:
    return Path(os.environ["GPUSIM_ROOT"])


def load_state() -> dict[str, Any]:
    state: dict[str, Any] = json.loads((root() / ".sim" / "state.json").read_text())
    return state
