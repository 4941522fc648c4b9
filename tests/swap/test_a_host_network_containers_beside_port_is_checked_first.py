"""The beside path on containers checks the new server's port on the host before `docker start`
when the container shares the host's network (`--network host`, how SGLang's images are run, and
how the simulator and the real-dockerd modules run them): its server binds the host's port itself,
and a taken port let the container start and die at its bind while the step waited for it. On a
bridge Docker's own publish refuses a taken port at `docker start`, so no check is added there.
A taken port refuses the step, nothing started, the old container serving on."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from console.domain.swap import container_fastpath as cfp
from console.domain.swap import paths as P
from console.domain.swap.errors import StepRefused
from tests.kit.container_paths import FastCtl, spec
from tests.kit.downtime import TCP_FREE, TCP_HEADER

HELD = TCP_HEADER + "   1: 0100007F:7531 0100007F:0016 01 0 0 0\n"  # a connection's local port 30001
LISTENING = TCP_HEADER + "   1: 00000000:7531 00000000:0000 0A 0 0 0\n"


def _ctl(network: str | None) -> FastCtl:
    new = replace(spec("sglang-new", "/shared/models", gpus=("4", "5", "6", "7"), port=30001), network_mode=network)
    ctl = FastCtl(replace(spec("sglang-old", "/shared/models"), network_mode=network), new, "/shared/models/N")
    opt = P.PathOption("beside", True, 0.0, "free GPUs", gpus=(4, 5, 6, 7), port=30001)
    ctl.fast.plan = SimpleNamespace(chosen="beside", chosen_option=opt, option=lambda name: opt, lines=lambda: [])
    return ctl


def test_on_the_host_network_the_port_is_checked_before_the_start() -> None:
    (beside,) = _ctl("host").fast.build("beside")
    check, start = (c.script for c in beside.commands)
    assert check.startswith("timeout -k 5 8 grep -h -i -e local_address -e ':7531 ' -- /proc/net/tcp /proc/net/tcp6")
    assert start == "timeout -k 5 60 docker start -- sglang-new"


@pytest.mark.parametrize("network", [None, "bridge", "sglang-net"])
def test_on_a_bridge_docker_start_is_the_only_command(network: str | None) -> None:
    (beside,) = _ctl(network).fast.build("beside")
    assert [c.script for c in beside.commands] == ["timeout -k 5 60 docker start -- sglang-new"]


async def _run_beside(answer: str) -> tuple[list[str], Any]:
    ctl = _ctl("host")
    ran: list[str] = []

    async def run(who: str, key: str, cmd: Any) -> Any:
        ran.append(cmd.script)
        if "/proc/net/tcp" in cmd.script:
            return SimpleNamespace(text=answer, ok=True, exit_status=0)
        raise AssertionError(f"ran past the check: {cmd.script}")

    ctl.build = ctl.fast.build  # type: ignore[attr-defined]
    ctl._run = run  # type: ignore[attr-defined]
    with pytest.raises(Exception) as caught:
        await cfp.run_beside(ctl, "ana")  # type: ignore[arg-type]
    return ran, caught.value


@pytest.mark.parametrize(("answer", "said"), [(HELD, "a connection holds 127.0.0.1:30001"),
                                               (LISTENING, "something listens on 0.0.0.0:30001"),
                                               ("", "could not be checked")])
async def test_a_taken_port_refuses_the_step_and_nothing_starts(answer: str, said: str) -> None:
    ran, error = await _run_beside(answer)
    assert isinstance(error, StepRefused), error
    assert said in str(error) and "nothing was started" in str(error) and "sglang-old serves on" in str(error)
    assert len(ran) == 1 and "docker start" not in ran[0]


async def test_a_free_port_goes_on_to_the_start() -> None:
    ran, error = await _run_beside(TCP_FREE)
    assert "ran past the check: timeout -k 5 60 docker start -- sglang-new" in str(error)
