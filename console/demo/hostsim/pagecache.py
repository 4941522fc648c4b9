"""The simulated host's page cache and memory (issue 24), and the tools that see them: `fincore`,
`free` and a `dd` that counts what it reads. Stdlib only: the host's python3 runs these.

EVERY RATE HERE IS A SIMULATOR PARAMETER, NOT A MEASUREMENT OF A REAL HOST. The weights phase
of a simulated boot (and of an in-place update) takes
    cold bytes / SIM_DISK_GBPS + cached bytes / SIM_PAGECACHE_GBPS
scenario seconds, where "cached" is what this module says is in the simulated page cache.

State: $GPUSIM_ROOT/.sim/pagecache.json  {"resident": {abs_path: bytes}, "pressure": 0..1}
`pressure` is the share of cached bytes that MemAvailable loses (0: the kernel reclaims page cache,
as it does; a fault scenario sets 1 to play a host whose memory fills as the pre-warm reads).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

SIM_DISK_GBPS = float(os.environ.get("GPUSIM_DISK_GBPS", "2.1") or 2.1)  # simulator parameter
SIM_PAGECACHE_GBPS = float(os.environ.get("GPUSIM_PAGECACHE_GBPS", "12") or 12)  # simulator parameter
SIM_MEM_TOTAL = 2 * 1024**4  # a 2 TiB host (simulator parameter)
SIM_MEM_AVAILABLE = 1_700 * 1024**3  # MemAvailable with nothing cached (simulator parameter)
GB = 1e9
LABEL = "simulator parameter, not a measurement"


def _state_path(root: Path | None = None) -> Path:
    return (root or Path(os.environ["GPUSIM_ROOT"])) / ".sim" / "pagecache.json"


def load(root: Path | None = None) -> dict:
    try:
        data = json.loads(_state_path(root).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError, KeyError):
        return {}


def save(data: dict, root: Path | None = None) -> None:
    path = _state_path(root)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def resident(path: str, root: Path | None = None) -> int:
    return int(load(root).get("resident", {}).get(os.path.realpath(path), 0))


def set_resident(path: str, nbytes: int, root: Path | None = None) -> None:
    data = load(root)
    data.setdefault("resident", {})[os.path.realpath(path)] = int(max(0, nbytes))
    save(data, root)


def set_pressure(pressure: float, root: Path) -> None:
    data = load(root)
    data["pressure"] = float(pressure)
    save(data, root)


def shards(model_dir: str) -> list[Path]:
    d = Path(model_dir)
    try:
        return sorted(p for p in d.iterdir() if p.name.endswith(".safetensors") and p.is_file())
    except OSError:
        return []


def model_bytes(model_dir: str) -> tuple[int, int]:
    """(total, resident) bytes of a model directory's shards in the simulated page cache."""
    res = load().get("resident", {})
    total = cached = 0
    for p in shards(model_dir):
        size = p.stat().st_size
        total += size
        cached += min(size, int(res.get(os.path.realpath(p), 0)))
    return total, cached


def load_seconds(model_dir: str) -> tuple[float, int, int]:
    """Scenario seconds the weights phase takes for this directory now: (seconds, total, cached)."""
    total, cached = model_bytes(model_dir)
    return (total - cached) / (SIM_DISK_GBPS * GB) + cached / (SIM_PAGECACHE_GBPS * GB), total, cached


def mark_read(model_dir: str) -> None:
    """A server read every shard: the page cache now holds them all."""
    data = load()
    res = data.setdefault("resident", {})
    for p in shards(model_dir):
        res[os.path.realpath(p)] = p.stat().st_size
    save(data)


def mem_available() -> int:
    data = load()
    cached = sum(int(v) for v in data.get("resident", {}).values())
    return int(max(0, SIM_MEM_AVAILABLE - float(data.get("pressure", 0.0)) * cached))


# -- the tools --------------------------------------------------------------------------------------
def free_main(args: list[str]) -> int:
    """`free -b`: procps-ng's layout (the 7th column of Mem: is `available`)."""
    data = load()
    cached = sum(int(v) for v in data.get("resident", {}).values())
    avail = mem_available()
    used = SIM_MEM_TOTAL - SIM_MEM_AVAILABLE
    print("               total        used        free      shared  buff/cache   available")
    print(f"Mem:    {SIM_MEM_TOTAL} {used} {max(0, SIM_MEM_TOTAL - used - cached)} 0 {cached} {avail}")
    print("Swap:              0           0           0")
    return 0


