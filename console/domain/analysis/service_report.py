"""One report for the service pane and `gpuconsole diff`: both units, their diff with reasons,
environment changes, lints on the new unit, drift of the running process, and the raw diff."""

from __future__ import annotations

import difflib
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field, replace
from typing import Any

from console.domain.analysis.service_diff import (
    REDACTED,
    SECRET_FLAG,
    EnvChange,
    FlagChange,
    HostFacts,
    Lint,
    UnitChange,
    diff_commands,
    diff_env,
    diff_units,
    drift,
    lint,
    redact_env,
    redacted_argv,
)
from console.domain.paths import host_named
from console.host.parsers import ParseError
from console.host.parsers.sglang_argv import NotSglang, SglangCommand, normalize
from console.host.parsers.sglang_flags import FlagTable, builtin_table
from console.host.parsers.shell_words import split_words
from console.host.parsers.systemd import Unit, parse_unit
from console.redact import redact_text
from console.sanitize import clean_block


@dataclass(frozen=True, slots=True)
class ServiceSide:
    """One service: a unit (from the host or a file) or a plain command line."""

    name: str
    text: str | None
    unit: Unit | None
    command: SglangCommand | None
    environment: dict[str, str] = field(default_factory=dict)
    active_state: str | None = None
    sub_state: str | None = None
    main_pid: int | None = None
    running: SglangCommand | None = None
    error: str | None = None
    # What redaction hid, as keyed digests (never shown or written): a changed secret is still a change.
    secret_fingerprints: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    # The unit's EnvironmentFile= contents as read from the host (secrets redacted): path -> variables,
    # None when the file is not there. A path not in here was not read (a local file, an error).
    env_files_read: dict[str, dict[str, str] | None] = field(default_factory=dict)
    # A container's own times, as Docker recorded them (`docker inspect -f '{{.State.StartedAt}}'` and
    # `'{{.State.FinishedAt}}'`, console/host/parsers/docker.py: docker_time): its last start, and its
    # last exit (kept while a later start runs). None: a unit, or unknown (Docker's zero time). The
    # swap's observer reads the old container's exit as the host's record of its stop.
    started_at_s: float | None = None
    finished_at_s: float | None = None


def effective_environment(side: ServiceSide) -> dict[str, str]:
    """What the server's process gets: Environment=, then the EnvironmentFile= files in order (systemd:
    a file's settings override Environment=), as far as the files were read."""
    env = dict(side.environment)
    if side.unit is not None:
        for path, _optional in side.unit.environment_files:
            env.update(side.env_files_read.get(path) or {})
    return env


_FINGERPRINT_KEY = secrets.token_bytes(32)  # per process: a digest cannot be brute-forced offline


def _fingerprint(value: object) -> str:
    return hmac.new(_FINGERPRINT_KEY, repr(value).encode(), hashlib.sha256).hexdigest()


def side_from_text(name: str, text: str, table: FlagTable | None = None) -> ServiceSide:
    """A unit file's text (has a [Section]) or a plain command line, redacted at the source: the
    side's text, argv, environment and parse warnings never hold a secret or a terminal escape
    (a local file as well as the host's: issue 21, item 1)."""
    text = clean_block(text) if "\x00" not in text else text  # binary content is refused as such
    redacted = redact_text(text)
    side = _side_from_text(name, redacted, table)
    if redacted == text:
        return side
    raw = _side_from_text(name, text, table)  # only to fingerprint what was hidden; dropped here
    fps = {f"env:{k}": _fingerprint(v) for k, v in raw.environment.items() if side.environment.get(k) != v}
    if raw.command is not None and side.command is not None:
        for flag, fv in raw.command.flags.items():
            seen = side.command.flags.get(flag)
            if seen is not None and seen.value != fv.value:
                fps[f"flag:{flag}"] = _fingerprint(fv.value)
    return replace(side, secret_fingerprints=fps)


