"""The simulated host's command-line tools, installed as small scripts on the sandbox PATH.

Each reads the scenario state ($GPUSIM_ROOT/.sim/state.json) and answers like the real tool.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import hashlib
import json
import os
import sys
import time
from pathlib import Path

from console.demo.hostsim.simstate import TOOLS, install_pylib, load_state, scenario_time  # noqa: F401 (the tools' names)
from console.demo.hostsim.simstate import root as _root


def _du_apparent(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def _hostname(args: list[str]) -> int:
    print(load_state()["hostname"])
    return 0


def _df(args: list[str]) -> int:
    """`df -P -B1 PATH...` with the simulated disks; the bytes of sparse files count as used."""
    state = load_state()
    root = _root()
    paths = [a for a in args if not a.startswith("-")] or ["/"]
    disks: dict[str, list[int]] = state["disks"]
    print("Filesystem     1-blocks         Used    Available Capacity Mounted on")
    status = 0
    for raw in paths:
        p = Path(raw)
        try:
            rel = "/" + str(p.resolve().relative_to(root)) if p.resolve() != root else "/"
        except ValueError:
            rel = "/"
        if not p.exists():
            print(f"df: {raw}: No such file or directory", file=sys.stderr)
            status = 1
            continue
        mount = max((m for m in disks if rel == m or rel.startswith(m.rstrip("/") + "/")), key=len)
        size, base_used = disks[mount]
        ours = _du_apparent(root / mount.lstrip("/")) if mount != "/" else 0
        used = min(size, base_used + ours)
        avail = size - used
        dev = "/dev/nvme0n1p" + str(sorted(disks).index(mount) + 1)
        mounted = f"{root}{mount if mount != '/' else ''}"
        print(f"{dev:<14} {size:>12} {used:>12} {avail:>12} {used * 100 // size:>7}% {mounted}")
    return status


def _nvidia_smi(args: list[str]) -> int:
    from console.demo.hostsim import fake_nvidia_smi

    def out(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    return fake_nvidia_smi.main(args, scenario_time(), out)


def _units() -> dict[str, dict[str, object]]:
    path = _root() / ".sim" / "units.json"
    try:
        data: dict[str, dict[str, object]] = json.loads(path.read_text())
        return data
    except (OSError, ValueError):
        return {}


def _unit_file(name: str) -> Path:
    return _root() / "etc" / "systemd" / "system" / name


SHOW_ORDER = ("MainPID", "Result", "NRestarts", "ExecMainStartTimestamp", "ExecMainCode", "ExecMainStatus",
              "Id", "LoadState", "ActiveState", "SubState", "FragmentPath")


def _systemctl(args: list[str]) -> int:
    """The subset of systemctl the console uses, answering like systemd 252."""
    if "--version" in args:
        print("systemd 252 (252.38-1~deb12u1)\n+PAM +AUDIT +SELINUX +APPARMOR +IMA +SMACK +SECCOMP +GCRYPT")
        return 0
    props: list[str] = []
    words: list[str] = []
    skip = False
    for i, a in enumerate(args):
        if skip:
            skip = False
        elif a == "-p" and i + 1 < len(args):
            props += args[i + 1].split(",")
            skip = True
        elif a.startswith("--property="):
            props += a.split("=", 1)[1].split(",")
        elif not a.startswith("-"):
            words.append(a)
    if not words:
        print("systemctl: simulated: give a command", file=sys.stderr)
        return 1
    cmd, names = words[0], [n if "." in n else n + ".service" for n in words[1:]]
    units = _units()
    from console.demo.hostsim import drive

    if drive.is_driven():
        handled = drive.systemctl(cmd, names, scenario_time(), _unit_file)
        if handled is not None:
            return handled
        for n in names:  # transient units (systemd-run) answer show/is-active too
            transient = drive.transient_state(n)
            if transient is not None:
                units[n] = transient
    if cmd == "cat":
        status = 0
        for n in names:
            f = _unit_file(n)
            if not f.exists():
                print(f"No files found for {n}.", file=sys.stderr)
                status = 1
                continue
            # Each file verbatim, one blank line between two (tests/data/real/systemd_systemctl.json).
            text = f.read_text()
            sys.stdout.write(f"# {f}\n{text}" + ("" if text.endswith("\n") else "\n"))
            dropins = f.with_name(n + ".d")
            for d in sorted(dropins.glob("*.conf")) if dropins.is_dir() else []:
                text = d.read_text()
                sys.stdout.write(f"\n# {d}\n{text}" + ("" if text.endswith("\n") else "\n"))
        return status
    if cmd == "show":
        for i, n in enumerate(names):
            if i:
                print()
            u = units.get(n, {})
            exists = _unit_file(n).exists() or n in units

            # Local time, labelled with the local zone's name, as systemd prints it (not always "UTC").
            since = dt.datetime.fromtimestamp(float(u.get("since", 0) or 0)).astimezone().strftime(
                "%a %Y-%m-%d %H:%M:%S %Z")
            values = {
                "Id": n, "LoadState": "loaded" if exists else "not-found",
                "ActiveState": u.get("active", "inactive"), "SubState": u.get("sub", "dead"),
                "MainPID": u.get("pid", 0), "ExecMainStartTimestamp": since if u.get("pid") else "",
                "FragmentPath": str(_unit_file(n)) if exists else "",
                # Always valued on systemd 252 (research/real_daemons.md)
                "Result": "exit-code" if u.get("active") == "failed" else "success",
                "NRestarts": u.get("restarts", 0),
                "ExecMainStatus": 1 if u.get("active") == "failed" else 0,
            }
            # systemd answers in its own order (the Service interface's, then the Unit's), not the
            # asked one (tests/data/real/systemd_systemctl.json); properties it does not know last.
            asked = props or list(values)
            asked = sorted(asked, key=lambda k: SHOW_ORDER.index(k) if k in SHOW_ORDER else len(SHOW_ORDER))
            for key in asked:
                # A property asked for by name is printed even when empty (`Prop=`), as systemctl does;
                # one this simulation does not model is such an empty one.
                value = values.get(key, "")
                print(value if "--value" in args else f"{key}={value}")
        return 0
    if cmd in ("start", "stop", "restart") and any(not _unit_file(n).exists() and n not in units for n in names):
        n = next(n for n in names if not _unit_file(n).exists() and n not in units)
        why = "not loaded" if cmd == "stop" else "not found"  # systemd 252's words (rc 5)
        print(f"Failed to {cmd} {n}: Unit {n} {why}.", file=sys.stderr)
        return 5
    if cmd == "is-active":
        # One line per unit (none with -q/--quiet); 0 when at least one is active, else 3 (systemctl.c).
        quiet = "-q" in args or "--quiet" in args
        status = 3
        for n in names or []:
            state = units.get(n, {}).get("active", "inactive")
            if not quiet:
                print(state)
            if state in ("active", "reloading"):
                status = 0
        return status
    if cmd in ("list-unit-files", "list-units"):
        patterns = words[1:] or ["*"]
        for f in sorted((_root() / "etc" / "systemd" / "system").glob("*.service")):
            if any(fnmatch.fnmatch(f.name, p) for p in patterns):
                u = units.get(f.name, {})
                if cmd == "list-unit-files":
                    print(f"{f.name} disabled enabled")
                else:
                    print(f"{f.name} loaded {u.get('active', 'inactive')} {u.get('sub', 'dead')} SGLang")
        return 0
    print(f"systemctl: simulated: unsupported command {cmd}", file=sys.stderr)
    return 1


def _sha256sum(args: list[str]) -> int:
    """Hashing 250 GB of sparse shards takes minutes: for the simulated repo's LFS files, the Hub's
    digest when the file has exactly the Hub's size (so a truncated shard still fails), otherwise
    (and for every other file) the real sha256 of the content."""
    lfs: dict[str, list[object]] = {}
    lfs_file = _root() / ".sim" / "lfs.json"
    if lfs_file.exists():
        lfs = json.loads(lfs_file.read_text())
    speed = float(load_state().get("speed", 1.0))
    status = 0
    for name in [a for a in args if a != "--"]:
        path = Path(name)
        try:
            size = path.stat().st_size
        except OSError as exc:
            print(f"sha256sum: {name}: {exc.strerror}", file=sys.stderr)
            status = 1
            continue
        known = lfs.get(path.name)
        if known and size == known[0]:
            time.sleep(size / 20e9 / speed)  # time-compressed, like the rest of the story
            digest = str(known[1])
        else:
            h = hashlib.sha256()
            with open(path, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            digest = h.hexdigest()
        print(f"{digest}  {name}", flush=True)
    return status


def _journalctl(args: list[str]) -> int:
    from console.demo.hostsim import fake_journalctl

    return fake_journalctl.main(args)


def _systemd_run(args: list[str]) -> int:
    from console.demo.hostsim import drive

    return drive.systemd_run(args)


def _hf(args: list[str]) -> int:
    from console.demo.hostsim import drive

    return drive.hf(args)


def _docker(args: list[str]) -> int:
    from console.demo.hostsim import fake_docker

    return fake_docker.main(args)


def main(name: str, args: list[str]) -> int:
    try:
        handler = {"hostname": _hostname, "df": _df, "nvidia-smi": _nvidia_smi, "systemctl": _systemctl,
                   "journalctl": _journalctl, "sha256sum": _sha256sum, "systemd-run": _systemd_run,
                   "hf": _hf, "docker": _docker}[name]
        return handler(args)
    except BrokenPipeError:
        return 141
    except KeyboardInterrupt:
        return 130
