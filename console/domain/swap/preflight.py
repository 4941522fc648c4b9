"""The preflight gate before the old service is stopped: pure over the host's state.

Each check is named; a failing (or undecidable) check says why. The operator can override one
check only by typing its name, and the override is recorded with who typed it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from console.core.derive.swap_observer import verification
from console.core.derive.swap_view import GateCheck
from console.domain.analysis.fit import inputs_from_command, plan_fit
from console.domain.paths import forbidden_prefix, host_named
from console.units import counted

CHECKS = ("download", "sha256", "diff", "fit", "disk", "paths", "flags")


def _under(path: str, prefix: str, real: str | None = None) -> bool:
    """The one rule the lint uses too (console/domain/paths.py): lexical and, where known, the host's realpath."""
    return forbidden_prefix(path, (prefix,), real) is not None


def check_download(state: Any) -> GateCheck:
    d = state.data("download")
    if d is None:
        return GateCheck("download", None, "no download reading yet (model directory not watched?)")
    shards = f"{d.shards_done}/{d.shards_total if d.shards_total is not None else '?'} shards"
    # Offline, the Hub's silence is no fault of the files: the listing hf download kept (or the
    # index) and every shard's own header decide, when they agree.
    problems = [p for p in d.problems if not (p.startswith("Hub: ") and d.expected_source in ("listing", "index"))]
    if problems:
        return GateCheck("download", False, f"{shards}; {problems[0]}")
    if d.partial_files:
        return GateCheck("download", False, f"{shards}, {counted(len(d.partial_files), 'file')} still partial")
    if d.complete is True:
        source = {"listing": "the listing hf download kept", "index": "the index and each shard's header",
                  "hub": "the Hub's file list"}.get(d.expected_source or "", d.expected_source or "?")
        return GateCheck("download", True, f"complete: {shards}, sizes match ({source})")
    if d.complete is None:
        return GateCheck("download", None, f"{shards}; the expected file list is unknown, so complete is unknown")
    return GateCheck("download", False, f"incomplete: {shards}, {d.bytes_done / 1e9:.1f} of "
                                        f"{(d.bytes_total or 0) / 1e9:.1f} GB")


def check_sha(state: Any, wanted: bool) -> GateCheck:
    """The same verification the Download pane's `v` and the plan's Verify step run; required only
    when the profile asks for it (a mismatch found anyway always blocks)."""
    v = verification(state)
    if not wanted:
        if v is None:
            return GateCheck("sha256", None, "not checked: the profile does not ask for it (verify_sha = false; "
                                             "v in the Download pane verifies)", required=False)
        if v.finished and not v.error and not v.mismatched:
            return GateCheck("sha256", True, f"{v.matched}/{v.total_files} files match their sha256")
        if v.mismatched:
            return GateCheck("sha256", False, f"{_differ(len(v.mismatched))}: {v.mismatched[0]}")
        what = f"verification failed: {v.error}" if v.error else \
            f"verification running: {v.done_files}/{v.total_files} files"
        return GateCheck("sha256", None, f"{what} (not required by the profile)", required=False)
    if v is None:
        return GateCheck("sha256", False, "the profile asks for sha256 verification: not run yet (v)")
    if v.error:
        return GateCheck("sha256", False, f"verification failed: {v.error}")
    if not v.finished:
        return GateCheck("sha256", False, f"verification running: {v.done_files}/{v.total_files} files")
    if v.mismatched:
        return GateCheck("sha256", False, f"{_differ(len(v.mismatched))} from {v.reference_text()}: "
                                           f"{v.mismatched[0]}")
    return GateCheck("sha256", True, f"{v.matched}/{v.total_files} files match {v.reference_text()}")


def _report(state: Any) -> Any:
    report = state.data("service")
    if report is None or report.new is None:
        return None
    return report


def check_diff(state: Any) -> GateCheck:
    report = _report(state)
    if report is None:
        return GateCheck("diff", None, "no diff of the units yet (is the new unit installed?)")
    if report.new.error:
        return GateCheck("diff", False, report.new.error)
    if report.errors:
        return GateCheck("diff", False, report.errors[0])
    errors = [lint for lint in report.lints if lint.severity == "error"]
    if errors:
        return GateCheck("diff", False, "; ".join(f"{e.flag + ': ' if e.flag else ''}{e.message}" for e in errors))
    # the diff pane's count: flags, environment and unit directives (never two figures for one diff);
    # in place on one unit, the install's change (the unit before it against the unit now)
    installed = state.swap.install_diff()
    unknown = state.swap.install_change_unknown()
    if unknown is not None:
        return GateCheck("diff", None, f"the install's change is {unknown}; no error in the lints")
    count = installed.get("count", report.change_count) if installed else report.change_count
    return GateCheck("diff", True, f"{counted(count, 'change')}, no error in the lints")


