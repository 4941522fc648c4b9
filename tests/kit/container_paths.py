"""A stand-in controller for the swap's faster paths on containers (tests/swap/test_container_plan_gate_and_paths.py):
the container specs Docker would report, the controller as `FastPaths` and the container plan see it, and,
for the paths step's own run (console/domain/swap/path_choice.py), that controller on a real local shell
with both checkpoints' config.json on disk (`path_step_ctl`).

One place for that set-up: two tests of that module carried their own copy of it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from console.domain.analysis.container_diff import side_from_container
from console.domain.swap.actions import ActionError
from console.domain.swap.container_plan import ContainerPlan
from console.domain.swap.fastpath import FastPaths
from console.host.parsers.docker import ContainerSpec, GpuRequest, Mount
from console.host.transport.local import LocalTransport

# One MoE architecture for both checkpoints (in place is possible between them).
MODEL_CONFIG = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "num_hidden_layers": 48,
                "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 4, "vocab_size": 151936}


def spec(name: str, source: str, *, gpus: tuple[str, ...] = ("0", "1", "2", "3"), port: int = 30000,
         model: str = "/models/M") -> ContainerSpec:
    """SGLang's container as `docker inspect` gives it: SOURCE bind-mounted read-only at /models."""
    return ContainerSpec(name, "lmsysorg/sglang:v0.5.23-cu129",
                         ("python3", "-m", "sglang.launch_server", "--model-path", model, "--port", str(port)),
                         mounts=(Mount(source, "/models", "bind", True),), gpus=GpuRequest(None, gpus))


def with_model_path(container: ContainerSpec, model: str) -> ContainerSpec:
    argv = list(container.argv)
    argv[argv.index("--model-path") + 1] = model
    return replace(container, argv=tuple(argv))


class FastCtl:
    """A controller as the faster paths see it, on containers."""

    def __init__(self, old: Any, new: Any, model_dir: str) -> None:
        watcher = SimpleNamespace(specs={"old": old, "new": new})
        self.session = SimpleNamespace(service_watcher=lambda: watcher)
        self.profile = SimpleNamespace(model_dir=model_dir, server_port=30000, swap_path=None, router_url=None,
                                       require_approval=False, container=new.name, compare_container=old.name,
                                       compose=None)
        self.containers = ContainerPlan(self)  # type: ignore[arg-type]
        self.old_unit, self.new_unit = old.name, new.name
        self.poll_s = 0.0
        self.state = SimpleNamespace(swap=SimpleNamespace(steps={}))
        self.fast = FastPaths(self)  # type: ignore[arg-type]


def _no_draft() -> str:
    raise ActionError("no drafted unit")


@pytest.fixture
async def path_step_ctl(tmp_path: Path) -> AsyncIterator[Callable[..., FastCtl]]:
    """Both checkpoints on disk (TMP/shared/models/OLD and NEW, one config.json each, a shard of the new),
    and a maker of controllers ready for the paths step's own run: the old container (its --model-path
    /models/OLD, /models its OLD_MOUNT), the new one (/models/NEW from TMP/shared/models), the service
    reading of both, GPUS (None: no reading), a real local shell closed at the end."""
    for d in ("shared/models/OLD", "shared/models/NEW"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "config.json").write_text(json.dumps(MODEL_CONFIG))
    (tmp_path / "shared/models/NEW/model-00001-of-00001.safetensors").write_bytes(b"\0" * 1024)
    shells: list[LocalTransport] = []

    def make(old_mount: str, *, gpus: Any = None, new_gpus: tuple[str, ...] = ("0", "1", "2", "3"),
             new_port: int = 30000) -> FastCtl:
        old = with_model_path(spec("sglang-old", old_mount), "/models/OLD")
        new = with_model_path(spec("sglang-new", str(tmp_path / "shared/models"), gpus=new_gpus, port=new_port),
                              "/models/NEW")
        ctl = FastCtl(old, new, str(tmp_path / "shared/models/NEW"))
        data = {"service": SimpleNamespace(old=side_from_container(old), new=side_from_container(new)), "gpu": gpus,
                "server": SimpleNamespace(status="ready")}
        ctl.state = SimpleNamespace(swap=SimpleNamespace(steps={}), data=data.get, log_lines=[],
                                    apply=lambda event: None)
        shells.append(LocalTransport())
        ctl.session.transport = shells[-1]
        ctl.host, ctl.evaluate_gate, ctl._clock = "h", lambda: (), lambda: 0.0  # type: ignore[attr-defined]
        ctl._draft_text_raw = _no_draft  # type: ignore[attr-defined]
        ctl.fast.recordings_dir = tmp_path / "recordings"
        return ctl

    try:
        yield make
    finally:
        for shell in shells:
            await shell.close()
