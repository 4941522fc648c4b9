"""The beside server's CUDA_VISIBLE_DEVICES as systemd will apply it (issue 34, item 6).

The drafted unit gets `Environment=CUDA_VISIBLE_DEVICES=…` as the last line of its [Service]
section (a later assignment wins inside the unit), its own earlier assignments of the variable
removed whatever their form (`0,1`, `GPU-<uuid>`, `MIG-<uuid>`: the old regex left `4,5GPU-…`).
What systemd then does on top, and what the console therefore reads on the host:

- drop-ins (`NAME.service.d/*.conf`, the dash-prefix `foo-.service.d/`, `service.d/`, in every unit
  directory) are parsed after the unit file: their `Environment=` wins, an empty `Environment=`
  clears ours;
- `EnvironmentFile=` files are applied after every `Environment=`, whatever the order, so a file
  that sets the variable wins (a `-` prefix: a missing file is ignored; without it, systemd refuses
  to start the unit);
- `UnsetEnvironment=` is applied last; a command that sets the variable itself (`env`, `sh -c`)
  wins over all of it.

What the console cannot set correctly it refuses (one line, the beside path is not offered): it
never guesses. Pure: the host's files are read by the caller (console/domain/swap/fastpath.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from console.host.parsers import ParseError
from console.host.parsers.systemd import parse_unit, split_systemd_words

VAR = "CUDA_VISIBLE_DEVICES"
# Where systemd looks for units and their drop-ins, most important first (systemd.unit(5)).
UNIT_DIRS = ("/etc/systemd/system.control", "/run/systemd/system.control", "/run/systemd/transient",
             "/run/systemd/generator.early", "/etc/systemd/system", "/etc/systemd/system.attached",
             "/run/systemd/system", "/run/systemd/system.attached", "/run/systemd/generator",
             "/usr/local/lib/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system",
             "/run/systemd/generator.late")
MAX_DROPINS = 32
MAX_FILE_BYTES = 64 << 10  # a drop-in or environment file larger than this is not read (refused)
_SECTION_RE = re.compile(r"^\s*\[([^\]]*)\]\s*$")


def dropin_dir_names(unit: str) -> tuple[str, ...]:
    """The drop-in directory names systemd reads for `unit`, most specific first:
    `a-b-c.service.d`, `a-b-.service.d`, `a-.service.d` (and the template's `a@.service.d`), then
    the type's `service.d`."""
    stem, dot, kind = unit.rpartition(".")
    if not dot:
        return ()
    names = [f"{unit}.d"]
    if "@" in stem:
        names.append(f"{stem.split('@', 1)[0]}@.{kind}.d")
    parts = stem.split("-")
    for i in range(len(parts) - 1, 0, -1):
        names.append("-".join(parts[:i]) + f"-.{kind}.d")
    names.append(f"{kind}.d")
    return tuple(dict.fromkeys(names))


def dropin_dirs(unit: str, bases: Sequence[str] = UNIT_DIRS) -> tuple[str, ...]:
    return tuple(f"{base}/{name}" for name in dropin_dir_names(unit) for base in bases)


def effective_dropins(found: Sequence[str], unit: str, bases: Sequence[str] = UNIT_DIRS) -> tuple[str, ...]:
    """The drop-ins systemd applies, in its order (by file name), from the paths that exist: for one
    file name the most specific directory wins, then the most important base."""
    rank = {d: i for i, d in enumerate(dropin_dirs(unit, bases))}
    best: dict[str, tuple[int, str]] = {}
    for path in found:
        directory, _, name = path.rpartition("/")
        if directory not in rank or not name.endswith(".conf"):
            continue
        if name not in best or rank[directory] < best[name][0]:
            best[name] = (rank[directory], path)
    return tuple(best[name][1] for name in sorted(best))


def _assigns_var(line: str) -> list[str] | None:
    """The words of an `Environment=` line when one of them assigns the variable, else None."""
    key, _, value = line.strip().partition("=")
    if key.strip() != "Environment" or VAR not in value:
        return None
    try:
        words = split_systemd_words(value.strip())
    except ParseError:
        return None
    return words if any(w.split("=", 1)[0] == VAR for w in words) else None


def _quote(word: str) -> str:
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def set_visible_devices(text: str, value: str) -> str:
    """The unit text with every `Environment=` assignment of the variable removed (the other
    assignments on its line kept) and `Environment=CUDA_VISIBLE_DEVICES=value` as the last line of
    the last [Service] section. Raises ValueError when the result would not say `value`."""
    lines = text.splitlines()
    out: list[str] = []
    continued = False
    for line in lines:
        words = None if continued else _assigns_var(line)
        continued = line.rstrip().endswith("\\") and not line.lstrip().startswith(("#", ";"))
        if words is None:
            out.append(line)
            continue
        kept = [w for w in words if w.split("=", 1)[0] != VAR]
        if kept:
            out.append("Environment=" + " ".join(_quote(w) for w in kept))
    starts = [i for i, ln in enumerate(out) if _SECTION_RE.match(ln) and ln.strip() == "[Service]"]
    if not starts:
        raise ValueError("the drafted unit has no [Service] section")
    end = next((i for i in range(starts[-1] + 1, len(out)) if _SECTION_RE.match(out[i])), len(out))
    while end > starts[-1] + 1 and not out[end - 1].strip():
        end -= 1
    if end > 0 and out[end - 1].rstrip().endswith("\\") and not out[end - 1].lstrip().startswith(("#", ";")):
        raise ValueError("the drafted unit's [Service] section ends in a line continuation")
    out.insert(end, f"Environment={VAR}={value}")
    result = "\n".join(out) + ("\n" if text.endswith("\n") or not text else "")
    got = dict(parse_unit(result, "draft").environment).get(VAR)
    if got != value:
        raise ValueError(f"the drafted unit would still say {VAR}={got!r}")
    return result


def _names_var(text: str) -> bool:
    return any(VAR in line for line in text.splitlines() if not line.lstrip().startswith(("#", ";")))


def environment_file_paths(drafted: str, dropins: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """The EnvironmentFile= paths systemd reads for the unit and its drop-ins (an empty assignment
    resets the list). Raises ValueError for one the console cannot read safely."""
    merged = drafted + "".join(f"\n# {path}\n{text}\n" for path, text in dropins)
    out = []
    for path, _optional in parse_unit(merged, "beside unit").environment_files:
        if not path.startswith("/") or any(c in path for c in "*?[%") or "\n" in path:
            raise ValueError(f"EnvironmentFile={path[:120]}: a relative, wildcard or specifier path the "
                             "console cannot read")
        out.append(path)
    return tuple(dict.fromkeys(out))


def visible_devices_problem(drafted: str, dropins: Sequence[tuple[str, str]],
                            env_files: Mapping[str, str | None], value: str) -> str | None:
    """Why the server would not get `CUDA_VISIBLE_DEVICES=value`, or None.

    `drafted`: the unit text as the console installs it (set_visible_devices' result); `dropins`:
    (path, text) of the drop-ins systemd applies, in its order; `env_files`: path -> text for each
    EnvironmentFile= that was read, None for one that is not on the host (a path missing from the
    mapping could not be read)."""
    merged = drafted + "".join(f"\n# {path}\n{text}\n" for path, text in dropins)
    unit = parse_unit(merged, "beside unit")
    env = dict(unit.environment)
    if env.get(VAR) != value:
        culprit = next((p for p, t in dropins if _names_var(t) or re.search(r"^\s*Environment\s*=\s*$", t, re.M)),
                       "a drop-in")
        if VAR in env:
            return f"{culprit} sets {VAR}={env[VAR]} after the unit file (a drop-in wins)"
        return f"{culprit} clears Environment= after the unit file ({VAR} would not be set)"
    for path, optional in unit.environment_files:
        if not path.startswith("/") or any(c in path for c in "*?[%"):
            return f"EnvironmentFile={path}: a relative, wildcard or specifier path the console cannot read"
        if path not in env_files:
            return f"EnvironmentFile={path} could not be read on the host (systemd applies it after Environment=)"
        text = env_files[path]
        if text is None:
            if optional:
                continue
            return f"EnvironmentFile={path} is not on the host (systemd would refuse to start the unit)"
        if _names_var(text):
            return (f"EnvironmentFile={path} sets {VAR}, and systemd applies it after Environment= "
                    "(it would win: remove it there or use another file)")
    for values in (unit.directive("UnsetEnvironment"),):
        for word in " ".join(values).split():
            if word.split("=", 1)[0] == VAR:
                return f"UnsetEnvironment= removes {VAR} (applied last)"
    for key in ("ExecStartPre", "ExecStart"):
        if any(VAR in v for v in unit.directive(key)):
            return f"{key}= sets {VAR} in its own command (it wins over the unit's environment)"
    return None


def mig_problem(*texts: str) -> str | None:
    """The beside path places whole GPUs by index: a unit pinned to MIG instances is refused."""
    for text in texts:
        for line in text.splitlines():
            if VAR in line and "MIG-" in line and not line.lstrip().startswith(("#", ";")):
                return (f"the unit pins MIG instances ({VAR}=MIG-…): the beside path places whole GPUs and "
                        "cannot choose MIG instances")
    return None


__all__ = ["MAX_DROPINS", "MAX_FILE_BYTES", "UNIT_DIRS", "VAR", "dropin_dir_names", "dropin_dirs", "effective_dropins",
           "environment_file_paths", "mig_problem", "set_visible_devices", "visible_devices_problem"]