@dataclass(frozen=True, slots=True)
class UnitBackup:
    """The unit file as it stood before the last install, as that install kept it beside the unit's
    file (`cp -p UNIT UNIT.bak-STAMP`, console/domain/swap/actions.py's install_unit): the newest
    `$(systemctl show -p FragmentPath --value UNIT).bak-*` on the host, read with a bounded read of at
    most UNIT_BACKUP_MAX_BYTES. `path` None: the host has none (the install's change is unknown)."""

    path: str | None
    stamp: str | None = None  # the install's own UTC stamp in the name (%Y%m%dT%H%M%SZ)
    text: str | None = None  # None: found but not readable (no permission, a dropped read)
    truncated: bool = False
    # What redaction hid in it, as the unit's own (keyed digests, never shown or written): compared with
    # the unit's, an unchanged secret is unchanged and a changed one changed (the redacted texts are equal)
    secret_fingerprints: dict[str, str] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class ServiceReport:
    old: ServiceSide | None
    new: ServiceSide
    changes: tuple[FlagChange, ...]
    env_changes: tuple[EnvChange, ...]
    lints: tuple[Lint, ...]
    drift: tuple[FlagChange, ...]
    drift_of: str | None  # the unit whose running process differs from its file
    raw_diff: tuple[str, ...]
    units_on_host: tuple[str, ...]
    flags_version: str
    errors: tuple[str, ...]
    flags_source: str = "built-in flag table"
    model_config: dict[str, Any] | None = None  # the new unit's model's config.json, as read from the host
    flags_binary: str | None = None  # the host interpreter run to read SGLang's flags, if any (issue 15)
    # Every other directive of the two units: EnvironmentFile=, drop-ins, User=, Restart=, limits...
    unit_changes: tuple[UnitChange, ...] = ()
    real_paths: dict[str, str] = field(default_factory=dict)  # the unit's paths by `realpath -m` on the host
    # The same two services compared the other way round, as the source read them (issue 20): what
    # `s` in the diff pane shows. None with one side only.
    other_way: OtherWay | None = None
    # In place on one unit (old and new the same unit): the backup its last install kept, read by the
    # source (console/host/sources/service.py); None where not read (two units, a recording before it).
    unit_backup: UnitBackup | None = None

    @property
    def change_count(self) -> int:
        """Flags, environment and unit directives: every difference in how the server runs."""
        return len(self.changes) + len(self.env_changes) + len(self.unit_changes)

    def flipped(self) -> ServiceReport | None:
        """This report with the sides exchanged (the old unit shown as the new), from the facts the
        source read for that side; None when there is no other side. A view's choice only: the state,
        the swap plan and every other reader keep the report's own orientation."""
        w = self.other_way
        if w is None or self.old is None:
            return None
        return replace(self, old=self.new, new=self.old, changes=w.changes, env_changes=w.env_changes,
                       lints=w.lints, drift=w.drift, drift_of=w.drift_of, raw_diff=w.raw_diff,
                       flags_version=w.flags_version, errors=w.errors, flags_source=w.flags_source,
                       model_config=w.model_config, flags_binary=w.flags_binary, unit_changes=w.unit_changes,
                       real_paths=dict(w.real_paths), other_way=None)


@dataclass(frozen=True, slots=True)
class OtherWay:
    """What a report says when its two sides are exchanged: the derived half only (the sides are the
    report's own, so a reading does not carry both units twice). Built by the source with the other
    side's own host facts (its paths, its model's config.json, its interpreter's SGLang flags), so
    which side a view shows as old is no question to the host and creates no event (issue 20)."""

    changes: tuple[FlagChange, ...] = ()
    env_changes: tuple[EnvChange, ...] = ()
    lints: tuple[Lint, ...] = ()
    drift: tuple[FlagChange, ...] = ()
    drift_of: str | None = None
    raw_diff: tuple[str, ...] = ()
    flags_version: str = ""
    errors: tuple[str, ...] = ()
    flags_source: str = ""
    model_config: dict[str, Any] | None = None
    flags_binary: str | None = None
    unit_changes: tuple[UnitChange, ...] = ()
    real_paths: dict[str, str] = field(default_factory=dict)


def with_other_way(report: ServiceReport, back: ServiceReport) -> ServiceReport:
    """`report` carrying `back` (the same two services, compared the other way round) as its other way."""
    return replace(report, other_way=OtherWay(
        back.changes, back.env_changes, back.lints, back.drift, back.drift_of, back.raw_diff, back.flags_version,
        back.errors, back.flags_source, back.model_config, back.flags_binary, back.unit_changes,
        dict(back.real_paths)))


