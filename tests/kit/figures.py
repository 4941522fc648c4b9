"""Figures for the README's fault table: with GPUCONSOLE_FAULT_REPORT=FILE, tests append one JSON
line each (what was tried, what failed, lines lost or duplicated, secrets or processes leaked).
`benchmarks/fault_suite.py` runs the suite with it set and prints the table."""

from __future__ import annotations

import json
import os


def record(name: str, **figures: object) -> None:
    path = os.environ.get("GPUCONSOLE_FAULT_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"test": name, **figures}) + "\n")
