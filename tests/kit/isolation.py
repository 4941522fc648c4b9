"""Every test runs with its own HOME, XDG dirs and temporary directory (issue 22 items 21-22).

`snapshot_user_dirs` lists what gpuconsole keeps in the real user's dirs, taken when the suite
starts and again when it ends: a difference fails the run (tests/conftest.py). The per-test
temporary directory is checked at teardown for the demo's caches and the simulator's sandboxes
(they hold a private key): one left behind fails the test that left it.
"""

from __future__ import annotations

import os
from pathlib import Path

XDG_DEFAULTS = {"XDG_CONFIG_HOME": ".config", "XDG_DATA_HOME": ".local/share",
                "XDG_STATE_HOME": ".local/state", "XDG_CACHE_HOME": ".cache"}
# What the product and its simulators put under the temporary directory; none may outlive a test.
LEFTOVER_PREFIXES = ("gpuconsole-demo-cache-", "gpusim-", "gpuconsole-swap-demo-", "gpuconsole-swap-tui-")


def user_dirs(env: dict[str, str] | os._Environ[str], home: Path) -> list[Path]:
    """The gpuconsole dirs of the user whose environment is `env` (as the product resolves them)."""
    out = [Path(env.get(var) or home / default) / "gpuconsole" for var, default in XDG_DEFAULTS.items()]
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime:
        out.append(Path(runtime) / "gpuconsole")
    out.append(Path(f"/tmp/gpuconsole-{os.getuid()}"))  # share's fallback without XDG_RUNTIME_DIR
    return out


def snapshot_user_dirs(dirs: list[Path]) -> dict[str, tuple[int, int]]:
    """Every file and directory under `dirs`: path -> (size, mtime in ns). Sockets count too."""
    out: dict[str, tuple[int, int]] = {}
    for top in dirs:
        if not top.exists():
            continue
        for root, subdirs, files in os.walk(top):
            for name in subdirs + files:
                p = os.path.join(root, name)
                try:
                    st = os.lstat(p)
                except OSError:
                    continue
                out[p] = (st.st_size, st.st_mtime_ns)
    return out


def describe_changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    lines = [f"added: {p}" for p in sorted(after.keys() - before.keys())]
    lines += [f"removed: {p}" for p in sorted(before.keys() - after.keys())]
    lines += [f"changed: {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    return lines


def leftovers(tmp: Path) -> list[Path]:
    if not tmp.is_dir():
        return []
    return sorted(p for p in tmp.iterdir() if p.name.startswith(LEFTOVER_PREFIXES))


def _descends_from(pid: int, root: int) -> bool:
    """Whether `pid` is `root` or one of its descendants (by the /proc parent chain)."""
    seen = 0
    while pid > 1 and seen < 256:
        if pid == root:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state: the parent
        seen += 1
    return pid == root


def outside_holders(paths: set[str], root: int) -> dict[str, str]:
    """Of `paths`, those held open by a process that is not `root` nor its descendant (a console the
    user runs beside the tests, writing its recording): path -> "pid N: its command line"."""
    out: dict[str, str] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or _descends_from(int(proc.name), root):
            continue
        try:
            fds = list((proc / "fd").iterdir())
            cmd = " ".join((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").split())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target in paths:
                out[target] = f"pid {proc.name}: {cmd[:120]}"
    return out


def _unix_listeners() -> dict[str, str]:
    """Bound Unix socket paths -> "socket:[inode]" (the kernel's table, /proc/net/unix)."""
    out: dict[str, str] = {}
    try:
        lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    except OSError:
        return out
    for line in lines:
        fields = line.split()
        if len(fields) >= 8 and fields[7].startswith("/"):
            out[fields[7]] = f"socket:[{fields[6]}]"
    return out


def _held(paths: set[str], root: int) -> dict[str, str]:
    """`outside_holders`, and a socket held by its listener (the fd names the socket's inode, not
    its path), and a file named after a held socket (`X.sock.token`, `X.sock.NAME.url`: what a
    serve writes beside its socket) said as the socket's holder's."""
    listeners = _unix_listeners()
    by_socket = {listeners[p]: p for p in paths if p in listeners}
    held = outside_holders(paths | set(by_socket), root)
    out = {p: who for p, who in held.items() if p in paths}
    out.update({by_socket[s]: who for s, who in held.items() if s in by_socket})
    sockets = [p for p in out if p in listeners]
    for p in paths - out.keys():
        owner = next((s for s in sockets if p.startswith(s + ".")), None)
        if owner is not None:
            out[p] = out[owner]
    return out


def split_changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]],
                  root: int) -> tuple[list[str], list[str]]:
    """(the changes the test run may have made, the ones a process outside it holds open, said as
    such): the guard fails only on the first (issue 35 item 12)."""
    changes = describe_changes(before, after)
    paths = {line.split(": ", 1)[1] for line in changes}
    held = _held(paths, root)
    # A directory added or changed (its mtime: an entry came or went) is theirs when everything that
    # changed beneath it is: deepest first, so that a new tree of theirs is theirs to the top.
    for d in sorted(paths - held.keys(), key=lambda p: -p.count("/")):
        beneath = [p for p in paths if p.startswith(d + "/")]
        if beneath and all(p in held for p in beneath):
            held[d] = held[beneath[0]]
    ours = [line for line in changes if line.split(": ", 1)[1] not in held]
    theirs = [f"{line} (open in {held[line.split(': ', 1)[1]]}, not a test's process)" for line in changes
              if line.split(": ", 1)[1] in held]
    return ours, theirs
