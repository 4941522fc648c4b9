"""The benchmark client's fast path is the default install (issue 36 item 5): uvloop runs its loop
and orjson parses its stream's chunks (both now in the project's dependencies); without them (a
platform with no wheel) it falls back to asyncio's loop and the json module, with the same
results."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import asyncio, json, sys
{block}
from console.domain.bench import runner

async def which_loop():
    return type(asyncio.get_running_loop()).__module__

print(json.dumps({{"loop": runner.run_loop(which_loop()), "loads": runner._loads.__module__,
                  "chunk": runner._loads(b'{{"choices": [{{"delta": {{"content": "hi"}}}}]}}')}}))
"""


def _probe(block: str = "") -> dict[str, object]:
    import json

    out = subprocess.run([sys.executable, "-c", PROBE.format(block=block)], capture_output=True, text=True,
                         timeout=120, check=True)
    return dict(json.loads(out.stdout))


def test_the_default_install_runs_the_client_on_uvloop_and_parses_with_orjson() -> None:
    got = _probe()
    assert str(got["loop"]).startswith("uvloop"), got
    assert got["loads"] == "orjson", got


def test_without_uvloop_and_orjson_the_client_falls_back_to_the_standard_library() -> None:
    got = _probe("sys.modules['uvloop'] = None; sys.modules['orjson'] = None")
    assert str(got["loop"]).startswith("asyncio"), got
    assert got["loads"] == "json", got
    assert got["chunk"] == {"choices": [{"delta": {"content": "hi"}}]}
