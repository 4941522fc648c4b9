"""The real-daemon kit itself: the test run's own dockerd answers, runs the test image, and leaves
the machine's network alone."""

from __future__ import annotations

import subprocess

import pytest

from tests.real.daemons import IMAGE_TAG, Dockerd

pytestmark = pytest.mark.real_docker


def test_the_tests_own_dockerd_runs_a_container_of_the_imported_image(dockerd: Dockerd) -> None:
    run = dockerd.docker("run", "--rm", "--network", "none", IMAGE_TAG, "python3", "-c", "print(6 * 7)")
    assert run.stdout.strip() == "42"
    version = dockerd.docker("version", "--format", "{{.Server.Version}}").stdout.strip()
    assert version.startswith("20.10"), version


def test_the_tests_own_dockerd_creates_no_network_interface(dockerd: Dockerd) -> None:
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=False).stdout
    assert "docker0" not in links
    networks = dockerd.docker("network", "ls", "--format", "{{.Name}}").stdout.split()
    assert "bridge" not in networks
