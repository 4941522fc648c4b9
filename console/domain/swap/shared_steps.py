"""The steps every runtime shares, and the waits the runtimes' own steps share: the download (started,
then followed), Verify (sha256 of every finished file), the preflight gate, the benchmark (its words name
the old model's run by the report's one like-workload rule: console/domain/swap/bench_choice.py); the GPU
drain after a stop, the cause of a server's death from its log, a service reading taken after the install.

Each `run_*` is the run of a step object (console/domain/swap/steps.py): it runs through the executor
(console/domain/swap/executor_api.py: its audited `_run`, its `_set` for words, its approval and gate)
and returns the step's words, or raises StepFailed / StepRefused. No time of its own reaches the words:
the step's start and end are the observer's (console/core/derive/swap_observer.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from console.core.derive.swap_observer import verification
from console.core.derive.swap_view import GateChanged, freed_lines
from console.core.state import ReadingChanged
from console.domain.analysis.gpu_drain import DrainWatch
from console.domain.analysis.log_state import logged_since
from console.domain.analysis.server_status import CAUSE_RANK
from console.domain.swap import actions as act
from console.domain.swap import bench_choice, preflight
from console.domain.swap.errors import StepFailed, StepRefused, _Dropped
from console.domain.swap.executor_api import Executor
from console.host.sources.download import verifiable_files
from console.host.transport.base import operand, quote
from console.host.transport.errors import TransportError
from console.units import counted

DRAINED_MIB = 1024  # a GPU holding less than this (the CUDA context of nothing) counts as drained


async def run_download(ex: Executor, who: str) -> str:
    await download_start(ex, who)
    return await follow_download(ex)


async def run_checked(ex: Executor, who: str, key: str, cmd: act.RemoteCommand, failed: Callable[[Any], str], *,
                      said: Callable[[str], str] = str.strip) -> Any | None:
    """One command of a step, audited: its result when it exited 0; StepFailed with `failed(result)`
    (what failed, its exit status) and the tail of what the command said (`said`: how its stderr, else
    stdout, is cleaned) when not; None when its connection dropped, once the host is back: the caller
    re-reads the outcome from the host, never assumes it."""
    try:
        result = await ex._run(who, key, cmd)
    except _Dropped as exc:
        await ex._reconnected(key, str(exc))
        return None
    if not result.ok:
        raise StepFailed(f"{failed(result)}: {said(result.error_text or result.text)[-200:]}")
    return result


async def download_start(ex: Executor, who: str) -> None:
    (action,) = ex.build("download")
    await run_checked(ex, who, "download", action.commands[0],
                      lambda r: f"hf download did not start (exit {r.exit_status})")


async def follow_download(ex: Executor) -> str:
    model_dir = ex.profile.model_dir
    check = act.RemoteCommand(act.download_running_check(model_dir or ""), 20, "is the download running")
    last_check = 0.0
    while True:
        if ex.state.swap.steps["download"].state != "running":
            raise StepFailed(ex.state.swap.steps["download"].detail or "stopped")
        d = ex.state.data("download")
        if d is not None and d.complete is True and not d.partial_files:
            return f"complete: {d.shards_done}/{d.shards_total} shards, sizes match"
        if d is not None:
            eta = f", ETA {d.eta_s:.0f}s" if d.eta_s else ""
            ex._set("download", detail=f"{d.bytes_done / 1e9:.0f} of {(d.bytes_total or 0) / 1e9:.0f} GB, "
                                       f"{d.shards_done}/{d.shards_total} shards{eta}")
        if time.monotonic() - last_check > 5:
            last_check = time.monotonic()
            try:
                r = await ex.session.transport.run(check.script, timeout=check.timeout_s)
                if r.text.strip() == "stopped":
                    # hf exits when its last file is in place: a reading taken after that says
                    # whether they are complete (under load the next poll may take seconds).
                    asked = time.time()
                    for _ in range(int(15 / max(ex.poll_s, 0.05))):
                        ex.runner.repoll("download")
                        await asyncio.sleep(ex.poll_s)
                        reading = ex.state.reading("download")
                        if reading is not None and (reading.ok_at_s or 0) > asked:
                            break
                    d = ex.state.data("download")
                    if d is not None and d.complete is True:
                        continue
                    raise StepFailed("hf download is no longer running and the files are not complete "
                                     "(resume it with the download action)")
            except TransportError:
                await ex._reconnected("download", "connection lost")
        await asyncio.sleep(ex.poll_s)


async def stop_download(ex: Executor, who: str) -> None:
    (action,) = ex.build("stop_download")
    try:
        await ex._run(who, "stop_download", action.commands[0])
    except _Dropped:
        pass
    step = ex.state.swap.steps["download"]
    if step.state == "running":
        ex._set("download", state="failed", detail="stopped by " + who)


def verify_commands(ex: Executor) -> tuple[tuple[act.RemoteCommand, ...], str | None]:
    """The exact sha256 loop `v` runs (console.host.sources.download.verify_sha256), for the preview."""
    watcher = getattr(ex.session, "_download", None)
    if watcher is None:
        return (), "no model directory is watched: nothing to verify"
    files = verifiable_files(watcher)
    if not files:
        return (), "no finished file has a known sha256 yet (the listing hf download keeps, or the Hub's)"
    names = " ".join(quote(path) for path, _, _ in files)
    script = (f"cd -- {operand(watcher.model_dir)} && for f in {names}; do sha256sum -- \"$f\" || "
              "echo \"ERROR $f\"; done")
    return (act.RemoteCommand(script, 3600, f"sha256 of {counted(len(files), 'file')}"),), None


async def run_verify(ex: Executor, who: str) -> str:
    # A Verify the operator confirmed runs, asked for by the profile or not (issue 22 item 5).
    commands, _ = verify_commands(ex)
    why = ex.runner.verify()
    if why:
        raise StepFailed(why)
    ex._audit(who, "verify", commands[0].script if commands else "sha256sum of every finished file",
              None, "", note="started")
    while True:
        v = verification(ex.state)
        if v is not None and (v.finished or v.error):
            if v.error:
                raise StepFailed(v.error)
            if v.mismatched:
                verb = "differs" if len(v.mismatched) == 1 else "differ"
                raise StepFailed(f"{counted(len(v.mismatched), 'file')} {verb} from {v.reference_text()}: "
                                 f"{', '.join(v.mismatched[:3])}")
            return f"{v.matched}/{v.total_files} files match {v.reference_text()}"
        await asyncio.sleep(ex.poll_s)


async def fresh_service(ex: Executor, wait_s: float = 30.0) -> None:
    """After an install, the diff must describe the unit now on the host: wait for a reading
    taken after it (the gate then judges what is really there)."""
    install = ex.state.swap.steps["install"]
    if install.state != "done" or install.ended_at_s is None:
        return
    installed = install.ended_at_s
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        reading = ex.state.reading("service")
        if reading is not None and (reading.ok_at_s or 0) >= installed and reading.data is not None \
                and reading.data.new.command is not None:
            return
        ex.runner.repoll("service")
        await asyncio.sleep(ex.poll_s)


async def run_preflight(ex: Executor, who: str) -> str:
    await fresh_service(ex)
    checks = ex.evaluate_gate()
    ex.state.apply(GateChanged(ex.host, checks, ex._clock()))
    bad = preflight.failing(checks)
    if bad:
        raise StepRefused("the gate refuses: " + "; ".join(f"{c.name}: {c.reason}" for c in bad))
    over = [c.name for c in checks if c.overridden_by]
    return "every check passes" + (f" (overridden: {', '.join(over)})" if over else "")


async def drain(ex: Executor, key: str, since: float) -> str:
    """Wait until every GPU holds less than DRAINED_MIB (read after `since`); the step's words name
    what was freed (the observer's fact) and the processes in the order they let go, or who still holds."""
    deadline = time.monotonic() + float(getattr(ex.profile, "drain_timeout_s", 120.0))
    watch = DrainWatch(DRAINED_MIB)

    def follow(event: Any) -> None:
        # Every GPU reading, not only those this loop wakes for: each freeing keeps its place in order.
        if isinstance(event, ReadingChanged) and event.source == "gpu" and event.reading.data is not None:
            data = event.reading.data
            if (data.sampled_at_s or event.reading.ok_at_s or 0) > since:
                watch.update(data)

    unsubscribe = ex.state.subscribe(follow)
    try:
        while True:
            reading = ex.state.reading("gpu")
            status = reading.data if reading is not None else None
            fresh = status is not None and (status.sampled_at_s or reading.ok_at_s or 0) > since  # type: ignore[union-attr]
            if fresh:
                held = [g for g in status.gpus if g.lost_at_s is None and (g.memory_used_mib or 0) > DRAINED_MIB]
                total = sum(g.memory_used_mib or 0 for g in status.gpus)
                # freed: the observer's fact (before the stop minus drained); the processes in the order they let go
                by_gpu = freed_lines(ex.state.swap.memory())
                order = [f"GPU {f.gpu_index}: pid {f.pid} {f.name}".strip() for f in watch.freed if f.pid]
                freed = ("; freed " + ", ".join(by_gpu) if by_gpu else "") + (
                    "; let go in this order: " + ", ".join(order) if order else "")
                if not held:
                    return f"GPU memory drained ({total:,} MiB in use on {len(status.gpus)} GPUs){freed}"
                left = watch.detail()
                ex._set(key, detail="draining: " + ", ".join(f"GPU {g.index} {g.memory_used_mib:,} MiB"
                                                             for g in held) + (f"; {left}" if left else ""))
            if time.monotonic() > deadline:
                holders = [h.label() for h in watch.holders]
                if not holders and status is not None:
                    for g in status.gpus:
                        for p in g.processes or ():
                            holders.append(f"GPU {g.index}: pid {p.pid} {p.name or ''}".strip())
                raise StepFailed("GPU memory not released within the drain timeout"
                                 + (f"; still held by {', '.join(holders[:4])}" if holders else ""))
            await asyncio.sleep(ex.poll_s)
    finally:
        unsubscribe()


# How long a dead server's log may take to bring its cause (the log stream trails the unit's or the
# container's state; 5 s was too short on a loaded machine: a clean-clone CI run's OOM boot was
# reported as "exited (exit code 1)" without its "out of memory").
DEATH_CAUSE_WAIT_S = 15.0


async def death_cause(ex: Executor, reason: str, wait_s: float = DEATH_CAUSE_WAIT_S) -> str:
    """The unit can be seen failed before its last log lines arrive: give the log a moment
    to bring the cause (an OOM in a traceback), then name it, not just "unit failed". The wait
    ends as soon as a cause is in the log; its limit is only paid by a death with no cause in it."""
    deadline = time.monotonic() + wait_s
    while True:
        log_summary = ex.state.data("log")
        booted = next((b for b in (log_summary.boot if log_summary else ())
                       if b.phase in ("launch", "weights loading")), None)
        errors = [e for e in (log_summary.errors if log_summary else ())
                  if e.kind in CAUSE_RANK and logged_since(e, booted)]
        if errors:
            worst = max(reversed(errors), key=lambda e: CAUSE_RANK[e.kind])
            if worst.message[:60] not in reason:
                return f"{reason}: {worst.kind}: {worst.message[:160]}"
            return reason
        if ":" in reason or time.monotonic() > deadline:
            return reason
        await asyncio.sleep(ex.poll_s)


async def run_benchmark(ex: Executor, who: str) -> str:
    # issue 24 hook: beside, the new server on its own port before traffic moves, the old run's workload
    plan, port = ex.fast.bench_plan() or ex.bench_plan, ex.fast.bench_port()
    ex.session.bench_port = port
    try:
        why = ex.runner.start_bench("sweep", plan)
        if why:
            raise StepFailed(why)
        ex._audit(who, "benchmark", bench_label(ex, plan) + (f" on port {port}" if port else ""), None, "",
                  note="started")
        before = len(ex.state.bench.history)
        while True:
            await asyncio.sleep(ex.poll_s)
            if ex.runner.bench is None or not ex.runner.bench.running:
                break
    finally:
        ex.session.bench_port = None
    runs = ex.state.bench.history[before:]
    if not runs:
        raise StepFailed("the benchmark produced no result")
    last = runs[-1]
    tput = last.get("output_throughput")
    line = f"{counted(len(runs), 'run')}; last: {tput:.0f} output tok/s" if isinstance(tput, (int, float)) else \
        counted(len(runs), "run")
    return line + "; " + bench_choice.compared_words(ex.state)


def bench_label(ex: Executor, plan: list[tuple[int, int, int, int]] | None = None) -> str:
    plan = plan or ex.fast.bench_plan() or ex.bench_plan or [
        (c, max(8, 2 * c), 1024, 1024) for c in (1, 4, 16, 64)]
    return "concurrency " + ", ".join(str(c) for c, *_ in plan) + f" ({plan[0][2]}/{plan[0][3]} tokens)"


__all__ = ["DRAINED_MIB", "bench_label", "death_cause", "download_start", "drain", "follow_download", "fresh_service",
           "run_benchmark", "run_download", "run_preflight", "run_verify", "stop_download", "verify_commands"]
