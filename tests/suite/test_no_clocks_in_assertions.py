"""The suite's own rules, checked over its source (issue 38): no test asserts a wall-clock timing,
none sleeps (or pauses the pilot) and then asserts, and every fuzz test asserts a property of what
the parser returned, not only that it did not raise. Each finding is named by file:line."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
CLOCKS = {"monotonic", "perf_counter", "process_time", "time", "elapsed_s", "monotonic_ns", "perf_counter_ns"}
TIMING_NAMES = ("elapsed", "took", "duration", "wall")
PILOT_PAUSE_MAX_S = 0.5  # a pilot pause longer than this before an assertion is a wait on the clock
SLEEP_MAX_S = 0.2
LOOKAHEAD = 3  # an assertion this many statements after the wait (`plan = …render()` between them)
# A settle before a negative count (nothing must have happened) is not a wait for something to
# happen; such a line says why, after this mark.
ALLOWED_MARK = "# not a wait:"


def _clock_call(node: ast.AST) -> bool:
    """A call of a clock: time.monotonic(), loop.time(), time.process_time(), sim.elapsed_s() …"""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name in CLOCKS


def _timed(node: ast.AST) -> bool:
    """An expression that is a duration measured on a clock (`now() - started`, `abs(t - time())`,
    `elapsed_s()`, a name such as `elapsed`)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Sub) and (_clock_call(sub.left)
                                                                          or _clock_call(sub.right)):
            return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "elapsed_s":
            return True
        if isinstance(sub, ast.Name) and any(w in sub.id.lower() for w in TIMING_NAMES):
            return True
    return False


def _timing_assert(node: ast.Assert) -> bool:
    for sub in ast.walk(node.test):
        if isinstance(sub, ast.Compare) and any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in sub.ops):
            sides = [sub.left, *sub.comparators]
            if any(_timed(side) for side in sides):
                return True
    return False


def _wait_seconds(stmt: ast.stmt) -> tuple[str, float] | None:
    """(what, seconds) of `await pilot.pause(N)`, `await asyncio.sleep(N)` or `time.sleep(N)`."""
    if not isinstance(stmt, ast.Expr):
        return None
    call = stmt.value.value if isinstance(stmt.value, ast.Await) else stmt.value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.args
            and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, (int, float))):
        return None
    seconds = float(call.args[0].value)
    if call.func.attr == "pause" and seconds > PILOT_PAUSE_MAX_S:
        return "pilot.pause", seconds
    if call.func.attr == "sleep" and seconds >= SLEEP_MAX_S:
        return "sleep", seconds
    return None


def _bodies(tree: ast.AST) -> Iterator[list[ast.stmt]]:
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                yield body


def findings(root: Path) -> list[str]:
    """Every timing assertion, sleep-then-assert and assert-free fuzz test under `root`."""
    out: list[str] = []
    for path in sorted(root.glob("**/test_*.py")):
        if path.name == Path(__file__).name:
            continue
        source = path.read_text()
        tree, lines = ast.parse(source, str(path)), source.splitlines()
        rel = path.relative_to(root.parent) if root.parent in path.parents else path
        for node in ast.walk(tree):
            if isinstance(node, ast.Assert) and _timing_assert(node):
                out.append(f"{rel}:{node.lineno}: asserts a timing: {ast.unparse(node.test)[:80]}")
        for body in _bodies(tree):
            for i, stmt in enumerate(body):
                waited = _wait_seconds(stmt)
                if waited is None or ALLOWED_MARK in lines[stmt.lineno - 1]:
                    continue
                following = []
                for after in body[i + 1:i + 1 + LOOKAHEAD]:  # assignments may stand between (`plan = …`)
                    following.append(after)
                    if not isinstance(after, (ast.Assign, ast.AnnAssign)):
                        break
                if any(isinstance(after, ast.Assert) for after in following):
                    out.append(f"{rel}:{stmt.lineno}: {waited[0]}({waited[1]:g}) then an assertion: wait on the "
                               "condition instead (tests/conftest.py's wait_for)")
        if "fuzz" in path.name:
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_") \
                        and not any(isinstance(sub, ast.Assert) for sub in ast.walk(node)):
                    out.append(f"{rel}:{node.lineno}: {node.name} asserts nothing about the parser's output")
    return out


def test_no_test_asserts_a_timing_or_sleeps_before_asserting() -> None:
    found = findings(TESTS)
    assert found == [], "\n".join(found)


def test_the_rule_finds_each_kind_of_clock_in_a_test(tmp_path: Path) -> None:
    """The checker itself: each shape the suite once had is named with its line."""
    (tmp_path / "test_clocked.py").write_text(
        "import time\n"
        "async def test_a(pilot, sim):\n"
        "    started = time.monotonic()\n"
        "    assert time.monotonic() - started < 1.0\n"          # 4: a wall-clock bound
        "    assert 0 <= sim.elapsed_s() < 30\n"                  # 5: the simulator's clock
        "    await pilot.pause(0.6)\n"                            # 6: a fixed pilot wait, then an assertion
        "    assert pilot\n"
        "    await asyncio.sleep(1.0)\n"                          # 8: sleep, then an assertion
        "    assert sim\n"
        "    deadline = time.monotonic() + 30\n"
        "    while time.monotonic() < deadline:\n"                # a bounded wait: allowed
        "        await asyncio.sleep(0.1)\n"
        "    await pilot.pause()\n"
        "    assert pilot\n")
    (tmp_path / "test_fuzz_x.py").write_text("def test_never_raises():\n    parse('x')\n")
    found = findings(tmp_path)
    assert [f.split(": ", 1)[0].rsplit(":", 1)[1] for f in found] == ["4", "5", "6", "8", "1"], found
    assert "test_never_raises asserts nothing" in found[-1]
