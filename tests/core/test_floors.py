"""The house's floors: every import goes down (or stays on its floor), never up: at a module's top,
written inside a function, or for types only (`if TYPE_CHECKING:`). An import hidden in a function
runs when the function does; it is an arrow of the house like any other (the host's session once
started the demo's simulator that way, and the swap demo drove the Textual app). The tree says
where a behaviour lives; this test says which way the arrows run.

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

from pathlib import Path

from tests.kit.house import CONSOLE, arrows, modules

ROOT = CONSOLE
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


def floor_of(module: str, root: Path = ROOT) -> str | None:
    """The floor of a dotted module of the tree under `root` (a package is its __init__.py)."""
    parts = module.split(".")[1:]
    if not parts or (root.joinpath(*parts) / "__init__.py").is_file():
        parts = [*parts, "__init__"]
    return _floor_of_parts(parts)


def up_arrows(root: Path = ROOT) -> list[str]:
    """Every import of the tree that runs from a floor to one above it, named by file and line."""
    known = modules(root)
    up = []
    for arrow in arrows(root):
        here, there = floor_of(arrow.source, root), floor_of(arrow.target, root)
        if here in FLOORS and there in FLOORS and FLOORS.index(there) < FLOORS.index(here):
            how = " inside a function" if arrow.inside_function else " for types" if arrow.type_only else ""
            where = known[arrow.source].relative_to(root.parent)
            up.append(f"{where}:{arrow.line} ({here}) imports {arrow.target} ({there}){how}")
    return sorted(set(up))


def test_every_module_stands_on_a_floor() -> None:
    files = sorted(ROOT.rglob("*.py"))
    assert len(files) > 150, len(files)  # the tree this test reads, found
    homeless = [str(p.relative_to(ROOT)) for p in files
                if _floor_of_parts(list(p.relative_to(ROOT).with_suffix("").parts)) not in FLOORS]
    assert not homeless, homeless


def test_no_import_runs_up_a_floor() -> None:
    assert len(arrows()) > 500  # the scan reads the tree's imports (never an empty scan)
    up = up_arrows()
    assert not up, "imports that run up a floor:\n" + "\n".join(up)


def test_an_import_up_a_floor_is_found_at_the_top_inside_a_function_and_for_types(tmp_path: Path) -> None:
    """The scan itself, on a small tree: the host's session starting the demo inside a function,
    a parser naming the core for its types, and the transport importing a parser at its top are
    each an arrow up; the session's import of a source, and the demo's of the session, run down."""
    root = tmp_path / "console"
    for folder in ("host/transport", "host/parsers", "host/sources", "demo", "core"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "host" / "__init__.py").write_text("")
    (root / "core" / "state.py").write_text("")
    (root / "host" / "sources" / "gpu.py").write_text("")
    (root / "demo" / "sim.py").write_text("from console.host.session import start\n")
    (root / "host" / "session.py").write_text(
        "from console.host.sources.gpu import GpuSource\n\n\ndef start():\n"
        "    from console.demo.sim import Simulator\n")
    (root / "host" / "parsers" / "nvml.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from console.core.state import HostState\n")
    (root / "host" / "transport" / "ssh.py").write_text("from console.host.parsers import nvml\n")
    assert up_arrows(root) == [
        "console/host/parsers/nvml.py:4 (host/parsers) imports console.core.state (core) for types",
        "console/host/session.py:5 (host/session) imports console.demo.sim (demo) inside a function",
        "console/host/transport/ssh.py:1 (host/transport) imports console.host.parsers.nvml (host/parsers)",
    ]


def test_the_floor_list_is_this_tree() -> None:
    """Every floor names a folder or module that exists: a move that empties one shows here."""
    for floor in FLOORS:
        if floor != "leaves":
            assert (ROOT / floor).is_dir() or (ROOT / f"{floor}.py").is_file(), floor
