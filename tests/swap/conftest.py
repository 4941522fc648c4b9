"""Fixtures of the swap's tests, from the test kit."""

from tests.kit.container_paths import path_step_ctl  # noqa: F401 - the fixture
