"""systemd unit files as `systemctl cat` prints them (the unit, then its drop-ins), or one file.

Handled as systemd does: sections, comments (# ;), backslash line continuations, repeated keys,
an empty `ExecStart=` resetting the list (drop-ins), ExecStart prefixes (`-`, `@`, `+`, `!`,
`!!`, `:`), systemd's quoting (double and single quotes, backslash escapes), `Environment=`
with several quoted assignments, and `EnvironmentFile=` (with `-` for optional). Specifiers
(`%i`) and `$VAR` references are left as written.

Every other directive is kept too (`Unit.directives`: section, key, the values in effect after the
drop-ins), so a diff can compare the whole unit: `User=`, `Restart=`, `Limit*=`, `ExecStartPre=`...
List-valued directives keep every value and reset on an empty assignment, as systemd does; the
others keep the last value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from console.host.parsers import ParseError

_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "s": " ", "a": "\a", "b": "\b",
            "f": "\f", "r": "\r", "v": "\v"}


@dataclass(frozen=True, slots=True)
class ExecCommand:
    argv: tuple[str, ...]
    prefixes: str  # "-", "@", "+", "!", "!!", ":" as written
    line_no: int


@dataclass(frozen=True, slots=True)
class Unit:
    name: str
    sources: tuple[str, ...]  # the files `systemctl cat` showed, in order
    description: str | None
    exec_start: tuple[ExecCommand, ...]
    environment: tuple[tuple[str, str], ...]
    environment_files: tuple[tuple[str, bool], ...]  # (path, optional)
    working_directory: str | None
    user: str | None
    problems: tuple[str, ...] = field(default_factory=tuple)
    # (section, key, values in effect), in the order first set; ExecStart=/Environment= included as written.
    directives: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    @property
    def dropins(self) -> tuple[str, ...]:
        """The drop-in files `systemctl cat` showed after the unit file (`*.service.d/*.conf`)."""
        return tuple(src for src in self.sources[1:] if src.endswith(".conf"))

    def directive(self, key: str, section: str = "Service") -> tuple[str, ...]:
        return next((values for sec, k, values in self.directives if sec == section and k == key), ())

    @property
    def main_command(self) -> ExecCommand | None:
        return self.exec_start[-1] if self.exec_start else None


# Directives whose assignments add to a list (an empty one resets it); every other keeps its last value.
LIST_DIRECTIVES = frozenset({
    "ExecStart", "ExecStartPre", "ExecStartPost", "ExecStop", "ExecStopPost", "ExecReload", "ExecCondition",
    "Environment", "EnvironmentFile", "PassEnvironment", "UnsetEnvironment", "After", "Before", "Wants",
    "Requires", "Requisite", "BindsTo", "PartOf", "Upholds", "Conflicts", "OnFailure", "OnSuccess",
    "WantedBy", "RequiredBy", "UpheldBy", "Also", "Alias", "ReadWritePaths", "ReadOnlyPaths",
    "InaccessiblePaths", "BindPaths", "BindReadOnlyPaths", "DeviceAllow", "SupplementaryGroups",
    "CapabilityBoundingSet", "AmbientCapabilities", "SystemCallFilter", "RestrictAddressFamilies",
    "LoadCredential", "SetCredential", "ConditionPathExists", "AssertPathExists", "ConditionPathIsDirectory",
})


def split_systemd_words(text: str, line_no: int = 0) -> list[str]:
    """systemd's word splitting for ExecStart= and Environment= (quotes, escapes)."""
    words: list[str] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t":
            i += 1
        if i >= n:
            break
        word: list[str] = []
        quote: str | None = None
        if text[i] in "\"'":
            quote = text[i]
            i += 1
        while i < n:
            c = text[i]
            if quote is not None and c == quote:
                i += 1
                quote = None
                if i < n and text[i] not in " \t":
                    # systemd wants whitespace after a closing quote; keep going like a shell would
                    continue
                break
            if quote is None and c in " \t":
                break
            if c == "\\" and i + 1 < n:
                nxt = text[i + 1]
                if nxt in _ESCAPES:
                    word.append(_ESCAPES[nxt])
                    i += 2
                    continue
                if nxt == "x" and i + 3 < n + 1:
                    try:
                        word.append(chr(int(text[i + 2:i + 4], 16)))
                        i += 4
                        continue
                    except ValueError:
                        pass
                word.append(nxt)
                i += 2
                continue
            if quote is None and c in "\"'" and not word:
                quote = c
                i += 1
                continue
            word.append(c)
            i += 1
        if quote is not None:
            raise ParseError(f"unbalanced {quote} quote", line_no=line_no)
        words.append("".join(word))
    return words


