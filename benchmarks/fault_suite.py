"""The fault and fuzz suite's figures (README "Faults and bad input", docs/fault-suite.md).

    python benchmarks/fault_suite.py            # runs the suite's tests, prints the table
    GPUCONSOLE_FAULT_DROPS=100 python benchmarks/fault_suite.py

Each test appends what it tried, what failed, what was lost or duplicated and what leaked to a
JSONL file (tests/figures.py); this script runs them and sums per test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ["tests/test_faults_sshd.py", "tests/test_host_keys.py", "tests/test_command_builders.py",
         "tests/test_secrets_everywhere.py", "tests/test_secrets_on_screen.py", "tests/test_cli_edges.py",
         "tests/test_fuzz_parsers.py", "tests/test_redact.py", "tests/test_bad_host_data.py"]


def main() -> int:
    with tempfile.TemporaryDirectory() as d:
        report = Path(d) / "figures.jsonl"
        started = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS], cwd=ROOT,
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
    for name, f in rows.items():
        tried = f.get("tried", 0)
        lines = f" ({f['lines']:,} lines)" if f.get("lines") else ""
        lost = f.get("lost", 0) + f.get("duplicated", 0)
        print(f"| {name} | {tried:,}{lines} | {f.get('failed', 0)} | {lost if 'lost' in f else '–'} | "
              f"{f.get('leaked', f.get('accepted', f.get('accepted_wrongly', '–')))} |")
    print(f"\npytest: {r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr[-300:]} "
          f"({elapsed:.0f} s, GPUCONSOLE_FAULT_DROPS={os.environ.get('GPUCONSOLE_FAULT_DROPS', '50')})")
    return r.returncode


if __name__ == "__main__":
    raise SystemExit(main())
