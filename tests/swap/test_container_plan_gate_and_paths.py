"""Issue 26's remainder, unit level: the container plan's stop uses the controller's one gate-then-
approval function (item 6), the faster paths on containers (item 5)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from console.domain.swap import container_steps, path_steps, steps
from console.domain.swap.container_plan import ContainerPlan
from tests.kit.container_paths import MODEL_CONFIG, FastCtl, spec


class _Refused(Exception):
    pass


class _Ctl:
    """What the container stop (container_steps.run_stop_old) may touch: the controller's
    gate-then-approval and the container plan's names, nothing else before the stop (a copy of the gate in the plan would call _fresh_service/evaluate_gate here)."""

    def __init__(self) -> None:
        self.profile = SimpleNamespace(container="sglang-new", compare_container="sglang-old", compose=None,
                                       require_approval=False)
        self.calls: list[tuple[str, Any]] = []
        self.containers = ContainerPlan(self)  # type: ignore[arg-type]

    async def gate_then_approval(self, who: str, serving: str | None) -> None:
        self.calls.append((who, serving))
        raise _Refused(f"the preflight gate refuses: x; nothing ran, {serving} still serves")

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the container plan reached ctl.{name} before the gate")


async def test_the_container_stop_runs_the_controllers_one_gate_and_approval() -> None:
    ctl = _Ctl()
    with pytest.raises(_Refused, match="sglang-old still serves"):
        await container_steps.run_stop_old(ctl, "alice")  # type: ignore[arg-type]
    assert ctl.calls == [("alice", "sglang-old")]


# -- item 5: the faster paths on containers ---------------------------------------------------------
def _plan(chosen: str, port: int | None = None, gpus: tuple[int, ...] = ()) -> Any:
    from console.domain.swap import paths as P

    ip = P.PathOption("in-place", chosen == "in-place", 5.0, "same architecture")
    bs = P.PathOption("beside", chosen == "beside", 0.0, "free GPUs", gpus=gpus, port=port)
    return P.choose(ip, bs, P.restart_option(60.0, ""))


def test_in_place_posts_the_new_models_path_as_the_running_container_sees_it() -> None:
    ctl = FastCtl(spec("sglang-old", "/shared/models"), spec("sglang-new", "/shared/models"),
                   "/shared/models/Qwen3.5-122B-A10B")
    ctl.fast.plan = _plan("in-place")
    (action,) = ctl.fast.build("in_place")
    script = action.commands[0].script
    assert '"model_path": "/models/Qwen3.5-122B-A10B"' in script, script
    assert "/shared/models/Qwen3.5-122B-A10B" not in script  # the host path means nothing inside


def test_in_place_is_not_possible_when_the_running_container_cannot_see_the_new_model() -> None:
    from console.domain.swap import container_fastpath as cfp

    ctl = FastCtl(spec("sglang-old", "/data/models"), spec("sglang-new", "/shared/models"),
                   "/shared/models/Qwen3.5-122B-A10B")
    plan = _plan("in-place", port=30001, gpus=(4, 5, 6, 7))
    ip, bs = cfp.adjust_options(ctl, plan.option("in-place"), plan.option("beside"),  # type: ignore[arg-type]
                                "/shared/models/Qwen3.5-122B-A10B")
    assert not ip.possible
    assert ip.reason == ("/shared/models/Qwen3.5-122B-A10B is not mounted into sglang-old (its bind mounts: "
                         "/data/models:/models): the running server cannot read the new weights in place")


def test_the_old_models_config_is_read_through_the_old_containers_mount() -> None:
    from console.domain.swap import container_fastpath as cfp

    ctl = FastCtl(spec("sglang-old", "/data/models"), spec("sglang-new", "/shared/models"), "/shared/models/N")
    assert cfp.host_model_path(ctl, "/models/Qwen3.5-397B-A17B-NVFP4") == "/data/models/Qwen3.5-397B-A17B-NVFP4"
    assert cfp.host_model_path(ctl, "/opt/elsewhere") is None  # under no mount: not a host path to read


def test_in_place_on_a_container_rolls_back_by_restarting_the_old_container() -> None:
    ctl = FastCtl(spec("sglang-old", "/shared/models"), spec("sglang-new", "/shared/models"), "/shared/models/N")
    ctl.fast.plan = _plan("in-place")
    (action,) = ctl.containers.build("rollback")
    assert [c.script for c in action.commands] == ["timeout -k 5 120 docker restart -t 60 -- sglang-old"]
    # the plan's in-place steps on a container: `docker` runs, never systemctl's
    assert steps.step_for(ctl, "in_place").runtimes == steps.CONTAINER == steps.step_for(ctl, "rollback").runtimes
    assert steps.step_for(ctl, "rollback").paths == ("in-place",)
    ctl.fast.plan = _plan("restart")
    (action,) = ctl.containers.build("rollback")
    assert "docker stop -t 60 -- sglang-new" in action.commands[0].script  # the restart path's own


def test_beside_needs_the_new_container_on_the_chosen_gpus_and_port() -> None:
    from console.domain.swap import container_fastpath as cfp

    plan = _plan("beside", port=30001, gpus=(4, 5, 6, 7))
    ctl = FastCtl(spec("sglang-old", "/shared/models"), spec("sglang-new", "/shared/models"), "/shared/models/N")
    why = cfp.beside_misfit(ctl, plan.option("beside"))  # type: ignore[arg-type]
    assert why is not None and "its GPUs are device=0,1,2,3, not 4,5,6,7 (--gpus '\"device=4,5,6,7\"')" in why
    assert "not 30001 (--port 30001" in why
    fits = FastCtl(spec("sglang-old", "/shared/models"),
                    spec("sglang-new", "/shared/models", gpus=("4", "5", "6", "7"), port=30001), "/shared/models/N")
    assert cfp.beside_misfit(fits, plan.option("beside")) is None  # type: ignore[arg-type]


