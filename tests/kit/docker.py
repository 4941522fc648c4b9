"""Shared test kit: moved from test_docker_host.py so that no test imports another test module."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

DATA = Path(__file__).parent.parent / "data" / "docker"


def inspect(root: Path, name: str, models: str, *, running: bool, model: str, extra: list[str]) -> dict:
    [obj] = json.loads((DATA / "inspect_qwen397b.json").read_text())
    obj["Name"] = "/" + name
    obj["Id"] = hashlib.sha256(name.encode()).hexdigest()
    obj["Mounts"][0]["Source"] = str(root / models)
    obj["HostConfig"]["Binds"] = [f"{root / models}:/models:ro"]
    obj["Args"] = ["python3", "-m", "sglang.launch_server", "--model-path", f"/models/{model}", "--tp-size", "4",
                   *extra]
    obj["State"].update(Running=running, Status="running" if running else "exited", Pid=48213 if running else 0)
    return obj
