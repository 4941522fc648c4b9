"""Inputs built to hurt the parsers (issue 21, item 12): a deeply nested SSE chunk, repeated `--no-`
in a unit, `--no-foo` alone in `--help`, a model path the stat itself refuses."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from console.domain.analysis.service_report import side_from_text
from console.host.parsers.sglang_flags import table_from_help
from console.redact import redact_text


def test_a_deeply_nested_sse_chunk_is_a_malformed_response_even_without_orjson(monkeypatch) -> None:
    from console.domain.bench import runner

    monkeypatch.setattr(runner, "_loads", json.loads)
    monkeypatch.setattr(runner, "_JsonError", json.JSONDecodeError)
    stream = runner._Stream(0.0, 16)
    with pytest.raises(runner._Fail) as failed:
        stream.event(b"[" * 100_000 + b"]" * 100_000, 1.0)
    assert failed.value.kind == "malformed SSE"


def test_repeated_no_prefixes_are_linear_not_quadratic() -> None:
    """20 KB of `--no-` took 5 s (quadratic backtracking in redaction). Checked by CPU time in a
    child with a hard limit well above the linear cost and far below the quadratic one: a
    quadratic regex is killed by the limit."""
    code = ("import resource; resource.setrlimit(resource.RLIMIT_CPU, (20, 20));"
            "from console.domain.analysis.service_report import side_from_text;"
            "from console.redact import redact_text;"
            "t = 'python -m sglang.launch_server ' + '--no-' * 40000;"
            "side_from_text('x', t); redact_text(t); redact_text('-' * 200000);"
            "redact_text('--' + 'x-' * 100000); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-500:]


def test_a_side_with_many_no_prefixes_still_parses() -> None:
    side = side_from_text("x", "python -m sglang.launch_server " + "--no-" * 100)
    assert side.name == "x"
    assert redact_text("--no-" * 10 + "token abc") != ""


def test_a_help_line_with_only_a_no_option_is_that_flag() -> None:
    table = table_from_help("  --no-foo  x\n", "v")
    assert "--no-foo" in table.specs and not table.specs["--no-foo"].negatable


def test_fit_on_a_path_the_stat_refuses_is_one_line() -> None:
    out = subprocess.run([sys.executable, "-m", "console", "fit", "/proc/1/root/x", "--gpus", "4", "--gpu-mem", "80"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode in (1, 2) and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("gpuconsole: ")
