"""The workers of one host: connect, run every source, write what they read into its HostState.

Headless (plain asyncio tasks, no Textual): the TUI, `serve`, and `snapshot` all drive a host
through this one path, so what the screen says and what the JSON says come from the same code.
Host-changing and host-reading requests (verify, the benchmark, the unit picker) go through here
too: a view never reaches into a source.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from console.domain.analysis.bench_view import is_result
from console.host.backoff import Backoff
from console.domain.bench.runner import BenchConfig, BenchThread
from console.domain.bench.store import default_path, load_runs, save_run
from console.domain.bench.workload import random_prompts
from console.core.control import NOT_SHARED
from console.core.events import (
    BenchChanged,
    ConnectionChanged,
    HostInfo,
    LogAppended,
    Notice,
    PathEvent,
    ReadingChanged,
    VerifyChanged,
)
from console.core.state import HostState
from console.model import Reading
from console.host.session import HostSession
from console.host.sources.base import PolledSource, describe_error
from console.host.sources.download import verifiable_files, verify_reference, verify_sha256
from console.host.sources.log import LogFollower
from console.host.sources.server import _settle
from console.host.transport.base import ConnectionState
from console.host.transport.errors import HostKeyError, TransportError

log = logging.getLogger("gpuconsole.runner")


class HostRunner:
    """Owns the tasks of one host. `start()` connects (with the shared backoff policy) and starts
    every source; `close()` stops them and the transport."""

    def __init__(self, session: HostSession, state: HostState, *,
                 swap: Callable[[HostRunner], Any] | None = None) -> None:
        self.session = session
        self.state = state
        # The swap's engine (console/domain/swap/controller.py's SwapController), given by whoever builds
        # the runner: the core never imports the swap; without one, the swap's requests are refused.
        self._swap_engine = swap
        self.host = state.host
        self.sources: dict[str, PolledSource[Any]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._wakers: list[Callable[[], None]] = []
        self._last_status: str | None = None
        self.bench: Any = None
        self._bench_labels: list[str] = []
        self._swap: Any = None
        # This runner writes the host's facts into the state: the swap is derived from them there
        # (a step of `apply`), and the server poll follows a server that moved to another port.
        state.observe_host(wake=self.repoll)
        state.subscribe(self._follow_server)

    def announce(self) -> None:
        """The session's first event: the host's label and which panes have no source."""
        profile = self.session.profile
        missing: list[tuple[str, str]] = []
        if not profile.model_dir:
            missing.append(("download", "No model directory: pass --model-dir DIR (and --repo ID) or set "
                                        "model_dir in the profile."))
        if not profile.unit and not getattr(profile, "container", None) and not getattr(profile, "compose", None):
            missing.append(("service", "No unit: pass --unit NEW.service (and --compare-unit OLD.service), "
                                       "or --container NAME (and --compare-container OLD), "
                                       "or set them in the profile."))
        follower = self.session.log_follower()
        if follower is None:
            missing.append(("log", "No log: pass --unit NAME (its journal) or --log-file PATH."))
        label = self.session.transport.label if profile.host else f"local: {self.session.transport.label}"
        self.state.apply(HostInfo(self.host, label, self.session.demo, follower.label if follower else None,
                                  tuple(missing), read_only=getattr(profile, "read_only", False),
                                  host_root=getattr(profile, "host_root", None)))
        if self._swap_engine is not None:
            self.swap.announce()

    # -- writing into the state ------------------------------------------------------------
    def emit_reading(self, source: str, reading: Reading[Any]) -> None:
        self.state.apply(ReadingChanged(self.host, source, reading))

    def notice(self, title: str, message: str, severity: str = "information") -> None:
        self.state.apply(Notice(self.host, title, message, severity, time.time()))

    def _spawn(self, coro: Awaitable[Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        task.set_name(f"{self.host}:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:  # a source must never raise; if one does, it is said, not swallowed
            log.error("%s failed", task.get_name(), exc_info=exc)
            self.notice(f"{task.get_name()} failed", describe_error(exc), "error")

    # -- connection ------------------------------------------------------------------------
    def _on_connection(self, conn: ConnectionState) -> None:
        previous, self._last_status = self._last_status, conn.status
        self.state.apply(ConnectionChanged(self.host, conn))
        if conn.status == "connected" and previous not in (None, "connected", "connecting"):
            # Back after an outage: every source polls now instead of at the end of its backoff.
            self.wake_all()

    def wake_all(self) -> None:
        for source in self.sources.values():
            source.wake()
        for wake in self._wakers:
            wake()

    async def connect(self) -> bool:
        """Connect, retrying with the shared backoff. False when it cannot ever work (host key)."""
        transport = self.session.transport
        transport.on_state(self._on_connection)
        self._on_connection(transport.state)
        backoff = Backoff()
        while transport.state.status != "connected":
            try:
                await self.connect_once()
                return True
            except HostKeyError as exc:
                self.notice("host key refused", str(exc), "error")
                return False
            except TransportError as exc:
                if getattr(transport, "closing", False):  # closed or aborted (quitting): never again
                    return False
                self.notice("cannot connect", str(exc), "error")
                await backoff.failed()
        return True

    async def connect_once(self) -> None:
        """One attempt (a fleet bounds how many run at once by overriding this)."""
        await self.session.transport.connect()

    async def start(self) -> None:
        """Connect and start every source (returns once they run)."""
        if not await self.connect():
            return
        self.start_sources()

    def start_sources(self) -> None:
        self._load_bench_history()
        for source in self.session.polled_sources():
            self.sources[source.name] = source
            self._spawn(self._pump(source.name, source.readings()), source.name)
        gpu = self.session.gpu_source()
        self._wakers.append(gpu.backoff.wake)
        self._spawn(self._pump("gpu", gpu.readings()), "gpu")
        follower = self.session.log_follower()
        if follower is not None:
            self._wakers.append(follower.backoff.wake)
            self._spawn(self._follow(follower), "log")

    async def _pump(self, name: str, readings: AsyncIterator[Reading[Any]]) -> None:
        async for reading in readings:
            self.emit_reading(name, reading)

    async def _follow(self, follower: LogFollower) -> None:
        last_ok: float | None = None
        async for batch in follower.batches():
            if batch.events:
                self.state.apply(LogAppended(self.host, batch.events))
                last_ok = time.time()
            if batch.note:
                self.notice("log", batch.note)
            now = time.time()
            self.emit_reading("log", Reading("log", batch.summary, last_ok or now, batch.error,
                                             now if batch.error else None))

    def repoll(self, name: str) -> None:
        source = self.sources.get(name)
        if source is not None:
            source.wake()

    # -- one cycle, for snapshot -----------------------------------------------------------
    async def one_cycle(self) -> None:
        """Every source once, through the same objects the app uses: the log's backlog feeds the
        follower's own tracker, which the server watcher then reads (so a booting server's
        snapshot says "starting", as the app does)."""
        session = self.session
        for source in session.polled_sources(one_shot=True):
            self.emit_reading(source.name, await source.poll_once())
        self.emit_reading("gpu", await session.gpu_source().first_reading())
        follower = session.log_follower()
        if follower is not None:
            events = await follower.read_backlog()
            if events:
                self.state.apply(LogAppended(self.host, events))
            self.emit_reading("log", Reading("log", follower.tracker.summary(), time.time()))
        server = session.server_watcher()
        if server is not None:
            self.emit_reading("server", Reading("server", await _settle(server), time.time()))

    # -- requests from views ---------------------------------------------------------------
    def verify(self) -> str | None:
        """Start the sha256 verification; returns why not, or None when it started."""
        watcher = self.session._download
        if watcher is None:
            return "no model directory"
        files = verifiable_files(watcher)
        if not files:
            known = watcher.state.tree_expected or watcher.state.hub_expected
            return ("no finished file has a known sha256 yet" if known is not None
                    else "sha256 values come from the listing hf download keeps, or the Hub's file list (--repo)")

        async def run() -> None:
            async for progress in verify_sha256(self.session.transport, watcher.model_dir, files,
                                                reference=verify_reference(watcher)):
                self.state.apply(VerifyChanged(self.host, progress))

        self._spawn(run(), "verify")
        return None

    def pick_units(self, new: str, old: str | None) -> None:
        watcher = self.session.service_watcher()
        if watcher is not None:
            watcher.pick(new, old)
            self.repoll("service")

    def _load_bench_history(self) -> None:
        self.state.apply(BenchChanged(self.host, "history", runs=tuple(load_runs(self.bench_path()))))

    def bench_path(self) -> Any:
        return self.session.bench_path or default_path(demo=self.session.demo)

    def start_bench(self, kind: str, plan: list[tuple[int, int, int, int]] | None = None) -> str | None:
        """`plan`: (concurrency, prompts, input tokens, output tokens) per run; by default the quick
        run or the story's sweep. Returns why not, or None when it started."""
        if self.bench is not None and self.bench.running:
            return "a benchmark is already running (x stops it)"
        profile = self.session.profile
        if getattr(profile, "read_only", False) and not getattr(profile, "allow_load", False):
            return ("read-only: the console generates no load on the server; a benchmark needs --allow-load "
                    "(or allow_load = true in the profile)")
        sweep = [(c, max(8, 2 * c), 1024, 1024) for c in (1, 4, 16, 64)]
        plan = plan or (sweep if kind == "sweep" else [(4, 16, 256, 256)])
        runs = [(BenchConfig("", concurrency=c, num_prompts=n, input_len=i, output_len=o),
                 random_prompts(n, i, o)) for c, n, i, o in plan]
        labels = [f"c={c} · {n} × {i}/{o}" for c, n, i, o in plan]
        loop = asyncio.get_running_loop()
        apply = self.state.apply

        def post(fn: Any, *args: Any) -> None:
            """From the benchmark's thread to the console's loop; once the console has quit (its
            loop closed while a run was under way) there is no one left to tell."""
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(fn, *args)

        def from_thread(event: BenchChanged) -> None:
            post(apply, event)

        def result(index: int, metrics: dict[str, Any]) -> None:
            report = self.state.data("service")
            flags = list(report.new.command.argv) if report is not None and report.new.command else None
            try:
                # A run stopped before any request finished is not a result: never saved (issue 20).
                record = (save_run(metrics, self.bench_path(), host=self.state.label, flags=flags)
                          if is_result(metrics) else dict(metrics))
            except OSError as exc:  # disk full on our own data dir: the result is still shown (issue 15)
                record = dict(metrics)
                post(self.notice, "benchmark result",
                     f"not saved to {self.bench_path()}: {exc.strerror or exc}", "error")
            if len(runs) > 1:  # a sweep: which of its runs this was, and which never ran after a stop
                record = {**record, "sweep_run": index + 1, "sweep_runs": len(runs),
                          "sweep_not_run": labels[index + 1:] if metrics.get("stopped") else []}
            from_thread(BenchChanged(self.host, "result", record=record))
            if index + 1 < len(runs) and not metrics.get("stopped"):  # a stop ends the sweep
                from_thread(BenchChanged(self.host, "start", label=labels[index + 1],
                                         total=runs[index + 1][0].num_prompts))

        def done(error: str | None) -> None:
            from_thread(BenchChanged(self.host, "done", error=error))
            if error:
                post(self.notice, "benchmark failed", error, "error")

        self.bench = BenchThread(
            runs, self.session.bench_url,
            on_progress=lambda i, p: from_thread(BenchChanged(self.host, "progress", progress=p)),
            on_result=result, on_done=done)
        self.state.apply(BenchChanged(self.host, "start", label=labels[0], total=runs[0][0].num_prompts))
        self.bench.start()
        return None

    def stop_bench(self) -> str | None:
        if self.bench is not None and self.bench.running:
            self.bench.stop.set()
            return "stopped: no new request; the ones in flight are cancelled"
        return None

    # -- the swap (issue 13): console/domain/swap/controller.py ------------------------------------
    @property
    def swap(self) -> Any:
        """The swap's actions, gate, approvals and audit (every request refused when read-only)."""
        if self._swap is None:
            if self._swap_engine is None:
                raise RuntimeError("this runner has no swap engine (HostRunner(..., swap=SwapController))")
            self._swap = self._swap_engine(self)
        return self._swap

    def _follow_server(self, event: object) -> None:
        """A beside swap moved the traffic to another port (the console's own, or one seen on the
        host): the server poll and later benchmarks follow it."""
        if not isinstance(event, PathEvent) or event.kind != "endpoint":
            return
        port = event.data().get("to_port")
        if isinstance(port, int) and getattr(self.session.profile, "server_port", None) != port \
                and hasattr(self.session, "move_server"):
            self.session.move_server(port)
            self.repoll("server")

    def swap_preview(self, key: str) -> tuple[str | None, Any]:
        return self.swap.preview(key)

    async def swap_preview_async(self, key: str) -> tuple[str | None, Any]:
        return self.swap.preview(key)

    def swap_confirm(self, preview_id: str, who: str | None = None) -> str | None:
        return self.swap.confirm(preview_id, who)

    def swap_override(self, check: str, typed: str, who: str | None = None) -> str | None:
        return self.swap.override(check, typed, who)

    def swap_approve(self, request_id: str, who: str) -> str | None:
        return self.swap.approve(request_id, who)

    def swap_withdraw(self, request_id: str, who: str) -> str | None:
        return self.swap.withdraw(request_id, who)

    # -- HostControl (console/core/control.py): who acts, and pairing (not shared here) ------
    @property
    def client_id(self) -> int | None:
        return None

    @property
    def who(self) -> str | None:
        return self.swap.who

    def set_note(self, text: str) -> str | None:
        return NOT_SHARED

    def hand_over(self, to: int) -> str | None:
        return NOT_SHARED

    def ask_drive(self) -> str | None:
        return NOT_SHARED

    def accept(self, client: int) -> str | None:
        return NOT_SHARED

    def set_view(self, pane: str | None) -> None:
        """Not shared: which pane this view shows concerns nobody else."""

    # -- closing ---------------------------------------------------------------------------
    async def close(self) -> None:
        if self.bench is not None:
            self.bench.stop.set()
        # Cancelled again until they end: on Python 3.11 `asyncio.wait_for` swallows a cancel that
        # lands as its inner await completes, and a source's loop then runs on (a test's teardown
        # waited 60 s for the GPU source's stream, whose lines come every 0.5 s). Bounded.
        # Again every 50 ms, not 0.5 s: a fleet's quit, every connection just dropped, had each
        # GPU source swallow two or three cancels, each then costing half a second (issue 36).
        pending = set(self._tasks)
        for _ in range(200):
            if not pending:
                break
            for task in pending:
                task.cancel()
            _done, pending = await asyncio.wait(pending, timeout=0.05)
        if pending:
            log.warning("runner: %s did not end when cancelled", ", ".join(t.get_name() for t in pending))
        with contextlib.suppress(asyncio.TimeoutError, TransportError, OSError):
            await asyncio.wait_for(self.session.close(), 3)


async def run_one_cycle(session: HostSession, state: HostState) -> HostState:
    runner = HostRunner(session, state)
    runner._on_connection(session.transport.state)
    await runner.one_cycle()
    return state
