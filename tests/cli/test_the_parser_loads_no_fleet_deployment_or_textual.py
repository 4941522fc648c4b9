"""Every start parses the whole command line (the fleet's and the deployment's options among it):
the parse, and a headless command's dispatch up to its own module, load neither the fleet, the
deployment, the swap's engine nor Textual. `gpuconsole --help` took 0.72 s while its parse loaded
the fleet's and the deployment's modules for their option groups (0.45 s now, on the 2-core VM)."""

from __future__ import annotations

import ast
import subprocess
import sys

HEAVY = ("textual", "console.domain.fleet", "console.domain.deploy", "console.domain.swap", "console.ui",
         "console.cli.fleet", "console.cli.deploy")


def _loaded_after(code: str) -> list[str]:
    probe = (f"import sys\n{code}\n"
             f"print(sorted(m for m in sys.modules if m.startswith({HEAVY!r})))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])


def test_parsing_every_option_group_loads_none_of_them() -> None:
    loaded = _loaded_after("from console.cli.main import build_parser\n"
                           "args = build_parser().parse_args(['--host', 'gpu-a', '--group', 'g', '--deployment', 'd'])\n"
                           "assert args.group == 'g' and args.deployment == 'd'")
    assert loaded == [], loaded


def test_the_fleet_and_deployment_questions_are_answered_without_loading_them() -> None:
    loaded = _loaded_after("from console.cli.main import build_parser\n"
                           "from console.cli.options import is_deployment, is_fleet\n"
                           "p = build_parser()\n"
                           "assert is_fleet(p.parse_args(['--host', 'a', '--host', 'b']))\n"
                           "assert is_deployment(p.parse_args(['--deployment', 'd']))\n"
                           "assert not is_fleet(p.parse_args(['snapshot'])) and not is_deployment(p.parse_args([]))")
    assert loaded == [], loaded


def test_the_probe_sees_a_module_when_it_is_loaded() -> None:
    """The check itself: loading the fleet's command module is seen."""
    assert "console.cli.fleet" in _loaded_after("import console.cli.fleet")
