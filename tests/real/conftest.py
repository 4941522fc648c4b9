"""Fixtures of the real-daemon tests (`pytest -m real_docker`, `pytest -m real_systemd`).

Each xdist worker that runs such a test starts one dockerd of its own for the session, in a root of
the cache's pool (tests/real/daemons.py: the image imported there once stays for the next run); the
root filesystem the image comes from is built once (scripts/test.sh does it before the suite).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.real.daemons import DaemonUnavailable, Dockerd, pooled_root, require_dockerd, start_dockerd


@pytest.fixture(scope="session")
def dockerd() -> Iterator[Dockerd]:
    """A real dockerd of this test session's own, with the test image imported."""
    require_dockerd()
    with pooled_root() as root:
        try:
            daemon = start_dockerd(root)
        except DaemonUnavailable as exc:
            pytest.fail(str(exc), pytrace=False)
        try:
            try:
                daemon.ensure_image()
            except DaemonUnavailable as exc:
                pytest.fail(str(exc), pytrace=False)
            yield daemon
        finally:
            daemon.stop(keep_data=True)


# The real systemd host, one container per test module (tests/real/systemd_host.py).
from tests.real.systemd_host import real_host  # noqa: E402, F401
