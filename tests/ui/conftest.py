"""The UI tests' fixtures (tests/kit/screens.py)."""

from tests.kit.screens import app  # noqa: F401 - the fixture
