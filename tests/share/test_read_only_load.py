"""Under --read-only the console generates no load on the server unless asked explicitly with
--allow-load (issue 21, item 13): the driver's benchmark (up to c=64, 1024/1024) was accepted."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

from console.config import HostProfile
from console.core.runner import HostRunner
from console.core.state import HostState
from console.domain.swap.controller import SwapController


def _runner(**profile: object) -> HostRunner:
    session = SimpleNamespace(profile=HostProfile(name="h", host="h", **profile))  # type: ignore[arg-type]
    return HostRunner(session, HostState("h"), swap=SwapController)  # type: ignore[arg-type]


async def test_a_benchmark_is_refused_under_read_only_without_allow_load() -> None:
    for kind in ("quick", "sweep"):
        why = _runner(read_only=True).start_bench(kind, [(64, 128, 1024, 1024)] if kind == "sweep" else None)
        assert why is not None and "read-only" in why and "--allow-load" in why


def test_the_help_says_what_read_only_covers_and_how_to_allow_load() -> None:
    out = subprocess.run([sys.executable, "-m", "console", "--help"], capture_output=True, text=True, timeout=60)
    text = " ".join(out.stdout.split())
    assert "--allow-load" in text and "every benchmark" in text and "it still reads" in text


def test_allow_load_is_a_profile_key_and_a_flag() -> None:
    assert HostProfile(name="h", allow_load=True).with_overrides({"allow_load": None}).allow_load
