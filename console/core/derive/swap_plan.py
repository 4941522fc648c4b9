"""The swap's plan as one declarative table: for each path (in place / beside / restart) and each
runtime (a systemd unit, a container, a compose service), which of the plan's steps run and which
are skipped, with the reason the operator reads in the plan ("skipped (in place): …"), never a step
left "pending" that the path will never take. Pure data and two functions: no I/O, no Textual.

The executor (console/domain/swap/controller.py) marks the skipped steps when the path is chosen
(`skips`), and the "swap" action runs `steps_of` in order, each key one of the step objects of
console/domain/swap/steps.py (its preview, its run, its rollback) for the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass

PATHS = ("in-place", "beside", "restart")
RUNTIMES = ("systemd", "container", "compose")
RUNTIME_NAMES = {"systemd": "systemd unit", "container": "container", "compose": "compose service"}

# The plan's own steps every path starts with (download, verify, install, preflight), then the
# path's own. Verify runs only when the profile asks for it (verify_sha).
HEAD = ("download", "verify", "install", "preflight")
NOT_ASKED_VERIFY = "not asked for: the profile's verify_sha is false (v in the Download pane verifies)"


@dataclass(frozen=True, slots=True)
class PathSteps:
    """One row of the table: the steps a path runs on a runtime, in order, and the plan's steps it
    does not take with the reason for each."""

    path: str
    runtime: str
    runs: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]


def _in_place(runtime: str) -> PathSteps:
    server = "container" if runtime != "systemd" else "server"
    return PathSteps("in-place", runtime, (*HEAD, "in_place", "benchmark"), (
        ("stop_old", f"in place: the running {server} is not stopped; it loads the new weights "
                     "(POST /update_weights_from_disk), so requests pause instead"),
        ("start_new", f"in place: no new {server} boots; the running one serves the new weights "
                      "when the update ends"),
    ))


def _beside(runtime: str) -> PathSteps:
    what = RUNTIME_NAMES[runtime]
    return PathSteps("beside", runtime, (*HEAD, "beside", "benchmark", "switch_traffic"), (
        ("stop_old", f"beside: the old {what} is stopped by \"Move traffic to the new server\", after "
                     "the new one serves"),
        ("start_new", f"beside: the new {what} starts in \"Start the new server beside the old one\", "
                      "on other GPUs and another port"),
    ))


def _restart(runtime: str) -> PathSteps:
    return PathSteps("restart", runtime, (*HEAD, "stop_old", "start_new", "benchmark"), ())


TABLE: dict[tuple[str, str], PathSteps] = {
    (path, runtime): build(runtime)
    for runtime in RUNTIMES
    for path, build in (("in-place", _in_place), ("beside", _beside), ("restart", _restart))
}


def row(path: str | None, runtime: str) -> PathSteps:
    """The table's row; no path chosen (nothing planned) is the plain restart."""
    return TABLE[(path if path in PATHS else "restart", runtime if runtime in RUNTIMES else "systemd")]


def steps_of(path: str | None, runtime: str, *, verify_sha: bool) -> tuple[str, ...]:
    """The steps the path runs, in order (verify only when the profile asks for it)."""
    return tuple(k for k in row(path, runtime).runs if verify_sha or k != "verify")


def skips(path: str | None, runtime: str, *, verify_sha: bool) -> tuple[tuple[str, str], ...]:
    """(step, why it is skipped) for every plan step the path does not take."""
    out = list(row(path, runtime).skipped)
    if not verify_sha:
        out.insert(0, ("verify", NOT_ASKED_VERIFY))
    return tuple(out)


__all__ = ["PATHS", "RUNTIMES", "TABLE", "PathSteps", "row", "skips", "steps_of", "NOT_ASKED_VERIFY"]
