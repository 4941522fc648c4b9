"""Layering: parsers, analysis, sources, transport and the core (HostState, codec, runner, recording)
never import Textual: they run headless (snapshot, serve, replay's reader)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit.house import a_path_round, arrows, circles, graph, modules


@pytest.mark.parametrize("module", [
    "console.host.parsers.host", "console.host.sources.host", "console.host.transport", "console.host.transport.ssh",
    "console.model", "console.config", "console.cli.doctor", "console.cli.snapshot", "console.host.backoff",
    "console.core.state", "console.core.codec", "console.core.runner", "console.core.recording",
    "console.model", "console.config", "console.cli.doctor", "console.cli.snapshot",
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


def _imports(path: Path, *, type_only: bool = False) -> list[tuple[str, bool]]:
    """(module imported, inside a function) for every console import of a file; TYPE_CHECKING
    blocks left out (they never run) unless `type_only`: a type-only import is still an arrow of
    the house (a circle through one is a circle)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[tuple[str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test) and not type_only:
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


def _module(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _circles_in(root: Path, under: str = "console") -> list[list[str]]:
    """The circles among the modules whose names start with `under` (every import counts: at the
    top, inside a function, for types only), each as the files that import each other round it."""
    edges = {m: {t for t in ts if t.startswith(under)} for m, ts in graph(arrows(root)).items() if m.startswith(under)}
    return [a_path_round(part, edges) for part in circles(edges)]


def test_no_two_files_of_the_console_import_each_other_round_a_circle() -> None:
    """Across the whole of console/, every import counts, at the top, inside a function or for
    types only: a circle hidden in a function is still a circle (the fake docker CLI, the driven
    container scenario and the simulated containers once imported each other round one)."""
    found = arrows()
    assert len(found) > 500 and any(a.inside_function for a in found), len(found)  # the scan reads the tree
    round_ = _circles_in(ROOT)
    assert not round_, "files of console/ that import each other round a circle:\n" + "\n".join(
        " → ".join(c) for c in round_)


def test_the_swap_package_has_no_import_cycle() -> None:
    """The steps never import the executor; what they need of it is the Protocol below them
    (console/domain/swap/executor_api.py), and console/domain/swap/errors.py is below both."""
    swap = {m for m in modules() if m.startswith("console.domain.swap.")}
    assert len(swap) > 10 and any(a.source in swap and a.target in swap for a in arrows()), swap
    cycles = _circles_in(ROOT, "console.domain.swap.")
    assert not cycles, "import cycles in console/domain/swap: " + "; ".join(" → ".join(c) for c in cycles)


def test_every_steps_run_is_a_step_bodys_function_never_a_method_of_the_path_plan() -> None:
    """A swap step's run is a function of the steps' bodies (shared_steps, unit_steps, container_steps,
    path_choice, path_steps, container_fastpath) or steps.py's own, never a method reached through the
    executor's attributes: the planning step `paths` once ran as FastPaths._paths, the path plan choosing
    its own path."""
    from console.domain.swap import steps

    assert len(steps.STEPS) > 10  # the registry read is the one meant
    hidden = [f"{s.key}: {s.run.__module__}.{s.run.__qualname__}" for s in steps.STEPS
              if "." in s.run.__qualname__ or not s.run.__module__.startswith("console.domain.swap.")]
    assert not hidden, "steps whose run is not a step body's function: " + "; ".join(hidden)


def test_the_path_plan_reads_nothing_on_the_host() -> None:
    """console/domain/swap/fastpath.py keeps the path the `paths` step chose and builds the path steps'
    exact commands: it awaits nothing and never names the transport. Reading the host's facts to choose
    is console/domain/swap/path_choice.py's; which of the plan's steps a path takes is the table's."""
    source = (ROOT / "domain" / "swap" / "fastpath.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    awaits = [n.name for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef)]
    assert not awaits and "transport" not in source, (awaits, "transport" in source)
    table = [m for m, _ in _imports(ROOT / "domain" / "swap" / "fastpath.py") if m.endswith("swap_plan")]
    assert "def mark_skips" not in source and not table, table  # the table's skips, applied by steps.py


def test_the_drain_and_a_deaths_cause_are_the_executors_public_seam() -> None:
    """The steps of every runtime wait for the GPUs' drain and read a dead server's cause through the
    Executor Protocol; the real-daemon tests' stand-in executor (tests/real/docker_host.py, no GPUs)
    answers both its own way. They were private one-line delegates (`_drain`, `_death_cause`) that the
    stand-in overrode: named in the Protocol, called by the steps, implemented by both executors."""
    from console.domain.swap.controller import SwapController
    from console.domain.swap.executor_api import Executor

    members = set(vars(Executor))
    assert {"drain", "death_cause"} <= members and not {"_drain", "_death_cause"} & members, sorted(members)
    private = [f"{p.name}: {m}" for p in sorted((ROOT / "domain" / "swap").glob("*.py"))
               for m in ("._drain(", "._death_cause(") if m in p.read_text(encoding="utf-8")]
    assert not private, private
    assert callable(SwapController.drain) and callable(SwapController.death_cause)
    stand_in = ast.parse((ROOT.parent / "tests" / "real" / "docker_host.py").read_text(encoding="utf-8"))
    defined = {n.name for n in ast.walk(stand_in) if isinstance(n, ast.AsyncFunctionDef)}
    assert {"drain", "death_cause"} <= defined and not {"_drain", "_death_cause"} & defined, sorted(defined)


def test_a_circle_through_a_type_only_import_is_found(tmp_path: Path) -> None:
    """The scan itself: a step that names the executor for its types (`if TYPE_CHECKING:`) while the
    executor imports the step is a circle (as the 5 files of the swap engine were)."""
    pkg = tmp_path / "console" / "domain" / "swap"
    pkg.mkdir(parents=True)
    (pkg / "controller.py").write_text("from console.domain.swap import fastpath\n")
    (pkg / "fastpath.py").write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                                     "    from console.domain.swap.controller import SwapController\n")
    assert _circles_in(tmp_path / "console") == [["console.domain.swap.controller", "console.domain.swap.fastpath",
                                                  "console.domain.swap.controller"]]


def test_a_circle_of_three_files_through_an_import_inside_a_function_is_found(tmp_path: Path) -> None:
    """The scan itself: three files round a circle whose one arrow back is written inside a
    function, a relative import among them, is found whole; a file that only imports into the
    circle is not part of it."""
    sim = tmp_path / "console" / "demo" / "hostsim"
    sim.mkdir(parents=True)
    (sim / "__init__.py").write_text("")
    (sim / "containers.py").write_text("from console.demo.hostsim.fake_docker import docker_state_time\n")
    (sim / "fake_docker.py").write_text("def start_stop():\n    from . import docker_drive\n")
    (sim / "docker_drive.py").write_text("async def start():\n"
                                         "    from console.demo.hostsim.containers import mirror\n")
    (sim / "scenario.py").write_text("from console.demo.hostsim import docker_drive\n")
    assert _circles_in(tmp_path / "console") == [[
        "console.demo.hostsim.containers", "console.demo.hostsim.fake_docker", "console.demo.hostsim.docker_drive",
        "console.demo.hostsim.containers"]]


def test_the_states_derive_steps_never_import_the_state() -> None:
    """console/core/state.py runs the steps of console/core/derive in its apply: a step that imports the
    state back, for its types too (`if TYPE_CHECKING:`), closes a circle between the two; what a step
    needs of the state is the Protocol beside the steps (console/core/derive/__init__.py: `State`)."""
    down = {m for m, _ in _imports(ROOT / "core" / "state.py")}
    assert "console.core.derive" in down, down  # the arrow down, found (the scan reads what it is meant to)
    up = [f"{_module(p)} imports {m}" for p in sorted((ROOT / "core" / "derive").glob("*.py"))
          for m, _ in _imports(p, type_only=True) if m == "console.core.state" or m.startswith("console.core.state.")]
    assert not up, "console/core/derive imports the state that runs it: " + "; ".join(up)


def test_core_and_swap_import_each_other_only_at_the_top_of_a_module() -> None:
    """An import written inside a function between console/core and console/domain/swap hides an arrow
    of the layering (208 of them once); the demo, a command's entry, is the one lazy loader."""
    hidden = []
    for package, other in (("core", "console.domain.swap"), ("domain/swap", "console.core")):
        for path in sorted((ROOT / package).glob("*.py")):
            if path.name == "demo.py":
                continue
            hidden += [f"{_module(path)} imports {'.'.join(m.split('.')[:3])} inside a function"
                       for m, inside in _imports(path) if inside and m.startswith(other + ".")]
    assert not hidden, "\n".join(sorted(set(hidden)))


# -- one writer of the swap's facts ----------------------------------------------------------------
OBSERVER = ROOT / "core" / "derive" / "swap_observer.py"  # console/core/derive/swap_observer.py: the one writer of what happened
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
    assert not writers, "the downtime clock written outside console/core/derive/swap_observer.py:\n" + "\n".join(writers)


STEP_TIMES = {"started_at_s", "ended_at_s"}


def _step_time_writers(path: Path) -> list[str]:
    """Where a file gives a swap step a start or an end: a SwapStep made with one, a step's line
    set with one (the executor's `_set(key, ended_at_s=…)`), a step replaced with one, or a step's
    time assigned (`step.started_at_s = …`). The downtime's own replace is the clock's scan."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else \
                node.func.attr if isinstance(node.func, ast.Attribute) else ""
            keywords = {k.arg for k in node.keywords}
            step_replace = name == "replace" and node.args and "downtime" not in ast.unparse(node.args[0]).lower() \
                and not keywords & DOWNTIME_ONLY_FIELDS
            if keywords & STEP_TIMES and (name in ("SwapStep", "_set") or step_replace):
                out.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {ast.unparse(node)[:90]}")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr in STEP_TIMES \
                        and "step" in ast.unparse(target.value).lower():
                    out.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {ast.unparse(node)[:90]}")
    return out


def test_only_the_observer_writes_a_steps_start_and_end() -> None:
    """A swap step's times (when it started, when it ended) are the observer's, for the console's
    own steps as for those seen on the host: the executor (controller, steps, fast paths, container
    plan) writes the step's intent, words and who, never a time; the demo and the UI write none."""
    writers = [w for path in sorted(ROOT.rglob("*.py")) if path != OBSERVER for w in _step_time_writers(path)]
    assert _step_time_writers(OBSERVER), "the observer writes the steps' times (the scan would find nothing otherwise)"
    assert not writers, "a step's time written outside console/core/derive/swap_observer.py:\n" + "\n".join(writers)


def test_the_report_reads_the_swap_state_and_derives_nothing() -> None:
    """The observer runs once, in the live core (a step of the runner's state's apply), and
    its facts go into the state and the recording; a report, a replay or a view never runs a second
    one (the report once did, and re-derived the swap its recording already held)."""
    allowed = {ROOT / "core" / "derive" / "__init__.py", OBSERVER}  # the live core's derive step, and the observer's own
    runs = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "SwapObserver" \
                    and path not in allowed:
                runs.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    assert not runs, "a SwapObserver outside the live core: " + ", ".join(runs)


# -- the swap's state is derived in the core; the core never imports the swap's engine -------------------
# console/core/derive/: swap_view.py (the swap view), swap_observer.py (the one writer of the swap's
# facts), downtime.py and swap_plan.py (the path x runtime table the observer reads) are steps of the
# core's apply, like the GPU and bench views. The engine (console/domain/swap: controller, fast paths,
# containers, report) imports the core; the core reaches it only through what it is handed
# (HostRunner(..., swap=SwapController)).
SWAP_STATE = {"console.core.derive.swap_view", "console.core.derive.swap_observer", "console.core.derive.downtime",
              "console.core.derive.swap_plan"}


def test_the_swaps_state_lives_in_the_core_and_the_core_imports_no_swap_engine() -> None:
    derive = {_module(p) for p in (ROOT / "core" / "derive").glob("*.py")}
    assert SWAP_STATE <= derive, derive  # the tree this test reads, found
    up = sorted({f"{_module(path)} imports {m}" for path in (ROOT / "core").rglob("*.py")
                 for m, _ in _imports(path) if m.startswith("console.domain.swap")})
    assert not up, "the core imports the swap's engine:\n" + "\n".join(up)


def test_loading_the_core_loads_no_swap_engine() -> None:
    code = ("import sys, console.core.runner, console.core.state, console.core.codec, console.core.recording; "
            "print(sorted(m for m in sys.modules if m.startswith('console.core.derive.') "
            "or m.startswith('console.domain.swap')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(ast.literal_eval(out.stdout))
    assert loaded & SWAP_STATE and not any(m.startswith("console.domain.swap") for m in loaded), loaded


# -- imports written inside a function: only where loading later is the point (issue 33 item 5) ----
# A command's entry (console/cli/) loads what its command needs, so `gpuconsole snapshot`, `report`
# or `--once` never load Textual; the simulated host's tools (one process per call on the simulated
# host: tools.py dispatching to the fake CLIs, and the package's lazy HostSimulator) load only the
# tool called; and three libraries are loaded by the one feature that needs them: pynvml (the GPU
# sampler, on the host, where it may be missing), tokenizers (the bench extra) and huggingface_hub
# (the Hub lookup: ~50 ms of imports no other path needs). Anything else is imported at the top of
# its module (an import cycle that seems to force one is the thing to fix). 128 stood once.
LAZY_ENTRIES = ("cli/",)
LAZY_TOOLS = {"demo/hostsim/tools.py", "demo/hostsim/fake_docker.py", "demo/hostsim/__init__.py"}
LAZY_LIBRARIES = {"pynvml", "tokenizers", "huggingface_hub"}


def _imports_inside_functions(root: Path = ROOT) -> list[tuple[str, str]]:
    """(file under root, module) for every import written inside a function (stdlib too);
    TYPE_CHECKING blocks left out (they never run)."""
    out: list[tuple[str, str]] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()

        def visit(node: ast.AST, in_function: bool, rel: str = rel) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    continue
                if in_function and isinstance(child, ast.ImportFrom):
                    out.append((rel, child.module or "." * child.level))
                elif in_function and isinstance(child, ast.Import):
                    out.extend((rel, a.name) for a in child.names)
                visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return out


def _not_lazy_by_rule(found: list[tuple[str, str]]) -> list[str]:
    return sorted(f"{f} imports {m} inside a function" for f, m in found
                  if not f.startswith(LAZY_ENTRIES) and f not in LAZY_TOOLS
                  and m.split(".")[0] not in LAZY_LIBRARIES)


def test_an_import_inside_a_function_is_a_commands_lazy_load_and_nothing_else() -> None:
    found = _imports_inside_functions()
    assert sum(f.startswith("cli/") for f, _ in found) > 20, found  # the scan sees the entries' lazy loads
    stray = _not_lazy_by_rule(found)
    assert not stray, "imports inside a function outside a command's lazy load:\n" + "\n".join(stray)


def test_the_rule_names_a_hidden_import_and_passes_a_commands_lazy_load(tmp_path: Path) -> None:
    """The scan itself: a core module's stdlib import in a method is named, an entry's Textual load
    and a feature's pynvml are not, a TYPE_CHECKING import is not an import at all."""
    (tmp_path / "core").mkdir()
    (tmp_path / "cli").mkdir()
    (tmp_path / "core" / "state.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from console.ui.app import ConsoleApp\n"
        "class S:\n    def f(self):\n        import json\n        from . import codec\n"
        "def g():\n    import pynvml.smi\n")
    (tmp_path / "cli" / "main.py").write_text("def main():\n    from console.ui.app import ConsoleApp\n")
    assert _not_lazy_by_rule(_imports_inside_functions(tmp_path)) == [
        "core/state.py imports . inside a function", "core/state.py imports json inside a function"]


def test_there_is_one_app() -> None:
    """One App (console/ui/app.py's ConsoleApp) for one host, N hosts, attach, replay and the browser:
    a single host is a fleet of one. A second App class fails here."""
    apps = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                    ast.unparse(b).split("[")[0].split(".")[-1].endswith("App") for b in node.bases):
                apps.append(f"{node.name} in {path.relative_to(ROOT.parent)}")
    assert apps == ["ConsoleApp in console/ui/app.py"], apps