def fit_result(state: Any) -> tuple[Any, str | None]:
    """The fit planner for the new unit's flags, as the fit view computes it; (result, why not)."""
    report, gpus, download = _report(state), state.data("gpu"), state.data("download")
    if report is None or report.new.command is None:
        return None, "no new unit command yet"
    if report.model_config is None:
        return None, "no config.json in the new unit's model directory yet"
    healthy = [g for g in (gpus.gpus if gpus else ()) if g.memory_total_mib and g.lost_at_s is None]
    if not healthy:
        return None, "no GPU data yet"
    cmd = report.new.command
    weights = download.bytes_total if download is not None else None
    model = str(cmd.value("--model-path") or "model").rstrip("/").rsplit("/", 1)[-1]
    inputs = inputs_from_command(cmd, report.model_config, weights, len(healthy),
                                 min(g.memory_total_mib for g in healthy) / 1024, model)
    try:
        return plan_fit(inputs), None
    except (ValueError, KeyError, ZeroDivisionError, TypeError) as exc:
        return None, f"the fit planner could not run: {exc}"


def check_fit(state: Any) -> GateCheck:
    result, why = fit_result(state)
    if result is None:
        return GateCheck("fit", None, why or "unknown")
    if not result.fits:
        return GateCheck("fit", False, f"does not fit with the unit's flags: {result.binding_constraint}")
    return GateCheck("fit", True, f"fits: {result.max_total_tokens:,} KV tokens, "
                                  f"{result.max_running_requests} running requests ({result.binding_constraint})")


def check_disk(state: Any) -> GateCheck:
    d = state.data("download")
    if d is None or d.disk_free_bytes is None:
        return GateCheck("disk", None, "free space of the model's disk unknown")
    if d.fits_on_disk is False:
        return GateCheck("disk", False, f"only {d.disk_free_bytes / 1e9:.0f} GB free: the rest does not fit")
    return GateCheck("disk", True, f"{d.disk_free_bytes / 1e9:.0f} GB free on the model's disk")


def unit_paths(state: Any) -> list[tuple[str, str]]:
    """(flag, path) for every absolute path in the new unit's command line, and its model dir."""
    report = _report(state)
    out: list[tuple[str, str]] = []
    if report is None or report.new.command is None:
        return out
    for flag, fv in report.new.command.flags.items():
        values = fv.value if isinstance(fv.value, tuple) else (fv.value,)
        for v in values:
            if isinstance(v, str) and v.startswith("/"):
                out.append((flag, v))
    return out


def _differ(n: int) -> str:
    return f"{counted(n, 'file')} {'differs' if n == 1 else 'differ'}"


def check_paths(state: Any, forbidden: tuple[str, ...], model_dir: str | None) -> GateCheck:
    report = _report(state)
    if report is None or report.new.command is None:
        return GateCheck("paths", None, "no new unit command yet")
    paths = unit_paths(state) + ([("model_dir", model_dir)] if model_dir else [])
    real = getattr(report, "real_paths", None) or {}
    root = getattr(getattr(state, "info", None), "host_root", None)  # the words name paths as the host does
    for flag, path in paths:
        for prefix in forbidden:
            if _under(path, prefix, real.get(path)):
                return GateCheck("paths", False, host_named(f"{flag} {path} is under {prefix}, which the profile "
                                                            "forbids", root))
    under = ", ".join(forbidden) if forbidden else "a forbidden prefix (none set)"
    return GateCheck("paths", True, host_named(f"{counted(len(paths), 'path')}, none under {under}", root))


def check_flags(state: Any) -> GateCheck:
    report = _report(state)
    if report is None or report.new.command is None:
        return GateCheck("flags", None, "no new unit command yet")
    bad = [p for p in report.new.command.problems if p.severity == "error"]
    source = report.flags_source or ""
    if bad:
        return GateCheck("flags", False, f"{bad[0].option}: {bad[0].message}")
    if not source.startswith("checked against the host's SGLang"):
        return GateCheck("flags", None, f"not checked against the host's SGLang: {source}")
    return GateCheck("flags", True, source)


def evaluate(state: Any, *, forbidden: tuple[str, ...] = (), verify_sha: bool = False,
             model_dir: str | None = None, overrides: Mapping[str, str] | None = None) -> tuple[GateCheck, ...]:
    """Every check, with the overrides (check name -> who typed it) applied to failing ones."""
    checks = (check_download(state), check_sha(state, verify_sha), check_diff(state), check_fit(state),
              check_disk(state), check_paths(state, forbidden, model_dir), check_flags(state))
    overrides = overrides or {}
    return tuple(replace(c, overridden_by=overrides[c.name]) if c.ok is not True and c.name in overrides else c
                 for c in checks)


def failing(checks: tuple[GateCheck, ...]) -> list[GateCheck]:
    return [c for c in checks if not c.passes]
