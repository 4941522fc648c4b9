"""Fixtures for the suite-rule tests (the pairing core, tests/kit/share.py)."""

from tests.kit.share import core  # noqa: F401 - the fixture
