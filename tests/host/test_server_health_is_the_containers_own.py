"""The driven Docker demo declared the new server ready and its benchmark failed at once with HTTP
503 "server is starting": the server source follows no unit for a container, so the old container's
/health_generate answer stood for the new one. A new process behind the port (`docker inspect`'s
State.Pid) starts with no health of its own."""

from __future__ import annotations

from dataclasses import dataclass, field

from console.host.sources.server import ServerWatcher
from console.host.transport.base import CommandResult


@dataclass
class Docker:
    pid: int
    ran: list[str] = field(default_factory=list)
    label: str = "h"

    async def run(self, script: str, timeout: float = 30) -> CommandResult:
        self.ran.append(script)
        if script.startswith("docker inspect"):
            return CommandResult(0, f"{self.pid}\n".encode(), b"", 0.01)
        return CommandResult(1, b"", b"", 0.01)

    async def http_base_url(self, port: int) -> str:
        raise OSError("no forward in this test")


async def test_a_new_container_behind_the_port_has_no_health_of_the_old_ones() -> None:
    docker = Docker(pid=4100)
    watcher = ServerWatcher(docker, None, 30000, None, container="sglang-new")  # type: ignore[arg-type]
    await watcher.poll()
    watcher._health, watcher._ever_ok = (True, 1.0, None), True  # the old container answered /health_generate
    await watcher.poll()
    assert watcher._ever_ok and watcher._health[0] is True  # the same process: its health stands
    docker.pid = 5200  # `docker start` of the new container: another process
    status = await watcher.poll()
    assert watcher._health == (None, None, None) and not watcher._ever_ok
    assert status.status != "ready" and status.main_pid == 5200
    assert any("State.Pid" in c and "sglang-new" in c for c in docker.ran)


async def test_a_stopped_container_has_no_process() -> None:
    docker = Docker(pid=0)
    watcher = ServerWatcher(docker, None, 30000, None, container="sglang-new")  # type: ignore[arg-type]
    assert (await watcher.poll()).main_pid is None
