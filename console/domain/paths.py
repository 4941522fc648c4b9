"""One rule for "is this path under a forbidden prefix", for the gate and the lint alike.

Paths are compared after lexical normalisation (`/shared/../data/m` is `/data/m`; `//data/m` and
`/data/./m` too) and, where the host was asked, after `realpath -m` there as well (a symlink
`/shared/m -> /data/m` is under /data). Before, both passed a "no path under /data" check
(issue 21, item 14).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence

from console.host.transport.base import quote


def lexical(path: str) -> str:
    """The absolute path with `.`, `..`, repeated and trailing slashes resolved, no I/O."""
    path = re.sub(r"^/+", "/", path)  # normpath keeps a leading `//` (POSIX leaves it open)
    return posixpath.normpath(path)


def forbidden_prefix(path: str, prefixes: Sequence[str], real: str | None = None) -> str | None:
    """The first of `prefixes` that `path` (or its `real` path on the host) lies under, else None."""
    candidates = {lexical(path)}
    if real:
        candidates.add(lexical(real))
    for prefix in prefixes:
        root = lexical(prefix)
        for candidate in candidates:
            if root == "/" or candidate == root or candidate.startswith(root + "/"):
                return prefix
    return None


def host_named(text: str, root: str | None) -> str:
    """`text` with every path under `root` named as the host names it: the demo's simulated host keeps
    its files under a sandbox directory of this machine (HostProfile.host_root), so "ROOT/shared/m" is
    "/shared/m" there. `text` as it is with no root (a real host). For words only: a command keeps
    the exact path it acts on."""
    root = (root or "").rstrip("/")
    if not root or root not in text:
        return text
    return re.sub(re.escape(root) + r"(?=(/)|(?![\w.-]))", lambda m: "" if m.group(1) else "/", text)


def exists_and_real_script(paths: Sequence[str]) -> str:
    """One line per path: `1 REAL` or `0 REAL` (exists or not; `realpath -m`, symlinks resolved,
    the path itself where realpath is missing)."""
    parts = []
    for p in paths:
        q = quote(p)
        parts.append(f"if [ -e {q} ]; then __e=1; else __e=0; fi; "
                     f"echo \"$__e $(realpath -m -- {q} 2>/dev/null || printf %s {q})\"")
    return "; ".join(parts)


def parse_exists_and_real(paths: Sequence[str], text: str) -> tuple[dict[str, bool], dict[str, str]]:
    exists: dict[str, bool] = {}
    real: dict[str, str] = {}
    for p, line in zip(paths, text.splitlines(), strict=False):
        flag, _, resolved = line.partition(" ")
        if flag not in ("0", "1"):
            continue
        exists[p] = flag == "1"
        if resolved.startswith("/"):
            real[p] = resolved
    return exists, real


def real_of(real_paths: Mapping[str, str], path: str) -> str | None:
    return real_paths.get(path)
