"""What a log line held by the state costs, beside its text (tracemalloc): 4,000 of SGLang's batch
lines from a journal, parsed as the core parses them (the parser thread, the parser process) and as
an attached console receives them (through the codec), each held in a `HostState`.

    .venv/bin/python benchmarks/log_line_cost.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.kit import log_cost  # noqa: E402


def main() -> int:
    print(f"{log_cost.LINES:,} lines held, {log_cost.PER_SECOND} a second; bytes a line (tracemalloc)")
    print(f"{'path':<24} {'held':>8} {'its text':>9} {'beyond':>8}")
    for name, make in log_cost.paths().items():
        held, text = log_cost.held_bytes_per_line(make)
        print(f"{name:<24} {held:>8.0f} {text:>9.0f} {held - text:>8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
