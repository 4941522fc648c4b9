"""Every remote command's bound on the host (`timeout -k GRACE N argv…`) is built in one place,
console/host/transport/bounded.py: the swap's actions, the router's poll, the download's launcher,
the pre-warm and the transport's own wrapper. A hand-written `timeout -k` elsewhere is a second
spelling that drifts (a value unquoted, a bound missing, a grace of its own); the builder quotes every
word and refuses what `timeout` would read as an option."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

CONSOLE = Path(__file__).resolve().parents[2] / "console"
BUILDER = CONSOLE / "host" / "transport" / "bounded.py"
# `timeout` followed by one of its options, a number or a formatted value: a command, not prose
HAND_WRITTEN = re.compile(r"(?:^|[\s;&|(`])timeout\s+(?:-k\b|--kill-after|-s\b|--signal|\{|\d)")


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """The module's string literals and f-strings (their formatted parts as `{}`), docstrings left out."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant) and isinstance(node.body[0].value.value, str)}
    inside_fstrings = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            out.append((node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings \
                and id(node) not in inside_fstrings:
            out.append((node.lineno, node.value))
    return out


def _argv_lists(tree: ast.AST) -> list[int]:
    """Lines of list or tuple literals that start an argv with `timeout` (`["timeout", "-k", …]`)."""
    def an_argv(node: ast.List | ast.Tuple) -> bool:  # not `kind, text = "timeout", f"…"`
        second = node.elts[1] if len(node.elts) > 1 else None
        return isinstance(node, ast.List) or (isinstance(second, ast.Constant) and isinstance(second.value, str)
                                              and re.match(r"-|\d", second.value) is not None)

    return [node.lineno for node in ast.walk(tree) if isinstance(node, (ast.List, ast.Tuple)) and node.elts
            and isinstance(node.elts[0], ast.Constant) and node.elts[0].value == "timeout" and an_argv(node)]


def test_no_module_in_console_writes_its_own_timeout_wrapper() -> None:
    assert BUILDER.is_file(), "the one builder of a remote command's bound"
    found = []
    for path in sorted(CONSOLE.rglob("*.py")):
        if path == BUILDER:
            continue
        tree = ast.parse(path.read_text(), str(path))
        rel = path.relative_to(CONSOLE.parent)
        found += [f"{rel}:{line}: {text!r}" for line, text in _strings(tree) if HAND_WRITTEN.search(text)]
        found += [f"{rel}:{line}: an argv starting with 'timeout'" for line in _argv_lists(tree)]
    assert found == [], "\n".join(found)


def test_the_scan_sees_the_forms_a_hand_written_wrapper_takes() -> None:
    """The scan above is only as good as what it recognises: each form once written in console/."""
    forms = [
        'f"timeout -k {KILL_AFTER_S} 30 systemd-run --unit={q(unit)}"',
        'f"setsid nohup timeout -k {grace} {bound} sh -c {q(body)}"',
        '"if command -v timeout >/dev/null; then timeout -k 2 9 sh; fi"',
        'shlex.join(["timeout", "-k", "5", str(int(seconds)), *argv])',
        '("timeout", "-k", "5", "10", "sh")',
    ]
    for form in forms:
        tree = ast.parse(f"cmd = {form}")
        assert any(HAND_WRITTEN.search(t) for _, t in _strings(tree)) or _argv_lists(tree), form
    prose = ast.parse('def f():\n    """bounded by the host\'s `timeout -k 5 N`"""\n    kind, text = "timeout", f"after {s}"\n'
                      '    return "a timeout of 5 s"\n')
    assert not any(HAND_WRITTEN.search(t) for _, t in _strings(prose)) and not _argv_lists(prose)


def test_the_builder_bounds_and_quotes_every_word() -> None:
    from console.host.transport.bounded import KILL_AFTER_S, bounded

    cmd = bounded(["systemctl", "stop", "--", "a b;$(reboot).service"], 120)
    assert cmd == f"timeout -k {KILL_AFTER_S} 120 systemctl stop -- 'a b;$(reboot).service'"
    assert shlex.split(cmd) == ["timeout", "-k", str(KILL_AFTER_S), "120", "systemctl", "stop", "--",
                                "a b;$(reboot).service"]
    assert bounded(["sh", "-c", 'eval "$x"'], 9.2, kill_after_s=2) == "timeout -k 2 10 sh -c 'eval \"$x\"'"


@pytest.mark.parametrize("argv, seconds, kill_after_s", [
    ([], 10, 5),                      # nothing to run
    (["-s", "KILL", "reboot"], 10, 5),  # the command's first word read as timeout's own option
    (["--foreground", "sh"], 10, 5),
    ([""], 10, 5),
    (["sleep", "1"], 0, 5),           # no bound at all (`timeout 0` never fires)
    (["sleep", "1"], -3, 5),
    (["sleep", "1"], float("inf"), 5),
    (["sleep", "1"], float("nan"), 5),
    (["sleep", "1"], True, 5),
    (["sleep", "1"], "10; reboot", 5),
    (["sleep", "1"], 10, 0),          # no KILL after the TERM
    (["sleep", "1"], 10, "5 reboot"),
])
def test_the_builder_refuses_what_timeout_would_misread(argv: list[str], seconds: object, kill_after_s: object) -> None:
    from console.host.transport.bounded import BoundError, bounded

    with pytest.raises(BoundError):
        bounded(argv, seconds, kill_after_s=kill_after_s)  # type: ignore[arg-type]


def test_the_builders_refusal_is_an_action_error_where_actions_are_built() -> None:
    """The swap's actions show a refused value to the operator as one line (their ActionError)."""
    from console.domain.swap.actions import ActionError
    from console.host.transport.bounded import BoundError

    assert issubclass(BoundError, ValueError)
    with pytest.raises(ActionError):
        from console.domain.swap import actions as act
        act.bounded(["-x"], 10)
