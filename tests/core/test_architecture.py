"""Layering: parsers, analysis, sources, transport and the core (HostState, codec, runner, recording)
never import Textual: they run headless (snapshot, serve, replay's reader)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("module", [
    "console.parsers.host", "console.sources.host", "console.transport", "console.transport.ssh",
    "console.model", "console.config", "console.doctor", "console.snapshot", "console.backoff",
    "console.core.state", "console.core.codec", "console.core.runner", "console.core.recording",
    "console.model", "console.config", "console.doctor", "console.snapshot",
    "console.share.protocol", "console.share.server", "console.share.client",  # the pairing core runs headless
])
def test_headless_layers_do_not_import_textual(module: str) -> None:
    code = f"import sys, {module}; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_package_root_is_light() -> None:
    code = "import sys, console; print(sorted(m for m in ('textual', 'asyncssh', 'httpx') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_installed_wheel_carries_the_stylesheet() -> None:
    """A plain `pip install .` must ship styles/console.tcss inside the package."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution("gpuconsole")
    except PackageNotFoundError:
        pytest.skip("gpuconsole is not installed")
    files = [str(f) for f in (dist.files or [])]
    if any(f.endswith(".pth") for f in files):
        pytest.skip("editable install: the stylesheet is read from the checkout")
    assert "console/styles/console.tcss" in files


# -- the swap package: no import cycle, no import hidden inside a function between core and swap ---
ROOT = Path(__file__).resolve().parent.parent.parent / "console"
assert (ROOT / "core" / "state.py").is_file(), ROOT  # the tree this test reads, found (never an empty scan)


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module imported, inside a function) for every console import of a file, TYPE_CHECKING
    blocks left out (they never run)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[tuple[str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                if child.module.startswith("console"):
                    out.append((child.module, in_function))
                    out.extend((f"{child.module}.{a.name}", in_function) for a in child.names)
            elif isinstance(child, ast.Import):
                out.extend((a.name, in_function) for a in child.names if a.name.startswith("console"))
            visit(child, inner)

    visit(tree, False)
    return out


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _swap_graph() -> dict[str, set[str]]:
    files = {_module(p): p for p in (ROOT / "swap").glob("*.py")}
    return {mod: {m for m, _ in _imports(path) if m in files and m != mod} for mod, path in files.items()}


def test_the_swap_package_has_no_import_cycle() -> None:
    """Every import counts, at the top or inside a function (a cycle hidden in a function is
    still a cycle): the steps never import the executor (console/swap/errors.py is below both)."""
    graph = _swap_graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def walk(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                walk(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node, [])
    assert not cycles, "import cycles in console/swap: " + "; ".join(" → ".join(c) for c in cycles)


def test_core_and_swap_import_each_other_only_at_the_top_of_a_module() -> None:
    """An import written inside a function between console/core and console/swap hides an arrow
    of the layering (208 of them once); the demo, a command's entry, is the one lazy loader."""
    hidden = []
    for package, other in (("core", "console.swap"), ("swap", "console.core")):
        for path in sorted((ROOT / package).glob("*.py")):
            if path.name == "demo.py":
                continue
            hidden += [f"{_module(path)} imports {'.'.join(m.split('.')[:3])} inside a function"
                       for m, inside in _imports(path) if inside and m.startswith(other + ".")]
    assert not hidden, "\n".join(sorted(set(hidden)))


# -- one writer of the swap's facts ----------------------------------------------------------------
OBSERVER = ROOT / "swap" / "observe.py"  # console/swap/observe.py: the one writer of what happened
DOWNTIME_ONLY_FIELDS = {"start_source", "end_source"}  # keywords only a DowntimeChanged has


def _downtime_writers(path: Path) -> list[str]:
    """Where a file builds the downtime clock: a DowntimeChanged made (or the observer's
    `downtime_from` asked for one), or one changed with `replace(d, ended_at_s=…, end_source=…)`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else \
            node.func.attr if isinstance(node.func, ast.Attribute) else ""
        keywords = {k.arg for k in node.keywords}
        if name in ("DowntimeChanged", "downtime_from") or (name == "replace" and keywords & DOWNTIME_ONLY_FIELDS) \
                or (name == "replace" and node.args and "downtime" in ast.unparse(node.args[0])
                    and keywords & {"started_at_s", "ended_at_s"}):
            out.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {ast.unparse(node)[:90]}")
    return out


def test_only_the_observer_writes_the_downtime_clock() -> None:
    """The downtime (its start, its end, what each was read from) is written by the observer of the
    host alone, for the console's own stop and start exactly as for a host-side operator's: the
    executor (controller, fast paths, container plan) records intent and who, never a time."""
    writers = [w for path in sorted(ROOT.rglob("*.py")) if path != OBSERVER for w in _downtime_writers(path)]
    assert _downtime_writers(OBSERVER), "the observer writes the clock (this scan would find nothing otherwise)"
    assert not writers, "the downtime clock written outside console/swap/observe.py:\n" + "\n".join(writers)


def test_the_report_reads_the_swap_state_and_derives_nothing() -> None:
    """The observer runs once, in the live core (the controller's, or a fleet host's `observe`), and
    its facts go into the state and the recording; a report, a replay or a view never runs a second
    one (the report once did, and re-derived the swap its recording already held)."""
    allowed = {ROOT / "swap" / "controller.py", OBSERVER}
    runs = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "SwapObserver" \
                    and path not in allowed:
                runs.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    assert not runs, "a SwapObserver outside the live core: " + ", ".join(runs)