def _side_from_text(name: str, text: str, table: FlagTable | None = None) -> ServiceSide:
    """A unit file's text (has a [Section]) or a plain command line (backslash continuations allowed)."""
    table = table or builtin_table()
    if "\x00" in text:
        return ServiceSide(name, None, None, None, error=f"{name}: binary content, not a unit or command line")
    if "[" in text and "]" in text and "=" in text and any(ln.strip().startswith("[") for ln in text.splitlines()):
        try:
            unit = parse_unit(text, name)
        except ParseError as exc:
            return ServiceSide(name, text, None, None, error=str(exc))
        env = dict(unit.environment)
        main = unit.main_command
        if main is None:
            return ServiceSide(name, text, unit, None, env, error=f"{name}: no ExecStart=")
        try:
            return ServiceSide(name, text, unit, normalize(main.argv, table), env)
        except NotSglang as exc:
            return ServiceSide(name, text, unit, None, env, error=f"{name}: {exc}")
    lines = [ln for ln in text.replace("\\\n", " ").splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    try:
        argv = split_words(" ".join(lines))  # shlex.split's rules in linear time
    except ValueError as exc:
        return ServiceSide(name, text, None, None, error=f"{name}: {exc} (unbalanced quotes?)")
    try:
        cmd = normalize(argv, table)
    except NotSglang as exc:
        return ServiceSide(name, text, None, None, error=f"{name}: not a unit file, and {exc}")
    return ServiceSide(name, text, None, cmd, dict(cmd.env))


def _secret_values(side: ServiceSide) -> set[str]:
    values = {v for k, v in side.environment.items() if v and redact_env(k, v) != v}
    if side.command is not None:
        values |= {fv.value for f, fv in side.command.flags.items()
                   if SECRET_FLAG.search(f) and isinstance(fv.value, str) and fv.value}
    return values


def _redacted_lines(side: ServiceSide) -> list[str]:
    """The unit's text with every secret value replaced: the raw diff never shows one."""
    text = side.text or ""
    for value in sorted(_secret_values(side), key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text.splitlines()


def _hidden_changes(old: ServiceSide, new: ServiceSide, changes: list[FlagChange], env_changes: list[EnvChange],
                    table: FlagTable) -> tuple[list[FlagChange], list[EnvChange]]:
    """Secrets equal after redaction but different before: a change, shown without its values."""
    a, b = old.secret_fingerprints, new.secret_fingerprints
    if not a and not b:
        return changes, env_changes
    named = {c.name for c in env_changes}
    for name in sorted(set(old.environment) & set(new.environment) - named):
        if a.get(f"env:{name}") != b.get(f"env:{name}"):
            env_changes.append(EnvChange(name, "changed", REDACTED, REDACTED))
    flagged = {c.flag for c in changes}
    if old.command is not None and new.command is not None:
        for flag in sorted(set(old.command.flags) & set(new.command.flags) - flagged):
            if a.get(f"flag:{flag}") != b.get(f"flag:{flag}"):
                spec = table.specs.get(flag)
                changes.append(FlagChange(flag, "changed", REDACTED, REDACTED, spec.category if spec else "other",
                                          "a secret changed (values not shown)"))
    return changes, env_changes


def build_report(old: ServiceSide | None, new: ServiceSide, facts: HostFacts, *,
                 table: FlagTable | None = None, units_on_host: tuple[str, ...] = (),
                 flags_source: str | None = None, flags_binary: str | None = None) -> ServiceReport:
    table = table or builtin_table()
    errors = [s.error for s in (old, new) if s is not None and s.error]
    changes: list[FlagChange] = []
    env_changes: list[EnvChange] = []
    if old is not None and old.command is not None and new.command is not None:
        changes = diff_commands(old.command, new.command, new_config=facts.model_config, table=table)
        env_changes = diff_env(effective_environment(old), effective_environment(new))
        changes, env_changes = _hidden_changes(old, new, changes, env_changes, table)
    unit_changes: list[UnitChange] = []
    if old is not None and old.unit is not None and new.unit is not None:
        unit_changes = diff_units(old.unit, new.unit, facts, old_files=old.env_files_read,
                                  new_files=new.env_files_read)
    lints = lint(new.command, facts, table) if new.command is not None else []
    if new.unit is not None:
        lints.extend(Lint("warning", None, p) for p in new.unit.problems)
        for path, optional in new.unit.environment_files:
            if not optional and (facts.paths_exist.get(path) is False or new.env_files_read.get(path, ...) is None):
                lints.append(Lint("error", "EnvironmentFile", f"{path} does not exist on the host: systemd "
                                                              "refuses to start the unit"))
    if facts.host_root:  # words name a path as the host names it (the demo's sandbox left out)
        root = facts.host_root
        lints = [replace(x, message=host_named(x.message, root)) for x in lints]
        unit_changes = [replace(u, old=host_named(u.old, root) if u.old else u.old,
                                new=host_named(u.new, root) if u.new else u.new,
                                reason=host_named(u.reason, root) if u.reason else u.reason) for u in unit_changes]
        flags_binary = host_named(flags_binary, root) if flags_binary else flags_binary
    drift_changes: list[FlagChange] = []
    drift_of = None
    for side in (new, old):
        if side is not None and side.command is not None and side.running is not None:
            d = drift(side.command, side.running, table)
            if d:
                drift_changes, drift_of = d, side.name
                break
    raw: list[str] = []
    if old is not None:
        raw = list(difflib.unified_diff(_redacted_lines(old), _redacted_lines(new),
                                        old.name, new.name, lineterm="", n=2))
    return ServiceReport(old, new, tuple(changes), tuple(env_changes), tuple(lints), tuple(drift_changes),
                         drift_of, tuple(raw), units_on_host, table.version, tuple(errors),
                         flags_source or f"built-in flag table of SGLang {table.version}", facts.model_config,
                         flags_binary, tuple(unit_changes), dict(facts.real_paths))


def install_change(before: ServiceSide, report: ServiceReport) -> ServiceReport:
    """`report` with `before` (its new unit as it stood before an install rewrote the file) as the
    old side: in place the new unit is the old one, so a reading after the install compares the file
    with itself. The new side's facts are the reading's own (its model's config.json, its paths);
    the flag table is the built-in one (the host's own table is the source's, not in a reading)."""
    facts = HostFacts(model_config=report.model_config, real_paths=dict(report.real_paths))
    return build_report(before, report.new, facts, units_on_host=report.units_on_host,
                        flags_source=report.flags_source, flags_binary=report.flags_binary)


def install_change_json(report: ServiceReport) -> dict[str, Any]:
    """The install's change as plain data (the swap state's fact, console/core/derive/swap_view.py):
    the rows a report and the gate read."""
    return {
        "changes": [{"flag": c.flag, "change": c.change, "old": c.old, "new": c.new, "category": c.category,
                     "reason": c.reason} for c in report.changes],
        "env_changes": [{"name": e.name, "change": e.change, "old": e.old, "new": e.new} for e in report.env_changes],
        "unit_changes": [{"directive": u.directive, "section": u.section, "change": u.change, "old": u.old,
                          "new": u.new, "reason": u.reason} for u in report.unit_changes],
        "raw_diff": list(report.raw_diff), "count": report.change_count,
    }


def report_json(report: ServiceReport) -> dict[str, object]:
    """`gpuconsole diff --json` (a public interface: keep the keys stable)."""
    def argv(side: ServiceSide | None) -> list[str] | None:
        if side is None or side.command is None:
            return None
        return redacted_argv(side.command)

    return {
        "old": {"name": report.old.name if report.old else None, "argv": argv(report.old)},
        "new": {"name": report.new.name, "argv": argv(report.new)},
        "changes": [{"flag": c.flag, "change": c.change, "old": c.old, "new": c.new, "category": c.category,
                     "reason": c.reason} for c in report.changes],
        "env_changes": [{"name": e.name, "change": e.change, "old": e.old, "new": e.new} for e in report.env_changes],
        "unit_changes": [{"directive": u.directive, "section": u.section, "change": u.change, "old": u.old,
                          "new": u.new, "reason": u.reason} for u in report.unit_changes],
        "lints": [{"severity": x.severity, "flag": x.flag, "message": x.message} for x in report.lints],
        "drift": {"unit": report.drift_of,
                  "changes": [{"flag": c.flag, "running": c.old, "unit": c.new} for c in report.drift]},
        "flags_version": report.flags_version,
        "flags_source": report.flags_source,
        "flags_binary": report.flags_binary,
        "errors": list(report.errors),
    }
