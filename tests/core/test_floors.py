"""The house's floors: every import written at a module's top goes down (or stays on its floor),
never up. The tree says where a behaviour lives; this test says which way the arrows run.

Floors, top to bottom (console/…):
  cli                the command line: a module per subcommand
  ui                 Textual: the one App, the host, fleet and deployment screens, the panes
  share              pairing: the core served to attach clients and the browser
  domain/deploy      one model over several hosts
  domain/fleet       many hosts
  demo               the simulated host, its operators, sshd and Prometheus for the tests
  domain/swap        the swap's engine: the executor's steps, the gate, the report
  core               HostState: events, apply and its derived views (the swap's observer among
                     them), the runner, the codec, recordings
  host/session       one host's transport and sources
  host/sources       what is asked of the host, and how often
  host/hub           the Hub's file list
  domain/analysis    pure analysis of what the host said
  domain/bench       the benchmark client and its metrics
  domain/paths       the forbidden-prefix rule
  host/parsers       pure parsers of host output
  host/transport     SSH and local commands, streams, files
  host/backoff       the one retry policy
  leaves             config, model, units, locations, sanitize, redact (they import only each other)
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent / "console"
FLOORS = ["cli", "ui", "share", "domain/deploy", "domain/fleet", "demo", "domain/swap", "core", "host/session",
          "host/sources", "host/hub", "domain/analysis", "domain/bench", "domain/paths", "host/parsers",
          "host/transport", "host/backoff", "leaves"]
LEAVES = {"config", "model", "units", "locations", "sanitize", "redact", "__init__"}


def _floor_of_parts(parts: list[str]) -> str | None:
    """The floor of a module given as its path parts under console/ (no .py)."""
    if not parts:
        return "leaves"
    if len(parts) == 1:
        return "leaves" if parts[0] in LEAVES else ("cli" if parts[0] == "__main__" else None)
    if parts[0] in ("host", "domain"):
        return "leaves" if parts[1] == "__init__" else f"{parts[0]}/{parts[1]}"  # the folders' own docstrings
    return parts[0]


def _imports_at_the_top(path: Path) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.ImportFrom) and child.module and child.module.startswith("console"):
                out.append((child.module, child.lineno))
            elif isinstance(child, ast.Import):
                out.extend((a.name, child.lineno) for a in child.names if a.name.startswith("console"))
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return out


def test_every_module_stands_on_a_floor() -> None:
    files = sorted(ROOT.rglob("*.py"))
    assert len(files) > 150, len(files)  # the tree this test reads, found
    homeless = [str(p.relative_to(ROOT)) for p in files
                if _floor_of_parts(list(p.relative_to(ROOT).with_suffix("").parts)) not in FLOORS]
    assert not homeless, homeless


def test_no_import_runs_up_a_floor() -> None:
    up = []
    for path in sorted(ROOT.rglob("*.py")):
        here = _floor_of_parts(list(path.relative_to(ROOT).with_suffix("").parts))
        for module, line in _imports_at_the_top(path):
            there = _floor_of_parts(module.split(".")[1:])
            if here in FLOORS and there in FLOORS and FLOORS.index(there) < FLOORS.index(here):
                up.append(f"console/{path.relative_to(ROOT)}:{line} ({here}) imports {module} ({there})")
    assert not up, "imports that run up a floor:\n" + "\n".join(up)


def test_the_floor_list_is_this_tree() -> None:
    """Every floor names a folder or module that exists: a move that empties one shows here."""
    for floor in FLOORS:
        if floor != "leaves":
            assert (ROOT / floor).is_dir() or (ROOT / f"{floor}.py").is_file(), floor
