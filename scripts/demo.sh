#!/usr/bin/env bash
# Install gpuconsole into .venv and run the demo: the seeds' model swap on a simulated GPU host,
# reached through the real SSH transport, driven through the console's own Swap plan by the demo's
# operator (its keys and confirmations on screen). Extra arguments go to gpuconsole
# (`--demo-scenario swap`: the story plays the swap by itself, the plan following it).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -m pip install -q . 2>&1 | grep -v "^WARNING: Location" || true
exec .venv/bin/gpuconsole --demo --demo-scenario operator "$@"
