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
    """The observer runs once, in the live core (a step of the runner's state's apply), and
    its facts go into the state and the recording; a report, a replay or a view never runs a second
    one (the report once did, and re-derived the swap its recording already held)."""
    allowed = {ROOT / "core" / "derive.py", OBSERVER}  # the live core's derive step, and the observer's own
    runs = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "SwapObserver" \
                    and path not in allowed:
                runs.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    assert not runs, "a SwapObserver outside the live core: " + ", ".join(runs)


# -- the core imports the swap's state (its view and its observer), never the swap's engine -----------
# console/swap/model.py (the swap view), observe.py (the observer) and downtime_model.py are the
# swap's state: they import only the core and below, and the target tree (DESIGN.md) puts them in
# core/derive/swap.py. The engine (controller, fast paths, containers, report) imports the core; the
# core reaches it only through what it is handed (HostRunner(..., swap=SwapController)).
SWAP_STATE = {"console.swap.model", "console.swap.observe", "console.swap.downtime_model",
              "console.swap.plan"}  # plan: the path x runtime table, data the observer reads


def _top(module: str) -> str:
    return ".".join(module.split(".")[:3])


def test_the_core_imports_only_the_swaps_state_and_the_swaps_state_only_the_core() -> None:
    up = sorted({f"{_module(path)} imports {_top(m)}" for path in (ROOT / "core").glob("*.py")
                 for m, _ in _imports(path) if m.startswith("console.swap.") and _top(m) not in SWAP_STATE})
    assert not up, "the core imports the swap's engine:\n" + "\n".join(up)
    files = {_module(p): p for p in (ROOT / "swap").glob("*.py")}
    out = sorted({f"{mod} imports {_top(m)}" for mod in SWAP_STATE for m, _ in _imports(files[mod])
                  if m.startswith("console.swap.") and _top(m) not in SWAP_STATE})
    assert not out, "the swap's state imports the swap's engine:\n" + "\n".join(out)


def test_loading_the_core_loads_no_swap_engine() -> None:
    code = ("import sys, console.core.runner, console.core.state, console.core.codec, console.core.recording; "
            "print(sorted(m for m in sys.modules if m.startswith('console.swap.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(ast.literal_eval(out.stdout))
    assert loaded and loaded <= SWAP_STATE, loaded


# -- imports written inside a function: none new (issue 33 item 5) ------------------------------------
# What stands today, per file under console/ (every module imported inside a def, stdlib too). The
# aim is the lazy Textual load of the headless commands only; a count here may only go down. The
# core has none: it appears nowhere below.
LAZY_IMPORTS_ALLOWED: dict[str, int] = {
    "cli.py": 31, "swap/demo.py": 18, "share/cli.py": 17, "session.py": 6, "hostsim/tools.py": 11, 
    "fleet/prom.py": 10, "swap/fastpath.py": 10, "fleet/cli.py": 8, "host_screen.py": 8, 
    "hostsim/fake_docker.py": 8, "panes/bench.py": 8, "swap/controller.py": 8, "fit_cli.py": 7, 
    "hostsim/fake_sglang/launch_server.py": 7, "hostsim/scenario.py": 7, "swap/container_plan.py": 6, 
    "transport/ssh.py": 6, "hostsim/docker_drive.py": 5, "hostsim/process.py": 5, "panes/registry.py": 5, 
    "share/server.py": 5, "sources/gpu.py": 5, "app.py": 1, "fleet/demo.py": 4, "hostsim/drive.py": 4, 
    "hostsim/server.py": 4, "swap/container_fastpath.py": 4, "swap/observe.py": 4, "swap/report.py": 4, 
    "bench/runner.py": 3, "diff_cli.py": 3, "hostsim/services.py": 3, "hub.py": 3, "swap/preflight.py": 3, 
    "analysis/service_diff.py": 2, "config.py": 2, "fleet/screen.py": 2, "hostsim/fleet_paths.py": 2, 
    "panes/swap.py": 2, "parsers/docker.py": 2, "snapshot.py": 2, "sources/download.py": 2, 
    "sources/nvml_sampler.py": 2, "analysis/download.py": 1, "bench/tokens.py": 1, "fleet/metrics.py": 1, 
    "hostsim/__init__.py": 1, "hostsim/downtime_scenario.py": 1, "hostsim/fake_nvidia_smi.py": 1, 
    "hostsim/multihost.py": 1, "panes/fit.py": 1, "panes/service.py": 1, "parsers/nvidia_smi.py": 1, 
    "share/client.py": 1, "share/web.py": 1, "sources/base.py": 1, "sources/log.py": 1, "sources/service.py": 1, 
    "swap/ready_wait.py": 1, "testing.py": 1, "transport/local.py": 1,
    # `--deployment`: the Textual app and the simulator, loaded only when the screen or the demo is
    # asked for (as cli.py's own: `--once` and `--swap` never load Textual)
    "deploy/cli.py": 2,
}


def _lazy_imports() -> dict[str, int]:
    counts: dict[str, int] = {}
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        n = 0

        def visit(node: ast.AST, in_function: bool) -> None:
            nonlocal n
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    continue
                if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                    n += 1
                visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        visit(tree, False)
        if n:
            counts[path.relative_to(ROOT).as_posix()] = n
    return counts


def test_no_new_import_inside_a_function() -> None:
    counts = _lazy_imports()
    assert sum(counts.values()) > 100, counts  # the scan sees the imports it is meant to see
    grown = {f: f"{n} (allowed {LAZY_IMPORTS_ALLOWED.get(f, 0)})" for f, n in counts.items()
             if n > LAZY_IMPORTS_ALLOWED.get(f, 0)}
    assert not grown, ("imports inside a function beyond what stands (import at the top of the module; "
                       f"a cycle that forces one is the thing to fix): {grown}")
    assert not any(f.startswith("core/") for f in counts), counts


def test_there_is_one_app() -> None:
    """One App (console/app.py's ConsoleApp) for one host, N hosts, attach, replay and the browser:
    a single host is a fleet of one. A second App class fails here."""
    apps = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                    ast.unparse(b).split("[")[0].split(".")[-1].endswith("App") for b in node.bases):
                apps.append(f"{node.name} in {path.relative_to(ROOT.parent)}")
    assert apps == ["ConsoleApp in console/app.py"], apps
