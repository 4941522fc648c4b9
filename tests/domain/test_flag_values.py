"""Every flag of the built-in SGLang table accepts a valid value: integer choices included
(`--log-requests-level 2`, `--dsa-triton-union 4`), and the diff renders them (issue 15, item 3)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from console.domain.analysis.service_diff import HostFacts
from console.domain.analysis.service_report import build_report, report_json, side_from_text
from console.model import Reading
from console.ui.panes.service import format_service
from console.host.parsers.sglang_argv import normalize
from console.host.parsers.sglang_flags import FlagSpec, builtin_table

INT_CHOICE_FLAGS = ("--log-requests-level", "--fuseep-mode", "--max-lora-chunk-size", "--dsa-triton-union")


def valid_values(spec: FlagSpec) -> list[str]:
    if not spec.takes_value:
        return []
    if spec.choices:
        return [spec.choices[-1]]
    t = spec.type
    if "int" in t:
        return ["4"]
    if "float" in t:
        return ["0.5"]
    if t == "loads" or "json" in spec.flag:
        return ["{}"]
    return ["x"]


def test_every_flag_of_the_table_takes_a_valid_value() -> None:
    table = builtin_table()
    for spec in table.specs.values():
        cmd = normalize(["python", "-m", "sglang.launch_server", "--model-path", "/m", spec.flag, *valid_values(spec)],
                        table)
        errors = [p for p in cmd.problems if p.severity == "error"]
        assert errors == [], (spec.flag, errors)


def _unit(extra: str) -> str:
    return ("[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m --tp-size 1 "
            + extra + "\n")


def test_integer_choice_flags_diff_and_render(tmp_path: Path) -> None:
    table = builtin_table()
    for flag in INT_CHOICE_FLAGS:
        spec = table.lookup(flag).spec
        assert spec is not None and spec.choices, flag
        old = side_from_text("old.service", _unit(""), table)
        new = side_from_text("new.service", _unit(f"{flag} {spec.choices[-1]}"), table)
        report = build_report(old, new, HostFacts())
        assert not [x for x in report.lints if x.severity == "error" and flag in x.message], flag
        json.dumps(report_json(report))
        Console(width=140, file=io.StringIO()).print(format_service(Reading("service", report, 0.0), width=140))
        bad = side_from_text("bad.service", _unit(f"{flag} 99"), table)
        assert any("not one of" in p.message for p in bad.command.problems), flag
        (tmp_path / "old.service").write_text(_unit(""))
        (tmp_path / "new.service").write_text(_unit(f"{flag} {spec.choices[0]}"))
        out = subprocess.run([sys.executable, "-m", "console", "diff", str(tmp_path / "old.service"),
                              str(tmp_path / "new.service"), "--json"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
        json.loads(out.stdout)
