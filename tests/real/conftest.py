"""Fixtures of the real-daemon tests (`pytest -m real_docker`, `pytest -m real_systemd`).

Each xdist worker that runs such a test starts one dockerd of its own for the session
(tests/real/daemons.py); the root filesystem its image comes from is built once and cached.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.real.daemons import DaemonUnavailable, Dockerd, require_dockerd, start_dockerd


@pytest.fixture(scope="session")
def dockerd() -> Iterator[Dockerd]:
    """A real dockerd of this test session's own, with the test image imported."""
    require_dockerd()
    try:
        daemon = start_dockerd()
    except DaemonUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        try:
            daemon.ensure_image()
        except DaemonUnavailable as exc:
            pytest.fail(str(exc), pytrace=False)
        yield daemon
    finally:
        daemon.stop()


# The real systemd host, one container per test module (tests/real/systemd_host.py).
from tests.real.systemd_host import real_host  # noqa: E402, F401
