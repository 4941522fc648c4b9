"""The suite's own shape (issue 33 item 5): tests live in folders by area, each file named by the
behaviour it checks, shared fixtures and helpers in one kit (tests/kit) — no test module imports
another (asyncssh's and Textual's tests are the models: CONVENTIONS.md)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
AREAS = {"cli", "core", "demo", "domain", "fleet", "host", "hostile", "real", "share", "suite", "swap", "ui"}
# Named after a fix, a round of work, a session or an audit instead of a behaviour.
NOT_A_BEHAVIOUR = re.compile(r"fix\d|_s\d+(_|\.py)|round\d|session\d|audit|eyes|mutations?_killed|issue\d")


def test_every_test_file_lives_in_an_area_folder() -> None:
    misplaced = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py")
                       if p.parent == TESTS or p.relative_to(TESTS).parts[0] not in AREAS)
    assert misplaced == [], f"tests outside the area folders {sorted(AREAS)}: {misplaced}"


def test_no_test_file_is_named_after_a_fix_a_round_or_an_audit() -> None:
    named = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py") if NOT_A_BEHAVIOUR.search(p.name))
    assert named == [], f"name these by the behaviour they check: {named}"


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return found


def test_no_test_module_imports_another_test_module() -> None:
    """Helpers and fixtures two test files share belong in tests/kit; a test file is never a library."""
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        for line, module in _imported_modules(path):
            last = module.rsplit(".", 1)[-1]
            if module.startswith("tests.") and (last.startswith("test_") or last == "conftest") \
                    and not (module == "tests.conftest" and path.name == "test_isolation.py"):
                offenders.append(f"{path.relative_to(TESTS)}:{line} imports {module}")
    assert offenders == [], "\n".join(offenders)
