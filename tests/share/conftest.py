"""The pairing tests' fixtures (tests/kit/share.py)."""

from tests.kit.share import core  # noqa: F401 - the fixture
