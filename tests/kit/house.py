"""The house's arrows: every import of console/ read from the source, those written inside a
function and those for types only (`if TYPE_CHECKING:`) too, for the architecture tests
(tests/core/test_architecture.py's circle, tests/core/test_floors.py's floors) and their
self-tests on a small fake tree. An import hidden in a function is still an arrow of the house:
it runs when the function does, and a circle or an arrow up through one is the same circle."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

CONSOLE = Path(__file__).resolve().parent.parent.parent / "console"


@dataclass(frozen=True, slots=True)
class Arrow:
    """One import: the importing module, the module imported (the longest name of console/ it
    resolves to), the line, and whether it is written inside a function or for types only."""

    source: str
    target: str
    line: int
    inside_function: bool
    type_only: bool


def module_of(path: Path, root: Path = CONSOLE) -> str:
    """console/host/session.py → console.host.session; a package's __init__.py is the package."""
    rel = path.relative_to(root.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def modules(root: Path = CONSOLE) -> dict[str, Path]:
    """Every module of the tree under `root`, by its dotted name."""
    return {module_of(p, root): p for p in sorted(root.rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The module an imported name stands for: `console.a.b.C` is console.a.b when C is a name in
    it, `console.a.b` a module; None for a name outside the tree."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in known:
            return ".".join(parts)
        parts.pop()
    return None


def _absolute(node: ast.ImportFrom, here: str, is_package: bool) -> str:
    """`from .x import y` written in console.a.b → console.a.x."""
    if not node.level:
        return node.module or ""
    base = here.split(".") if is_package else here.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _file_arrows(here: str, path: Path, known: dict[str, Path]) -> list[Arrow]:
    is_package = path.name == "__init__.py"
    out: list[Arrow] = []

    def visit(node: ast.AST, inside: bool, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            types = typing_only or (isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test))
            names: list[str] = []
            if isinstance(child, ast.ImportFrom):
                base = _absolute(child, here, is_package)
                names = [f"{base}.{a.name}" for a in child.names]
            elif isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            for name in names:
                target = _resolve(name, known)
                if target and target != here:
                    out.append(Arrow(here, target, child.lineno, inside, types))
            visit(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)), types)

    visit(ast.parse(path.read_text(encoding="utf-8")), False, False)
    return out


def arrows(root: Path = CONSOLE) -> list[Arrow]:
    """Every import between modules of the tree, at the top, inside a function or for types only."""
    known = modules(root)
    return [arrow for here, path in known.items() for arrow in _file_arrows(here, path, known)]


def graph(found: list[Arrow]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a in found:
        out.setdefault(a.source, set()).add(a.target)
        out.setdefault(a.target, set())
    return out


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan), each as a sorted list: a
    part is a set of files that import each other round a circle, however long."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    parts: list[list[str]] = []
    counter = 0

    def connect(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                parts.append(sorted(part))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return sorted(parts)


def a_path_round(part: list[str], edges: dict[str, set[str]]) -> list[str]:
    """One circle inside a connected part, to name in a failure: from its first module back to it."""
    start = part[0]
    members = set(part)
    seen = {start: [start]}
    frontier = [start]
    while frontier:
        nxt_frontier = []
        for node in frontier:
            for nxt in sorted(edges.get(node, ()) & members):
                if nxt == start:
                    return seen[node] + [start]
                if nxt not in seen:
                    seen[nxt] = seen[node] + [nxt]
                    nxt_frontier.append(nxt)
        frontier = nxt_frontier
    return part
