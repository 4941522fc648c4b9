"""The install of a compose service whose container is already there, on the real dockerd with the test
run's Compose v2 plugin (over OpenSSH's sshd): `docker compose create --no-recreate` creates nothing and
says nothing then, and leaves a container created from an earlier version of the file as it was. Started,
it would serve the earlier launch under a diff that shows the file's; the install says which it found:
the file's container already there (Compose's config hash of the service equals the container's label),
or one of an earlier file, which fails the step with how to recreate it, and nothing is changed."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.domain.swap import container_steps
from console.domain.swap.errors import StepFailed
from tests.real.compose_host import ComposeProject, compose_down, compose_project
from tests.real.daemons import Dockerd
from tests.real.docker_host import PlanCtl, RealDockerHost, close_host, inspect, open_host, require_sshd
from tests.real.ports import free_port

pytestmark = pytest.mark.real_docker


@pytest.fixture
async def host(dockerd: Dockerd, tmp_path: Path) -> AsyncIterator[RealDockerHost]:
    require_sshd()
    h = await open_host(dockerd, tmp_path / "host")
    try:
        yield h
    finally:
        await close_host(h)


@pytest.fixture
def project(dockerd: Dockerd, tmp_path: Path) -> ComposeProject:
    """sglang up; sglang-next created (not started) from the file as it is now, /models/B."""
    port = free_port()
    p = compose_project(dockerd, tmp_path / "project", f"gcer{secrets.token_hex(4)}", old_port=port, new_port=port,
                        old_model="/models/A", new_model="/models/B")
    dockerd.docker("compose", "-f", str(p.file), "create", "--", p.new_service)
    yield p  # type: ignore[misc]
    compose_down(dockerd, p)


async def _install(host: RealDockerHost, p: ComposeProject) -> str:
    ctl = PlanCtl(host.transport, new=None, old=p.old, port=0, compose=str(p.file), compose_service=p.new_service)
    try:
        report = await ctl.read_service()
        assert report.new.name == p.new, report.new
        return await container_steps.run_install(ctl, "ana")  # type: ignore[arg-type]
    finally:
        await ctl.close()


async def test_the_services_container_created_from_the_file_as_it_is_is_said_to_exist_not_created(
        host: RealDockerHost, dockerd: Dockerd, project: ComposeProject) -> None:
    before = inspect(dockerd, project.new)
    said = await _install(host, project)
    assert said.endswith(f"{project.new} exists, as {project.file} says {project.new_service} now "
                         "(created before this swap)"), said
    assert inspect(dockerd, project.new)["Id"] == before["Id"]  # Compose created nothing


async def test_a_container_created_from_an_earlier_file_fails_the_install_and_is_left_as_it_was(
        host: RealDockerHost, dockerd: Dockerd, project: ComposeProject) -> None:
    before = inspect(dockerd, project.new)
    project.file.write_text(project.file.read_text().replace("/models/B", "/models/C"))  # the operator's edit
    with pytest.raises(StepFailed) as failed:
        await _install(host, project)
    why = str(failed.value)
    assert why.startswith(f"{project.new} was created from an earlier {project.file} (Compose's hash of "
                          f"{project.new_service} there, "), why
    assert f"recreate it (docker compose -f {project.file} create --force-recreate -- {project.new_service})" in why
    after = inspect(dockerd, project.new)
    # Docker's account: the same container, still the earlier launch (what a start would have served)
    assert after["Id"] == before["Id"] and "/models/B" in after["Args"] and after["State"]["Status"] == "created"
    labelled = after["Config"]["Labels"]["com.docker.compose.config-hash"]
    assert labelled[:12] in why
