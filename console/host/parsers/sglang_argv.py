"""Find the SGLang server in a command line and normalize its arguments to canonical flags.

Accepted launchers: `python[3] -m sglang.launch_server ARGS`, `sglang serve ARGS` (any path to
the interpreter or script), behind `env VAR=... `, `numactl ...` or `bash -c "..."`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from console.host.parsers.sglang_flags import FlagTable, builtin_table


@dataclass(frozen=True, slots=True)
class FlagValue:
    flag: str  # canonical long name
    value: str | tuple[str, ...] | bool | None
    written: str  # as the operator wrote it: "--tp 4", "--speculative-algo=NEXTN"


@dataclass(frozen=True, slots=True)
class ArgvProblem:
    severity: str  # "error" or "warning"
    option: str
    message: str


@dataclass(frozen=True, slots=True)
class SglangCommand:
    launcher: tuple[str, ...]  # argv before the server's own arguments
    argv: tuple[str, ...]  # the server's own arguments, as written
    flags: dict[str, FlagValue] = field(default_factory=dict)
    problems: tuple[ArgvProblem, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # VAR=value given through `env` on the command line

    def value(self, flag: str) -> str | tuple[str, ...] | bool | None:
        fv = self.flags.get(flag)
        return None if fv is None else fv.value


class NotSglang(ValueError):
    """The command line does not start an SGLang server."""


def _split_launcher(argv: list[str]) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    env: list[tuple[str, str]] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        base = word.rsplit("/", 1)[-1]
        if base in ("bash", "sh", "zsh") and i + 2 < len(argv) + 1 and "-c" in argv[i + 1:i + 3]:
            inner = argv[argv.index("-c", i) + 1] if argv.index("-c", i) + 1 < len(argv) else ""
            launcher, rest, inner_env = _split_launcher(shlex.split(inner.replace("\\\n", " ")))
            return argv[: i] + launcher, rest, env + inner_env
        if base == "env":
            i += 1
            while i < len(argv) and ("=" in argv[i] and not argv[i].startswith("-") or argv[i] in ("-i", "-u")):
                if "=" in argv[i]:
                    k, v = argv[i].split("=", 1)
                    env.append((k, v))
                i += 1
            continue
        if base.startswith("python") and "-m" in argv[i + 1:i + 4]:
            m = argv.index("-m", i)
            if m + 1 < len(argv) and argv[m + 1] in ("sglang.launch_server", "sglang.srt.server"):
                return argv[: m + 2], argv[m + 2:], env
        if base == "sglang" and i + 1 < len(argv) and argv[i + 1] == "serve":
            return argv[: i + 2], argv[i + 2:], env
        if base == "launch_server.py" or word.endswith("sglang/launch_server.py"):
            return argv[: i + 1], argv[i + 1:], env
        i += 1
    raise NotSglang("no `python -m sglang.launch_server` or `sglang serve` in the command line")


def normalize(argv: list[str] | tuple[str, ...], table: FlagTable | None = None) -> SglangCommand:
    """Canonical flags from a whole command line. Order does not matter; the last value wins, as in argparse."""
    table = table or builtin_table()
    launcher, args, env = _split_launcher(list(argv))
    flags: dict[str, FlagValue] = {}
    problems: list[ArgvProblem] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if not word.startswith("--"):
            problems.append(ArgvProblem("error", word, f"unexpected argument {word!r} (SGLang takes only --flags)"))
            continue
        option, eq, inline = word.partition("=")
        found = table.lookup(option)
        if found.spec is None:
            gone = table.removed_in(option)
            if found.error and found.error.startswith("ambiguous"):
                message = f"{found.error} (SGLang {table.version} refuses to start)"
                if gone:
                    message += f"; it was a flag of its own in SGLang {gone}"
            elif gone:
                message = f"{option} existed in SGLang {gone} but not in {table.version}: the server will not start"
            else:
                message = f"unknown flag for SGLang {table.version}: the server will not start"
            problems.append(ArgvProblem("error", option, message))
            # Skip what looks like its value, so one bad flag does not misread the rest.
            while not eq and i < len(args) and not args[i].startswith("--"):
                i += 1
            continue
        spec = found.spec
        abbreviated = option != spec.flag and option not in spec.aliases and not found.negated
        value: str | tuple[str, ...] | bool | None
        if not spec.takes_value:
            value = not found.negated
            written = option
            if eq:
                problems.append(ArgvProblem("error", option, f"{spec.flag} takes no value, got {inline!r}"))
        elif eq:
            value, written = inline, word
        elif spec.nargs in ("+", "*"):
            vals = []
            while i < len(args) and not args[i].startswith("--"):
                vals.append(args[i])
                i += 1
            value, written = tuple(vals), " ".join([option, *vals])
            if spec.nargs == "+" and not vals:
                problems.append(ArgvProblem("error", option, f"{spec.flag} needs at least one value"))
        elif i < len(args) and (not args[i].startswith("--") or spec.nargs == "?"):
            value, written = args[i], f"{option} {args[i]}"
            i += 1
        elif spec.nargs == "?":
            value, written = None, option
        else:
            problems.append(ArgvProblem("error", option, f"{spec.flag} needs a value"))
            continue
        if spec.choices and isinstance(value, str) and value not in spec.choices:
            shown = ", ".join(spec.choices[:8]) + (" …" if len(spec.choices) > 8 else "")
            problems.append(ArgvProblem("error", option, f"{value!r} is not one of {spec.flag}'s choices ({shown})"))
        if abbreviated:
            problems.append(ArgvProblem("info", option, f"{option} is an abbreviation of {spec.flag}"))
        if spec.deprecated:
            problems.append(ArgvProblem("warning", option, f"{spec.flag} is deprecated in SGLang {table.version}: "
                                                           f"{spec.help or 'see --help'}"))
        if spec.flag in flags:
            problems.append(ArgvProblem("warning", option, f"{spec.flag} is given twice; the last value wins"))
        flags[spec.flag] = FlagValue(spec.flag, value, written)
    return SglangCommand(tuple(launcher), tuple(args), flags, tuple(problems), tuple(env))
