"""The fault and fuzz suite's figures (README "Faults and bad input", docs/fault-suite.md).

    python benchmarks/fault_suite.py            # runs the suite's tests, prints the table
    GPUCONSOLE_FAULT_DROPS=100 python benchmarks/fault_suite.py
    python benchmarks/fault_suite.py tests/hostile/test_hostile_text.py ...   # only these tests

Each test appends what it tried, what failed, what was lost or duplicated and what leaked to a
JSONL file (tests/kit/figures.py); this script runs them and sums per test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ["tests/host/test_faults_sshd.py", "tests/host/test_host_keys.py", "tests/hostile/test_command_builders.py",
         "tests/hostile/test_secrets_everywhere.py", "tests/hostile/test_secrets_on_screen.py", "tests/cli/test_cli_edges.py",
         "tests/hostile/test_fuzz_parsers.py", "tests/domain/test_redact.py", "tests/hostile/test_bad_host_data.py",
         # issue 21: hostile hosts, hostile peers
         "tests/hostile/test_hostile_text.py", "tests/hostile/test_hostile_actions.py", "tests/share/test_share_identity.py",
         "tests/hostile/test_hostile_recordings.py", "tests/hostile/test_hostile_inputs.py", "tests/fleet/test_fleet_hostile_labels.py",
         "tests/hostile/test_report_escaping.py", "tests/domain/test_paths_rule.py", "tests/share/test_share_secrets.py",
         # issue 34: containers, fast paths, identities, the Hub
         "tests/domain/test_secret_shapes.py", "tests/hostile/test_host_text_in_toasts.py",
         "tests/hostile/test_fastpath_replies.py", "tests/domain/test_endpoint_hosts.py",
         "tests/domain/test_hub_token_transport.py", "tests/host/test_docker_real_differences.py",
         # issue 34, round 3's rest: the beside GPUs and port, the Hub's answers, every flag, the new parsers fuzzed
         "tests/share/test_share_doors.py", "tests/swap/test_beside_environment_as_systemd_applies_it.py",
         "tests/swap/test_beside_port_taken_on_any_address.py", "tests/hostile/test_hub_answers_bounded.py",
         "tests/cli/test_every_flag_refuses_huge_values_in_one_line.py",
         "tests/hostile/test_fuzz_container_and_fastpath_parsers.py"]
# The property-based files: hypothesis' own count of the examples each ran (passing and failing).
FUZZ_FILES = {"tests/hostile/test_fuzz_parsers.py": "the first rounds' parsers (issues 15, 21)",
              "tests/hostile/test_fuzz_container_and_fastpath_parsers.py":
              "round 3's parsers: docker inspect/ps/compose/cgroup/state, replies, port table, unit env, docker logs"}
_EXAMPLES = re.compile(r"(\d+) passing(?: examples?| test cases?)?, (\d+) failing")
# The hostile surfaces' own figures (issue 21): a row has at least one of these.
HOSTILE_KEYS = ("escapes", "payloads", "borrowed", "memory_mib", "escaped", "held")


def main() -> int:
    with tempfile.TemporaryDirectory() as d:
        report = Path(d) / "figures.jsonl"
        started = time.monotonic()
        tests = sys.argv[1:] or TESTS
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "--hypothesis-show-statistics", *tests], cwd=ROOT,
                           env={**os.environ, "GPUCONSOLE_FAULT_REPORT": str(report)}, capture_output=True, text=True)
        elapsed = time.monotonic() - started
        rows: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for line in report.read_text().splitlines() if report.exists() else []:
            item = json.loads(line)
            name = item.pop("test")
            for key, value in item.items():
                if isinstance(value, int):
                    rows[name][key] += value
    print("| fault or bad input | tried | failed | lost | leaked |")
    print("|---|---:|---:|---:|---:|")
    hostile = {name: f for name, f in rows.items() if any(k in f for k in HOSTILE_KEYS)}
    for name, f in rows.items():
        if name in hostile:
            continue
        tried = f.get("tried", 0)
        lines = f" ({f['lines']:,} lines)" if f.get("lines") else ""
        lost = f.get("lost", 0) + f.get("duplicated", 0)
        print(f"| {name} | {tried:,}{lines} | {f.get('failed', 0)} | {lost if 'lost' in f else '–'} | "
              f"{f.get('leaked', f.get('accepted', f.get('accepted_wrongly', '–')))} |")
    if hostile:
        print("\n| hostile input (issue 21) | tried | escaped exceptions | payloads run | escape bytes "
              "reaching the terminal | identities borrowed | memory at the cap |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, f in hostile.items():
            def v(key: str, f: dict[str, int] = f) -> str:
                return str(f[key]) if key in f else "–"
            memory = f"{f['memory_mib']} MiB" if "memory_mib" in f else (f"{f['held']} held" if "held" in f else "–")
            print(f"| {name} | {f.get('tried', 0):,} | {v('escaped')} | {v('payloads')} | {v('escapes')} | "
                  f"{v('borrowed')} | {memory} |")
    fuzzed = _fuzz_counts(r.stdout)
    if fuzzed:
        print("\n| fuzzed parsers (hypothesis examples) | inputs | escaped exceptions or broken properties |")
        print("|---|---:|---:|")
        for path, (passing, failing) in fuzzed.items():
            print(f"| {FUZZ_FILES[path]} (`{path}`) | {passing + failing:,} | {failing} |")
    for line in r.stdout.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            print(line[:200])
    print(f"\npytest: {r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-300:]} "
          f"({elapsed:.0f} s, GPUCONSOLE_FAULT_DROPS={os.environ.get('GPUCONSOLE_FAULT_DROPS', '50')})")
    return r.returncode


def _fuzz_counts(out: str) -> dict[str, tuple[int, int]]:
    """Per fuzz file, (passing, failing) examples summed over its tests' statistics blocks."""
    counts: dict[str, list[int]] = {}
    current = None
    for line in out.splitlines():
        head = line.strip().rstrip(":")
        if "::" in head and not line.startswith(" "):
            current = next((f for f in FUZZ_FILES if head.startswith(f)), None)
            continue
        m = _EXAMPLES.search(line)
        if m and current is not None:
            c = counts.setdefault(current, [0, 0])
            c[0] += int(m.group(1))
            c[1] += int(m.group(2))
    return {k: (v[0], v[1]) for k, v in counts.items()}


if __name__ == "__main__":
    raise SystemExit(main())
