"""A compose project on the real dockerd for the compose swap's report tests: one compose file with two
services of the simulated SGLang in the test image (tests/real/docker_host.py's `run_sglang`, written
as Compose writes it): OLD, brought up (`docker compose up -d`), the container the console replaces
(its `compare_container`, PROJECT-OLD-1 as Compose names it), and NEW, the profile's
`compose_service`, never created before the swap: the console's install creates it
(`docker compose create`). Every `docker compose` runs through the test run's own CLI plugin
(tests/real/compose_plugin.py) under the dockerd's DOCKER_CONFIG, which the host's sessions share.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.real.compose_plugin import install_plugin
from tests.real.daemons import IMAGE_TAG, Dockerd
from tests.real.docker_host import CHECKOUT, docker_time, sglang_args, shim_dir


@dataclass(frozen=True)
class ComposeProject:
    """A compose file on the host and what Compose names in it."""

    file: Path
    project: str
    old_service: str
    new_service: str

    def container(self, service: str) -> str:
        """Compose's name for a service's one container (PROJECT-SERVICE-1)."""
        return f"{self.project}-{service}-1"

    @property
    def old(self) -> str:
        return self.container(self.old_service)

    @property
    def new(self) -> str:
        return self.container(self.new_service)


def _service(dockerd: Dockerd, port: int, model: str, extra: tuple[str, ...], env: dict[str, str],
             models_dir: Path | None, gpus: tuple[str, ...] | None) -> str:
    volumes = [f"{CHECKOUT / 'console'}:/gc/console:ro", f"{shim_dir(dockerd)}:/gc/sglang:ro"]
    if models_dir is not None:
        volumes.append(f"{models_dir}:/models:ro")
    environment = {"PYTHONPATH": "/gc", "PYTHONUNBUFFERED": "1", "GPUSIM_SPEED": "8", **env}
    lines = [f"    image: {IMAGE_TAG}", "    network_mode: host",
             f"    command: {json.dumps(sglang_args(port, model=model, extra=extra))}",
             "    volumes:", *[f"      - {json.dumps(v)}" for v in volumes],
             "    environment:", *[f"      {k}: {json.dumps(v)}" for k, v in environment.items()]]
    if gpus is not None:  # Compose's GPU reservation: Docker's DeviceRequests (the stand-in hook starts them)
        lines += ["    deploy:", "      resources:", "        reservations:", "          devices:",
                  "            - driver: nvidia", f"              device_ids: {json.dumps(list(gpus))}",
                  "              capabilities: [gpu]"]
    return "\n".join(lines)


def compose_project(dockerd: Dockerd, directory: Path, project: str, *, old_port: int, new_port: int,
                    old_model: str, new_model: str, old_extra: tuple[str, ...] = (), new_extra: tuple[str, ...] = (),
                    env: dict[str, str] | None = None, models_dir: Path | None = None,
                    old_gpus: tuple[str, ...] | None = None, new_gpus: tuple[str, ...] | None = None,
                    old_service: str = "sglang", new_service: str = "sglang-next") -> ComposeProject:
    """Write DIRECTORY/compose.yaml (project PROJECT) and bring its OLD service up; NEW is left uncreated."""
    install_plugin(dockerd.root / "cli-config")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "compose.yaml"
    env = env or {}
    path.write_text(f"name: {project}\nservices:\n"
                    f"  {old_service}:\n{_service(dockerd, old_port, old_model, old_extra, env, models_dir, old_gpus)}\n"
                    f"  {new_service}:\n{_service(dockerd, new_port, new_model, new_extra, env, models_dir, new_gpus)}\n")
    dockerd.docker("compose", "-f", str(path), "up", "-d", "--", old_service, timeout_s=180)
    return ComposeProject(path, project, old_service, new_service)


def compose_down(dockerd: Dockerd, project: ComposeProject) -> None:
    """The project's containers removed (Compose's own `down`, then any left by name)."""
    dockerd.docker("compose", "-f", str(project.file), "down", "-t", "1", timeout_s=120, check=False)
    dockerd.docker("rm", "-f", project.old, project.new, check=False)


def compose_logs(dockerd: Dockerd, project: ComposeProject, service: str) -> list[tuple[float, str]]:
    """`docker compose logs -t --no-log-prefix SERVICE`: (Docker's time of the line, the line), oldest first."""
    run = dockerd.docker("compose", "-f", str(project.file), "logs", "-t", "--no-log-prefix", "--no-color",
                         "--", service)
    out = []
    for line in run.stdout.splitlines():
        stamp, _, text = line.partition(" ")
        out.append((docker_time(stamp), text))
    return sorted(out, key=lambda x: x[0])


def compose_config(dockerd: Dockerd, project: ComposeProject) -> dict[str, Any]:
    """The compose file as Compose itself reads it (`docker compose config --format json`)."""
    config: dict[str, Any] = json.loads(dockerd.docker("compose", "-f", str(project.file), "config",
                                                       "--format", "json").stdout)
    return config
