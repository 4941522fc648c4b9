"""A small mutation run over the modules that decide truth and safety (issue 27).

Each mutation is one deliberate one-line bug (an exact text replaced once) in a copy of the tree:
parsers of host output, download truth, the journal decoder, redaction, the swap gate, the share
roles and host-key checking. For each, the tests that should notice it run against the mutated
copy; a mutation is *killed* when they fail, *survived* when they pass. The unmutated copy runs
every selection first: a selection that fails there says nothing and stops the run.

    .venv/bin/python benchmarks/mutation.py                 # all mutations, the table and the kill rate
    .venv/bin/python benchmarks/mutation.py --only gate     # those whose id starts with "gate"
    .venv/bin/python benchmarks/mutation.py --json out.json

The tests per mutation are chosen by hand (the files that exercise the module), so the run stays
short on a shared 2-core machine; a mutation that survives is a test to write, not a tolerance.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, slots=True)
class Mutation:
    id: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]
    what: str


K = "tests/test_mutations_killed.py"
OBSERVER_BENCH = "tests/test_share.py::test_an_observers_benchmark_is_refused_by_the_core"
M = Mutation
MUTATIONS: tuple[Mutation, ...] = (
    # -- parsers -------------------------------------------------------------------------------
    M("log-percent", "console/parsers/sglang_log.py", "return float(value[:-1]) / 100", "return float(value[:-1])",
      (K, "tests/test_log.py"), "batch-line percentages not divided by 100"),
    M("log-ready", "console/parsers/sglang_log.py", 'return "ready", {}', 'return "http up", {}',
      ("tests/test_log.py",), '"fired up" no longer marks the server ready'),
    M("log-oom", "console/parsers/sglang_log.py",
      'return LogEvent("error", line, ts, ranks, "error", fields={"kind": "oom"})',
      'return LogEvent("warning", line, ts, ranks, "warning", fields={"kind": "oom"})',
      ("tests/test_log.py",), "an out-of-memory line is a warning, not an error"),
    M("smi-na", "console/parsers/nvidia_smi.py", 'value in ("", "N/A")', 'value in ("",)',
      ("tests/test_gpu.py", K), "nvidia-smi's N/A read as a value"),
    M("smi-finite", "console/parsers/nvidia_smi.py", "return number if math.isfinite(number) else None",
      "return number", ("tests/test_gpu.py", K), "inf/nan readings accepted"),
    M("unit-at-prefix", "console/parsers/systemd.py", "argv = [argv[0], *argv[2:]]", "argv = argv",
      ("tests/test_service_diff.py",), "ExecStart=@ keeps argv[0] as an argument"),
    M("unit-reset", "console/parsers/systemd.py", "exec_start.clear()  # an empty assignment",
      "pass  # an empty assignment",
      ("tests/test_service_diff.py",), "an empty ExecStart= in a drop-in no longer resets the list"),
    M("df-match", "console/parsers/host.py", "if len(disks) == len(paths):", "if len(disks) <= len(paths):",
      ("tests/test_parsers_host.py",), "df lines matched to paths when some path is missing"),
    M("header-size", "console/parsers/hf_listing.py", "8 + int(n) + int(end) if", "int(n) + int(end) if",
      (K, "tests/test_download_truth.py"), "a safetensors file's size from its header forgets the 8-byte length"),
    # -- download truth ------------------------------------------------------------------------
    M("download-header-eq", "console/analysis/download.py", "if want is None or f.size_bytes == want:",
      "if want is None or f.size_bytes <= want:", (K, "tests/test_download_truth.py", "tests/test_download.py"),
      "a truncated shard with no index and no listing passes its header check"),
    M("download-complete", "console/analysis/download.py",
      "complete = files_done == len(counted) and not problems and", "complete = files_done == len(counted) and",
      (K, "tests/test_download_truth.py", "tests/test_download.py"), "complete despite wrong sizes"),
    # -- the journal ---------------------------------------------------------------------------
    M("journal-bytes", "console/sources/log.py",
      'return bytes(b for b in message if isinstance(b, int) and 0 <= b < 256).decode("utf-8", "replace")',
      "return None", (K, "tests/test_log.py"), "journald's byte-array MESSAGE dropped"),
    # -- redaction -----------------------------------------------------------------------------
    M("redact-gate", "console/redact.py", "if _MAYBE.search(text) is None:", "if _MAYBE.search(text) is not None:",
      ("tests/test_redact.py",), "the cheap pre-check inverted: secrets pass"),
    M("redact-hf", "console/redact.py", "hf_(?!transfer\\b)[A-Za-z0-9]{6,}", "hf_(?!transfer\\b)[A-Za-z0-9]{60,}",
      ("tests/test_redact.py",), "bare hf_ tokens no longer found"),
    M("redact-argv", "console/redact.py", "            secret_next = True", "            secret_next = False",
      ("tests/test_redact.py",), "--api-key VALUE (two words) keeps VALUE"),
    M("redact-json-key", "console/redact.py",
      'secret = isinstance(k, str) and _SECRET_KEY.fullmatch(k) and not k.endswith(("tokens", "_len"))',
      "secret = False", ("tests/test_redact.py", "tests/test_secrets_everywhere.py"),
      "/server_info's secret keys not replaced"),
    # -- the gate ------------------------------------------------------------------------------
    M("gate-under", "console/swap/preflight.py", 'return path == p or path.startswith(p + "/")', "return path == p",
      ("tests/test_swap.py::test_the_gate_refuses_a_partial_download_a_leftover_fp4_flag_and_a_data_path",),
      "a path under a forbidden prefix passes"),
    M("gate-unknown", "console/swap/preflight.py", "return [c for c in checks if not c.passes]",
      "return [c for c in checks if c.ok is False]", (K,), "an unknown check no longer blocks the stop"),
    M("gate-disk", "console/swap/preflight.py", "if d.fits_on_disk is False:", "if d.fits_on_disk is None:",
      (K,), "a download that does not fit on disk passes"),
    M("gate-download", "console/swap/preflight.py",
      'return GateCheck("download", False, f"{shards}; {d.problems[0]}")',
      'return GateCheck("download", True, f"{shards}; {d.problems[0]}")', (K,),
      "a download with wrong sizes passes"),
    # -- roles ---------------------------------------------------------------------------------
    M("role-override", "console/share/protocol.py", '"swap_preview", "swap_confirm", "swap_override"}',
      '"swap_preview", "swap_confirm"}', (K,), "an observer may override a gate check"),
    M("role-bench", "console/share/protocol.py", 'DRIVER_ONLY = frozenset({"verify", "swap", "pick", "bench", ',
      'DRIVER_ONLY = frozenset({"verify", "swap", "pick", ', (OBSERVER_BENCH,), "an observer may start a benchmark"),
    M("role-check", "console/share/server.py", "if kind in p.DRIVER_ONLY and peer.role != p.ROLE_DRIVER:",
      "if kind in p.DRIVER_ONLY and peer.role not in (p.ROLE_DRIVER, p.ROLE_OBSERVER):",
      (OBSERVER_BENCH,), "the core stops checking roles"),
    # -- host keys -----------------------------------------------------------------------------
    M("hostkey-changed", "console/transport/ssh.py", "        if trusted:\n            raise HostKeyChanged(",
      "        if False:\n            raise HostKeyChanged(", ("tests/test_host_keys.py",),
      "a changed host key is treated as unknown (and recorded with --accept-new-host-key)"),
    M("hostkey-revoked", "console/transport/ssh.py",
      'if any(k.export_public_key("openssh").split()[:2] == presented for k in revoked):', "if False:",
      ("tests/test_host_keys.py",), "a @revoked key is accepted"),
    M("hostkey-port", "console/transport/ssh.py", "exact_port = port if port and port != 22 else None",
      "exact_port = None", ("tests/test_host_keys.py",), "port 22's entries trusted for any port"),
)


def copy_tree(dest: Path) -> None:
    """The working tree as git sees it (tracked and untracked, not ignored): no venv, no caches."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def run_tests(tree: Path, tests: tuple[str, ...], timeout_s: float) -> tuple[str, float, str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--no-header", *tests]
    started = time.monotonic()
    try:
        out = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - started, ""
    elapsed = time.monotonic() - started
    failed = [line for line in out.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    tail = "; ".join(failed[:3]) or (out.stdout.strip().splitlines() or [""])[-1]
    if out.returncode == 0:
        return "passed", elapsed, tail
    if out.returncode == 5:
        return "no tests", elapsed, tail
    return "failed", elapsed, tail


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="run the mutations whose id starts with this")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per test run (default 300)")
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = ap.parse_args()
    chosen = [m for m in MUTATIONS if m.id.startswith(args.only)]
    if args.list:
        for m in chosen:
            print(f"{m.id:20} {m.path:32} {m.what}")
        return 0
    with tempfile.TemporaryDirectory(prefix="gc-mutants-") as tmp:
        tree = Path(tmp)
        copy_tree(tree)
        probe = subprocess.run([sys.executable, "-c", "import console; print(console.__file__)"], cwd=tree,
                               env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True)
        if not probe.stdout.strip().startswith(str(tree)):
            print(f"the copy's console is not the one imported: {probe.stdout.strip()}", file=sys.stderr)
            return 2
        for m in chosen:  # every mutation's text must be there exactly once
            count = (tree / m.path).read_text().count(m.old)
            if count != 1:
                print(f"{m.id}: the text to mutate occurs {count} times in {m.path}", file=sys.stderr)
                return 2
        selections = sorted({m.tests for m in chosen})
        for tests in selections:
            status, secs, tail = run_tests(tree, tests, args.timeout)
            if status != "passed":  # once more: on a loaded machine a test can be flaky; twice is a stop
                print(f"baseline {' '.join(tests)}: {status} ({tail}); again", file=sys.stderr)
                status, secs, tail = run_tests(tree, tests, args.timeout)
            if status != "passed":
                print(f"baseline {' '.join(tests)}: {status} ({tail})", file=sys.stderr)
                return 2
        results = []
        for m in chosen:
            target = tree / m.path
            original = target.read_text()
            target.write_text(original.replace(m.old, m.new, 1))
            try:
                status, secs, tail = run_tests(tree, m.tests, args.timeout)
            finally:
                target.write_text(original)
            verdict = {"failed": "killed", "timeout": "killed (timeout)", "passed": "SURVIVED"}.get(status, status)
            results.append({"id": m.id, "path": m.path, "what": m.what, "tests": list(m.tests),
                            "result": verdict, "seconds": round(secs, 1)})
            print(f"{m.id:20} {verdict:17} {secs:6.1f}s  {m.what}", flush=True)
    killed = sum(1 for r in results if r["result"].startswith("killed"))
    print(f"\nkilled {killed} of {len(results)} mutations ({100 * killed / max(1, len(results)):.0f} %)")
    for r in results:
        if r["result"] == "SURVIVED":
            print(f"  survived: {r['id']} ({r['path']}): {r['what']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"killed": killed, "total": len(results), "mutations": results},
                                              indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