def fincore_main(args: list[str]) -> int:
    """`fincore [--bytes] [--noheadings] [--output RES,SIZE,FILE] [--] FILE…` (util-linux's columns)."""
    files: list[str] = []
    raw_bytes = noheadings = False
    columns = ["RES", "PAGES", "SIZE", "FILE"]
    i, rest = 0, False
    while i < len(args):
        a = args[i]
        if rest or not a.startswith("-"):
            files.append(a)
        elif a == "--":
            rest = True
        elif a in ("-b", "--bytes"):
            raw_bytes = True
        elif a in ("-n", "--noheadings"):
            noheadings = True
        elif a in ("-o", "--output"):
            i += 1
            columns = args[i].split(",")
        else:
            print(f"fincore: unrecognized option '{a}'", file=sys.stderr)
            return 1
        i += 1
    if not noheadings:
        print(" ".join(columns))
    status = 0
    for f in files:
        try:
            size = os.stat(f).st_size
        except OSError as exc:
            print(f"fincore: failed to open: {f}: {exc.strerror}", file=sys.stderr)
            status = 1
            continue
        res = min(size, resident(f))
        vals = {"RES": str(res) if raw_bytes else f"{res / 2**30:.1f}G", "PAGES": str((res + 4095) // 4096),
                "SIZE": str(size) if raw_bytes else f"{size / 2**30:.1f}G", "FILE": f}
        print(" ".join(vals.get(c, "-") for c in columns))
    return status


def dd_main(args: list[str]) -> int:
    """`dd if=FILE of=/dev/null bs=1M skip=N count=M`: reads into the simulated page cache at the
    simulated disk's rate (scaled by the scenario speed). Anything else runs the real dd."""
    opts = dict(a.split("=", 1) for a in args if "=" in a)
    if opts.get("of") != "/dev/null" or "if" not in opts:
        os.execv("/bin/dd", ["dd", *args])
    bs = _size(opts.get("bs", "512"))
    skip, count = int(opts.get("skip", "0")), int(opts.get("count", "0") or 0)
    path = opts["if"]
    try:
        size = os.stat(path).st_size
    except OSError as exc:
        print(f"dd: failed to open '{path}': {exc.strerror}", file=sys.stderr)
        return 1
    start, end = skip * bs, min(size, (skip + count) * bs if count else size)
    have = min(size, resident(path))
    new = max(0, end - max(start, have)) if start <= have else 0
    speed = _speed()
    time.sleep(new / (SIM_DISK_GBPS * GB) / speed + (end - start - new) / (SIM_PAGECACHE_GBPS * GB) / speed)
    if start <= have:
        set_resident(path, max(have, end))
    if opts.get("status") != "none":  # dd's own summary, its rate the simulated one
        took = new / (SIM_DISK_GBPS * GB) / speed + (end - start - new) / (SIM_PAGECACHE_GBPS * GB) / speed
        n = end - start
        print(f"{n} bytes ({n / 1e9:.1f} GB, {n / 2**30:.1f} GiB) copied, {took:.5f} s, "
              f"{n / max(took, 1e-9) / 1e9:.1f} GB/s", file=sys.stderr)
    return 0


def _size(text: str) -> int:
    mult = {"K": 1024, "M": 1024**2, "G": 1024**3, "k": 1000}
    return int(text[:-1]) * mult[text[-1]] if text[-1] in mult else int(text)


def _speed() -> float:
    try:
        return float(json.loads((Path(os.environ["GPUSIM_ROOT"]) / ".sim" / "state.json").read_text())["speed"])
    except (OSError, ValueError, KeyError):
        return 1.0


TOOLS = {"fincore": "fincore_main", "free": "free_main", "dd": "dd_main"}


def install(bin_dir: Path, python: str = sys.executable) -> None:
    """Put this module's tools on the simulated host's PATH (before the real ones)."""
    for name, func in TOOLS.items():
        script = bin_dir / name
        script.write_text(f"#!{python}\nimport sys\nfrom console.demo.hostsim.pagecache import {func}\n"
                          f"raise SystemExit({func}(sys.argv[1:]))\n")
        script.chmod(0o755)
