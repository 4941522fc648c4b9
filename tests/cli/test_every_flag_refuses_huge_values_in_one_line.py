"""A sweep of bad values over every option and positional of every subcommand (issue 34, item 14):
each ends in one line on stderr and exit 2, never a traceback. A 10,000-character path or --host
reached open() (ENAMETOOLONG) and the resolver (IDNA "label too long") and printed tracebacks; a
300-byte name between two slashes did the same under PATH_MAX.

The options are read from the parser itself, so a flag added later is swept too. In-process (a
refusal comes before anything connects or runs); a few in a real process at the end."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator

import pytest

from console.cli import main as cli
from tests.kit.figures import record

HUGE = "/tmp/" + "a" * 10_000
LONG_NAME = "/tmp/" + "b" * 300  # under PATH_MAX, over NAME_MAX
LONG_LABEL = "c" * 100 + ".example"  # a host name part over 63 characters


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _positionals(p: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in p._actions if not a.option_strings and not isinstance(a, argparse._SubParsersAction)]


def _valued(p: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for a in p._actions:
        if a.option_strings and a.nargs != 0 and not isinstance(a, (argparse._HelpAction, argparse._VersionAction)):
            yield a


def cases() -> list[list[str]]:
    parser = cli.build_parser()
    out: list[list[str]] = []
    commands: list[tuple[list[str], argparse.ArgumentParser]] = [([], parser)]
    commands += [([name], sub) for name, sub in _subparsers(parser).items()]
    for prefix, p in commands:
        needed = ["x"] * sum(1 for a in _positionals(p) if a.nargs not in ("?", "*"))
        for value in (HUGE, LONG_NAME):
            for action in _valued(p):
                out.append([*prefix, action.option_strings[-1], value, *needed])
            for i in range(len(_positionals(p))):
                args = ["x"] * max(len(needed), i + 1)
                args[i] = value
                out.append([*prefix, *args])
        out.append([*prefix, "--host", LONG_LABEL, *needed] if any(
            "--host" in a.option_strings for a in p._actions) else [*prefix, "--host", LONG_LABEL])
    return out


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[object, str]:
    try:
        code: object = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


def test_every_option_and_positional_refuses_a_huge_or_overlong_value_in_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    bad = []
    every = cases()
    for argv in every:
        try:
            code, err = _run(argv, capsys)
        except Exception as exc:  # noqa: BLE001 - the escaped exception is the finding
            bad.append((argv[:2], f"raised {type(exc).__name__}: {str(exc)[:80]}"))
            continue
        lines = [ln for ln in err.splitlines() if ln.strip()]
        if code != 2 or len(lines) != 1 or not lines[0].startswith("gpuconsole: ") or "Traceback" in err:
            bad.append(([a[:20] for a in argv[:3]], code, err[-200:]))
    record("every option of every subcommand: a 10,000-character value, a 300-byte name, a 100-character host "
           "label (one line, exit 2)", tried=len(every), failed=len(bad), escaped=len(bad))
    assert len(every) > 150  # every subcommand's options are in the sweep
    assert bad == []


@pytest.mark.parametrize("argv", [
    ["snapshot", "--host", LONG_LABEL], ["--host", HUGE, "snapshot"], ["replay", LONG_NAME], ["report", LONG_NAME],
    ["diff", LONG_NAME, "/tmp/x"], ["--screenshot", LONG_NAME + ".svg", "--demo"]])
def test_in_a_real_process_the_refusal_is_one_line(argv: list[str]) -> None:
    r = subprocess.run([sys.executable, "-m", "console", *argv], capture_output=True, text=True, timeout=120)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("gpuconsole: "), r.stderr[-400:]


def test_an_ordinary_host_name_and_path_still_pass_the_edge() -> None:
    assert cli.host_problem("gpu-node-07.cluster.example.org") is None
    assert cli.host_problem("ana@10.0.0.7") is None and cli.host_problem("[::1]") is None
    assert cli.too_long(["--model-dir", "/shared/models/" + "q" * 200]) is None
    ns = argparse.Namespace(model_dir="/shared/models/Qwen3.5-397B-A17B-FP8", port=22, hosts=["a", "b"])
    assert cli.name_too_long(ns) is None