def _logical_lines(text: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    start = 0
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not buf:
            start = no
            stripped = line.lstrip()
            if stripped.startswith(("#", ";")):
                out.append((no, stripped))  # comments end at their line, even with a trailing \\
                continue
        if line.endswith("\\"):
            buf.append(line[:-1] + " ")
            continue
        buf.append(line)
        out.append((start, "".join(buf)))
        buf = []
    if buf:
        out.append((start, "".join(buf)))
    return out


def _source_header(stripped: str) -> str | None:
    """The file a `systemctl cat` header line ("# /path/to/file") names, or None for a comment."""
    if stripped.startswith("# /") and (stripped.endswith((".service", ".conf")) or "/" in stripped[2:]):
        return stripped[2:].strip()
    return None


def parse_unit(text: str, name: str = "unit") -> Unit:
    if "\x00" in text:
        raise ParseError(f"{name}: binary content, not a unit file")
    section = None
    sources: list[str] = []
    exec_start: list[ExecCommand] = []
    env: dict[str, str] = {}
    env_files: list[tuple[str, bool]] = []
    description = working_dir = user = None
    problems: list[str] = []
    settings: dict[tuple[str, str], list[str]] = {}
    saw_section = False
    header_at = 0  # the line of the file's "# /path" header in `systemctl cat` output (0: none)

    def where(line_no: int) -> str:
        # The line as systemd names it ("FILE:27: Missing '='"): counted in the file, not in the
        # `systemctl cat` output whose "# /path" header comes before it.
        return f"{sources[-1]}:{line_no - header_at}" if sources else f"line {line_no}"

    for line_no, line in _logical_lines(text):
        s = line.strip()
        if not s:
            continue
        if s.startswith(("#", ";")):
            # `systemctl cat` prefixes each file with "# /path/to/file".
            if (src := _source_header(s)) is not None:
                sources.append(src)
                header_at = line_no
            continue
        if s.startswith("[") and s.endswith("]"):
            section = s[1:-1]
            saw_section = True
            continue
        if "=" not in s:
            problems.append(f"{where(line_no)}: not a key=value line, systemd ignores it: {s[:80]!r}")
            continue
        key, value = (part.strip() for part in s.split("=", 1))
        values = settings.setdefault((section or "", key), [])
        if not value:
            values.clear()  # an empty assignment resets the directive to its default (drop-ins)
        elif key in LIST_DIRECTIVES:
            values.append(value)
        else:
            values[:] = [value]
        if section == "Unit" and key == "Description":
            description = value
        elif section == "Service":
            if key == "ExecStart":
                if not value:
                    exec_start.clear()  # an empty assignment resets the list (drop-ins)
                    continue
                prefixes = ""
                while value and value[0] in "-@+!:":
                    prefixes += value[0]
                    value = value[1:]
                try:
                    argv = split_systemd_words(value, line_no)
                except ParseError as exc:
                    problems.append(f"ExecStart: {exc}")
                    continue
                if "@" in prefixes and len(argv) > 1:
                    argv = [argv[0], *argv[2:]]  # @: the second word is argv[0], not an argument
                exec_start.append(ExecCommand(tuple(argv), prefixes, line_no))
            elif key == "Environment":
                if not value:
                    env.clear()
                    continue
                try:
                    for assignment in split_systemd_words(value, line_no):
                        if "=" in assignment:
                            k, v = assignment.split("=", 1)
                            env[k] = v
                        else:
                            problems.append(f"{where(line_no)}: Environment entry without '=': {assignment!r}")
                except ParseError as exc:
                    problems.append(f"Environment: {exc}")
            elif key == "EnvironmentFile":
                if not value:
                    env_files.clear()
                else:
                    env_files.append((value.lstrip("-"), value.startswith("-")))
            elif key == "WorkingDirectory":
                working_dir = value
            elif key == "User":
                user = value
    if not saw_section:
        raise ParseError(f"{name}: not a unit file (no [Section] header)")
    if not exec_start:
        problems.append(f"{name}: no ExecStart= in [Service]")
    directives = tuple((sec, key, tuple(values)) for (sec, key), values in settings.items() if values)
    return Unit(name, tuple(sources), description, tuple(exec_start), tuple(env.items()), tuple(env_files),
                working_dir, user, tuple(problems), directives)


def parse_env_file(text: str) -> dict[str, str]:
    """An EnvironmentFile: KEY=VALUE lines, # comments, optional quotes."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith(("#", ";")) or "=" not in s:
            continue
        k, v = s.split("=", 1)
        v = v.strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
            v = v[1:-1]
        out[k.strip().removeprefix("export ").strip()] = v
    return out


# -- the unit's state, as `systemctl show` says it ---------------------------------------------

def parse_show(text: str) -> dict[str, str]:
    """`systemctl show -p A,B` output (KEY=value lines, in systemd's order, not the asked one)."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def unit_is_failing(show: Mapping[str, str], before: Mapping[str, str] | None = None) -> str | None:
    """Why the unit is failing, in systemd's words, or None. One rule for every step a unit's state
    decides (measured on systemd 252, tests/data/real/systemd_states.json):

    - `failed`: final (`failed (Result=exit-code)`);
    - `activating` / `auto-restart`: its process died and `Restart=` will start it again after
      `RestartSec` — it is never `failed`, `is-active` says `activating` (rc 3), and each restart
      takes the GPUs back: `activating (auto-restart), restart 3`;
    - a growing `NRestarts` against `before` (a reading of the same unit earlier): it died and was
      restarted between the two readings, even if it is starting again now;
    - `ExecMainStatus=203` is systemd's EXEC failure: the ExecStart binary is missing or not
      executable (a `Type=simple` start still returned 0).
    """
    active, sub = show.get("ActiveState", ""), show.get("SubState", "")
    restarts = show.get("NRestarts", "")
    exec_203 = show.get("ExecMainStatus") == "203"
    cause = " — the ExecStart binary is missing or not executable (203/EXEC)" if exec_203 else ""
    if active == "failed":
        result = show.get("Result")
        return f"failed (Result={result})" + cause if result and result != "success" else "failed" + cause
    if sub == "auto-restart":
        counted = f", restart {restarts}" if restarts.isdigit() and int(restarts) > 0 else ""
        return f"{active or 'activating'} (auto-restart){counted}" + cause
    if before is not None:
        was = before.get("NRestarts", "")
        if restarts.isdigit() and was.isdigit() and int(restarts) > int(was):
            return f"{active} ({sub}), restart {restarts}: it died and systemd restarted it" + cause
    return None


# -- PID 1's own lines about a unit (`journalctl -u UNIT` includes them) ----------------------

# What systemd says at a daemon-reload of a directive it does not know (the unit still loads, the
# line is dropped): 252's words (tests/data/real/systemd_syntax_error.json), newer systemd's ("key
# name", the section in quotes) and older systemd's ("lvalue").
_IGNORED_KEY = re.compile(r"^(?P<file>/\S{1,400}):(?P<line>\d{1,7}): Unknown (?:key(?: name)?|lvalue) "
                          r"'(?P<key>[^'\s]{1,80})' in section [\[']?(?P<section>[^\]'\s]{1,80})[\]']?, "
                          r"ignoring\.?$")
_IGNORED_SECTION = re.compile(r"^(?P<file>/\S{1,400}):(?P<line>\d{1,7}): Unknown section "
                              r"'(?P<section>[^'\s]{1,80})'\. Ignoring\.?$")


def _lines_by_file(unit_text: str) -> dict[tuple[str, int], str]:
    """Each logical line of `systemctl cat` output by (file, its line in that file), stripped."""
    out: dict[tuple[str, int], str] = {}
    source, header_at = None, 0
    for line_no, line in _logical_lines(unit_text):
        s = line.strip()
        if (src := _source_header(s)) is not None:
            source, header_at = src, line_no
        elif source is not None and s:
            out[(source, line_no - header_at)] = s
    return out


def _section_at(lines: dict[tuple[str, int], str], source: str, line: int) -> str | None:
    for no in range(line, 0, -1):
        s = lines.get((source, no), "")
        if s.startswith("[") and s.endswith("]"):
            return s[1:-1]
    return None


def ignored_directives(journal: str, unit_text: str) -> tuple[str, ...]:
    """What PID 1 said it ignores in a unit (its journal's lines, `journalctl _PID=1 UNIT=… -o cat`),
    as one warning each, kept only while the unit's files as read now (`unit_text`, `systemctl cat`
    output) still hold that key (or section) at that line: a line fixed since is no warning. systemd
    says it at each reload: said once."""
    lines = _lines_by_file(unit_text)
    out: dict[str, None] = {}
    for raw in journal.splitlines():
        said = raw.strip()
        if m := _IGNORED_KEY.match(said):
            where, no = m["file"], int(m["line"])
            held = lines.get((where, no), "")
            if held.split("=", 1)[0].strip() == m["key"] and "=" in held \
                    and _section_at(lines, where, no) == m["section"]:
                out[f"{where}:{no}: systemd ignores {m['key']}=: its journal says it does not know that key in "
                    f"[{m['section']}]"] = None
        elif m := _IGNORED_SECTION.match(said):
            where, no = m["file"], int(m["line"])
            if lines.get((where, no)) == f"[{m['section']}]":
                out[f"{where}:{no}: systemd ignores the whole [{m['section']}] section: its journal says it "
                    "does not know that section"] = None
    return tuple(out)

@dataclass(frozen=True, slots=True)
class UnitTransition:
    """A line systemd (PID 1, `_SYSTEMD_UNIT=init.scope`) logged about a unit: a fact of its life,
    not a line of the server's log. `kind`: starting, started, stopping, stopped, deactivated,
    exited (the main process ended: `code`, `status`), failed (`result`), restart-scheduled
    (`restart_counter`), exec-failed (the ExecStart binary could not be run), consumed,
    start-limit (restarted too often: systemd gave up), failed-to-start."""

    kind: str
    unit: str | None
    message: str
    code: str | None = None  # "exited", "killed", "dumped"
    status: str | None = None  # "1/FAILURE", "203/EXEC", "9/KILL"
    result: str | None = None  # "exit-code", "signal", "oom-kill", "timeout"
    restart_counter: int | None = None

    @property
    def failing(self) -> bool:
        """The unit's process ended badly (or could not start): an operator's error line."""
        if self.kind in ("failed", "exec-failed", "restart-scheduled", "start-limit", "failed-to-start"):
            return True
        return self.kind == "exited" and self.status is not None and not self.status.startswith("0/")


_PID1 = (
    ("exited", re.compile(r"^(?P<unit>[^\s:]+): Main process exited, code=(?P<code>\w+), status=(?P<status>\S+)$")),
    ("failed", re.compile(r"^(?P<unit>[^\s:]+): Failed with result '(?P<result>[^']+)'\.$")),
    ("restart-scheduled", re.compile(r"^(?P<unit>[^\s:]+): Scheduled restart job, restart counter is at "
                                     r"(?P<counter>\d+)\.$")),
    ("deactivated", re.compile(r"^(?P<unit>[^\s:]+): Deactivated successfully\.$")),
    ("exec-failed", re.compile(r"^(?P<unit>[^\s:]+): (?:Failed to locate executable|Failed at step EXEC spawning"
                               r"|Unable to locate executable) .*$")),
    ("consumed", re.compile(r"^(?P<unit>[^\s:]+): Consumed .*$")),
    ("start-limit", re.compile(r"^(?P<unit>[^\s:]+): Start request repeated too quickly\.$")),
    ("failed-to-start", re.compile(r"^Failed to start (?P<unit>\S+\.service)(?: - .*|\.)?$")),
    ("starting", re.compile(r"^Starting (?P<unit>\S+\.service)(?: - .*|\.\.\.)?$")),
    ("started", re.compile(r"^Started (?P<unit>\S+\.service)(?: - .*|\.)?$")),
    ("stopping", re.compile(r"^Stopping (?P<unit>\S+\.service)(?: - .*|\.\.\.)?$")),
    ("stopped", re.compile(r"^Stopped (?P<unit>\S+\.service)(?: - .*|\.)?$")),
)


def parse_pid1_message(message: str) -> UnitTransition | None:
    """One of PID 1's lines about a unit (systemd 252's wording, recorded in
    tests/data/real/journal_pid1_lines.json), or None for any other line."""
    text = message.strip()
    for kind, pattern in _PID1:
        m = pattern.match(text)
        if m is None:
            continue
        g = m.groupdict()
        counter = g.get("counter")
        return UnitTransition(kind, g.get("unit"), text, g.get("code"), g.get("status"), g.get("result"),
                              int(counter) if counter else None)
    return None