async def test_the_server_died_during_an_in_place_update_reads_the_containers_state() -> None:

    ctl = FastCtl(spec("sglang-old", "/shared/models"), spec("sglang-new", "/shared/models"), "/shared/models/N")

    async def exited(name: str) -> dict[str, str]:
        assert name == "sglang-old"
        return {"status": "exited", "running": "false", "exit_code": "137", "restarts": "0", "oom_killed": "true"}

    ctl.containers.state_of = exited  # type: ignore[method-assign]
    assert await path_steps.server_dead(ctl) is True


def test_beside_on_containers_starts_the_new_container_and_stops_the_old_with_docker() -> None:
    ctl = FastCtl(spec("sglang-old", "/shared/models"),
                   spec("sglang-new", "/shared/models", gpus=("4", "5", "6", "7"), port=30001), "/shared/models/N")
    ctl.fast.plan = _plan("beside", port=30001, gpus=(4, 5, 6, 7))
    ctl.fast.router_url = "http://127.0.0.1:8000"
    (beside,) = ctl.fast.build("beside")
    assert [c.script for c in beside.commands] == ["timeout -k 5 60 docker start -- sglang-new"]
    (switch,) = ctl.fast.build("switch_traffic")
    assert switch.commands[-1].script == "timeout -k 5 90 docker stop -t 60 -- sglang-old"
    assert not any("systemctl" in c.script for c in (*beside.commands, *switch.commands))
    (rollback,) = ctl.containers.build("rollback")  # the old one never stopped: stop the new one only
    assert [c.script for c in rollback.commands] == ["timeout -k 5 90 docker stop -t 60 -- sglang-new"]
    assert steps.step_for(ctl, "beside").runtimes == steps.CONTAINER == steps.step_for(ctl, "rollback").runtimes
    assert steps.step_for(ctl, "rollback").when is not None  # the old one never stopped: stop the new one
    # A new container created for other GPUs is refused with what to create it with.
    wrong = FastCtl(spec("sglang-old", "/shared/models"), spec("sglang-new", "/shared/models"), "/shared/models/N")
    wrong.fast.plan = ctl.fast.plan
    with pytest.raises(Exception, match="device=4,5,6,7"):
        wrong.fast.build("beside")


async def test_the_path_step_on_containers_reads_the_old_config_through_its_mount(tmp_path: Path,
                                                                                  path_step_ctl: Any) -> None:
    """The paths step itself (its run, console/domain/swap/path_choice.py) on a real shell: the old server's `--model-path` is
    /models/OLD inside its container; its config.json is read at the mount's host path; in place is
    chosen when the running container sees the new model's directory, refused (with the mounts) when not."""
    ctl = path_step_ctl(str(tmp_path / "shared/models"))
    await steps.step_for(ctl, "paths").run(ctl, "alice")
    assert ctl.fast.old_model_path == str(tmp_path / "shared/models/OLD")
    assert ctl.fast.chosen == "in-place", ctl.fast.plan.lines()
    (action,) = ctl.fast.build("in_place")
    assert '"model_path": "/models/NEW"' in action.commands[0].script
    ctl = path_step_ctl(str(tmp_path / "data/models"))  # the old container sees only /data/models
    (tmp_path / "data/models/OLD").mkdir(parents=True)
    (tmp_path / "data/models/OLD/config.json").write_text(json.dumps(MODEL_CONFIG))
    await asyncio.wait_for(steps.step_for(ctl, "paths").run(ctl, "alice"), 60)
    assert ctl.fast.chosen == "restart"
    assert "is not mounted into sglang-old" in ctl.fast.plan.option("in-place").reason


async def test_the_beside_plan_on_containers_says_the_gpus_flag_the_container_gets(tmp_path: Path,
                                                                                   path_step_ctl: Any) -> None:
    """Beside on containers the new server gets its GPUs from its launch (`--gpus '"device=4"'`), not
    from a CUDA_VISIBLE_DEVICES a unit file would set: the plan's words (the gate's line, the report's
    details) say what the container gets, and in place is refused for the container's flags, not a unit's."""
    from console.model import GpuDevice, GpuProcess, GpuStatus

    gpus = GpuStatus("nvidia-smi", tuple(
        GpuDevice(i, "NVIDIA H200", None, 121_000 if i < 4 else 0, 143_771, 50, 40, 300.0, 700.0,
                  (GpuProcess(41_200 + i, "sglang::scheduler", 120_000),) if i < 4 else ()) for i in range(8)))
    ctl = path_step_ctl(str(tmp_path / "shared/models"), gpus=gpus, new_gpus=("4",), new_port=30001)
    ctl.fast.want = "beside"
    await steps.step_for(ctl, "paths").run(ctl, "alice")
    assert ctl.fast.chosen == "beside", ctl.fast.plan.lines()
    said = " | ".join(ctl.fast.plan.lines()) + " | " + " ".join(c.reason for c in ctl.fast.gate_checks())
    assert "--gpus '\"device=4\"'" in said and "CUDA_VISIBLE_DEVICES" not in said, said
    assert "the new container changes --port" in said and "unit" not in said, said  # in place: not a unit's flags
