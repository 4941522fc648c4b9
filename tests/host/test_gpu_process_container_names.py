"""Which container holds a GPU's memory: a process whose container `docker ps` did not list yet (it
was starting, or the lookup failed) is looked up again, not shown by its id for the rest of the
session (the Docker demo's GPU pane showed `0ad432c33298` for good when the GPU processes answered
before `docker ps` listed their container: tests/host/test_docker_host.py failed 2 of 3 in a group)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from console.host.sources.gpu import GpuSource
from console.model import GpuDevice, GpuProcess

CID = "0ad432c33298" + "ab" * 26


@dataclass
class Result:
    text: str
    exit_status: int = 0


class Host:
    """A host whose `docker ps` lists the container only from the second lookup on."""

    def __init__(self, fail_first: bool = False) -> None:
        self.lookups = 0
        self.fail_first = fail_first

    async def run(self, script: str, timeout: float) -> Result:
        self.lookups += 1
        if self.fail_first and self.lookups == 1:
            raise ConnectionError("the channel closed")
        names = f"{CID} sglang-qwen122b\n" if self.lookups >= 2 else ""
        return Result(f"@@pid4242\n0::/system.slice/docker-{CID}.scope\n@@names\n{names}")


def gpus() -> tuple:
    return (GpuDevice(0, "H200", None, 1, 2, None, None, None, None,
                      processes=(GpuProcess(pid=4242, name="python3", memory_mib=1),)),)


async def test_a_gpu_process_shown_by_its_container_id_is_named_once_docker_lists_it() -> None:
    host = Host()
    source = GpuSource(host, local=False)
    source.container_retry_s = 0.0
    source._with_containers(gpus())
    await source._container_task
    assert source._with_containers(gpus())[0].processes[0].container == CID[:12]  # not listed yet: its id
    await asyncio.wait_for(source._container_task, 5)
    assert source._with_containers(gpus())[0].processes[0].container == "sglang-qwen122b"
    lookups = host.lookups
    source._with_containers(gpus())
    assert host.lookups == lookups and (source._container_task is None or source._container_task.done())


async def test_a_failed_lookup_is_tried_again_not_taken_for_no_container() -> None:
    host = Host(fail_first=True)
    source = GpuSource(host, local=False)
    source.container_retry_s = 0.0
    source._with_containers(gpus())
    await source._container_task
    source._with_containers(gpus())
    await asyncio.wait_for(source._container_task, 5)
    source._with_containers(gpus())
    await asyncio.wait_for(source._container_task, 5)
    assert source._with_containers(gpus())[0].processes[0].container == "sglang-qwen122b"


async def test_a_lookup_not_due_yet_is_not_repeated_every_sample() -> None:
    host = Host()
    source = GpuSource(host, local=False)  # the default: again after 10 s
    for _ in range(5):
        source._with_containers(gpus())
        if source._container_task is not None:
            await source._container_task
    assert host.lookups == 1
