"""A benchmark's thread that ends after the console's event loop has closed (the operator quit while
a run was under way) says nothing to the closed loop and raises nothing: a walk of the shared demo
quit during a swap printed `Exception in thread bench … RuntimeError: Event loop is closed`."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from types import SimpleNamespace

from console.config import HostProfile
from console.core.runner import HostRunner
from console.core.state import HostState
from console.domain.swap.controller import SwapController


def test_a_benchmark_that_ends_after_the_loop_closed_raises_nothing_in_its_thread(tmp_path) -> None:
    release = threading.Event()

    @contextlib.asynccontextmanager
    async def url():
        # the run's connection: held until the console's loop is gone, then refused
        await asyncio.to_thread(release.wait, 30)
        raise ConnectionRefusedError("the server went away")
        yield "http://127.0.0.1:9"  # pragma: no cover

    session = SimpleNamespace(profile=HostProfile(name="h", host="h"), bench_path=tmp_path / "bench.jsonl",
                              demo=False, bench_url=url)
    runner = HostRunner(session, HostState("h"), swap=SwapController)  # type: ignore[arg-type]
    errors: list[BaseException] = []
    hook, threading.excepthook = threading.excepthook, lambda args: errors.append(args.exc_value)
    try:
        loop = asyncio.new_event_loop()

        async def start() -> str | None:
            return runner.start_bench("quick")

        assert loop.run_until_complete(start()) is None
        loop.close()  # the console quit with the run under way
        release.set()
        assert runner.bench is not None
        runner.bench._thread.join(30)
        assert not runner.bench.running
    finally:
        threading.excepthook = hook
    assert errors == []
