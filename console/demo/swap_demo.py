"""The demo's swap driven end to end through the console's core, recorded, and its report rendered:

    python -m console.demo.swap_demo screenshots/ [--oom] [--speed 8]
    python -m console.demo.swap_demo OUT --path in-place|beside|restart   (issue 24: the faster paths)
    python -m console.demo.swap_demo OUT --path in-place|beside|restart --runtime container   (SGLang in containers)
    python -m console.demo.swap_demo OUT --path restart --runtime compose   (the new server a compose service)

Runs the simulator's driven scenario (real SSH, SFTP, the simulated systemctl/hf and SGLang), a
benchmark of the old model, then every step of the plan from the SwapController (a failed boot
rolls back with --oom), and writes swap-report.{md,html,json} (and .png with headless chromium).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from console.core.recording import Recorder
from console.core.runner import HostRunner
from console.core.state import HostState
from console.demo.hostsim import HostSimulator
from console.demo.hostsim import downtime_scenario as ds
from console.demo.hostsim.scenario import demo_profile, start_scenario
from console.demo.png_meta import draw_page
from console.domain.swap.controller import SwapController
from console.domain.swap.report import render, report_from_recording
from console.host.session import HostSession, make_transport


async def simulated_host(work: Path, speed: float) -> Any:
    """The one set-up every demo shares: offline Hugging Face (the simulated host's Hub answers), the
    console's cache and data dirs under `work` (a demo never writes the user's), the driven
    simulator started. Returns the HostSimulator (its scenario is the caller's)."""
    os.environ["HF_ENDPOINT"] = "http://127.0.0.1:1"
    os.environ["GPUCONSOLE_CACHE_DIR"] = str(work / "cache")
    os.environ["XDG_DATA_HOME"] = str(work / "data")
    sim = HostSimulator(work / "host", speed=speed, scenario="drive")
    await sim.start()
    return sim


async def run_demo(out: Path, *, speed: float = 8.0, oom: bool = False) -> Path:
    work = Path(tempfile.mkdtemp(prefix="gpuconsole-swap-demo-"))
    sim = await simulated_host(work, speed)
    await start_scenario(sim, oom=oom)
    profile = demo_profile(sim).with_overrides({"gpu_interval_s": 0.5})
    session = HostSession(profile, make_transport(profile), demo=True, bench_path=work / "bench.jsonl")
    state = HostState("gpu-sim-01", label="gpu-sim-01 (simulated 4 × RTX PRO 6000)", demo=True)
    runner = HostRunner(session, state, swap=SwapController)
    swap = runner.swap
    swap.poll_s = 0.2
    swap.bench_plan = [(1, 4, 256, 128), (4, 8, 256, 128), (16, 32, 256, 128)]
    recorder = Recorder(state, work / "recordings").start()
    runner.announce()
    await runner.start()
    try:
        await until(lambda: state.data("service") is not None and state.data("gpu") is not None)
        # The old model's run on this host, for the comparison.
        runner.start_bench("sweep", [(4, 8, 256, 128)])
        await until(lambda: runner.bench is None or not runner.bench.running)
        await play(swap, state, ("download", "verify", "install", "preflight", "stop_old", "start_new", "benchmark"))
        await asyncio.sleep(1.0)
    finally:
        recorder.close()
        await runner.close()
        await sim.stop()
    assert recorder.path is not None
    return recorder.path


PATH_STEPS = {
    "in-place": ("download", "paths", "install", "preflight", "in_place", "benchmark"),
    "beside": ("download", "paths", "install", "preflight", "beside", "benchmark", "switch_traffic"),
    "restart": ("download", "paths", "prewarm", "paths", "install", "preflight", "stop_old", "start_new", "benchmark"),
}


async def run_path_demo(out: Path, path: str, *, speed: float = 8.0, work: Path | None = None,
                        faults: dict[str, Any] | None = None, quiet: bool = False,
                        steps: tuple[str, ...] | None = None, rollback: bool = True,
                        connect: Any = None, late_replies: dict[str, float] | None = None,
                        runtime: str = "systemd") -> tuple[Path, Any]:
    """One of issue 24's paths on its simulated host, driven by the SwapController: the old server
    boots first (the host's recorded boot the prediction learns from), then the path's steps.
    `late_replies`: a command containing this text answers the console this many seconds after the
    host has run it (tests: an executor whose reply arrives late). Returns (the recording, the final
    HostState)."""
    work = work or Path(tempfile.mkdtemp(prefix=f"gpuconsole-{path}-demo-"))
    sim = await simulated_host(work, speed)
    faults = dict(faults or {})
    margin = faults.pop("prewarm_margin_gib", 64)
    dt = await ds.start(sim, path, earlier_boot=True, runtime=runtime, **faults)
    profile = dt.profile.with_overrides({"router_url": dt.router_url, "router_log": dt.router_log})
    if connect is not None:  # another SSH server in front of the same simulated host (tests: OpenSSH's sshd)
        profile = profile.with_overrides(connect(sim))
    session = HostSession(profile, make_transport(profile), demo=True, bench_path=work / "bench.jsonl")
    if late_replies:
        _answer_late(session.transport, late_replies)
    gpus = 8 if path == "beside" else 4
    state = HostState("gpu-sim-01", label=f"gpu-sim-01 (simulated {gpus} × RTX PRO 6000, {path}, speed {speed:g})",
                      demo=True)
    runner = HostRunner(session, state, swap=SwapController)
    swap = runner.swap
    swap.poll_s = 0.2
    swap.audit_file = work / "audit.jsonl"
    swap.bench_plan = [(1, 4, 256, 128), (4, 8, 256, 128)]
    swap.fast.recordings_dir = work / "recordings"
    swap.fast.prewarm_rate_mbps = 1_000_000  # the simulated disk's rate bounds it (console/demo/hostsim/pagecache.py)
    swap.fast.prewarm_margin_gib = int(margin)
    recorder = Recorder(state, work / "recordings").start()
    runner.announce()
    await runner.start()
    try:
        await until(lambda: state.data("service") is not None and state.data("gpu") is not None)
        await until(lambda: state.data("server") is not None and state.data("server").status == "ready", 600)
        # The old model's run on this host: the workload the new server is benchmarked with (before/after).
        runner.start_bench("sweep", [(4, 8, 256, 128)])
        await until(lambda: runner.bench is None or not runner.bench.running, 600)
        await play(swap, state, steps or PATH_STEPS[path], quiet=quiet, rollback=rollback)
        await _read_after_the_last_command(runner, state)
        await asyncio.sleep(1.0)
    finally:
        recorder.close()
        await runner.close()
        await dt.close()
        await sim.stop()
    assert recorder.path is not None
    return recorder.path, state


def _answer_late(transport: Any, late: dict[str, float]) -> None:
    """The transport's replies to the commands named in `late` come back that many seconds after
    the host answered (the command has run; only its answer is slow)."""
    run = transport.run

    async def answered_late(script: str, *args: Any, **kwargs: Any) -> Any:
        result = await run(script, *args, **kwargs)
        await asyncio.sleep(max((s for text, s in late.items() if text in script), default=0.0))
        return result

    transport.run = answered_late


async def play(swap: Any, state: Any, keys: tuple[str, ...], *, quiet: bool = False, rollback: bool = True,
               timeout_s: float = 900) -> None:
    """The steps one by one from the SwapController, as an operator confirms them; a failed step
    stops the plan and its offered rollback is taken (unless `rollback` is False)."""
    for key in keys:
        why = swap.request(key, "ana")
        if why:
            raise SystemExit(f"{key}: {why}")
        await swap.wait_idle(timeout_s)
        await swap.wait_download(timeout_s)
        step = state.swap.steps[key]
        if not quiet:
            print(f"{key}: {step.state} — {step.detail}", file=sys.stderr)
        if step.state in ("failed", "refused"):
            if rollback and step.state == "failed" and swap.request("rollback", "ana") is None:
                await swap.wait_idle(timeout_s)
                if not quiet:
                    rb = state.swap.steps["rollback"]
                    print(f"rollback: {rb.state} — {rb.detail}", file=sys.stderr)
            break


async def _read_after_the_last_command(runner: Any, state: Any) -> None:
    """The demo ends once the host's services were read after its last command answered (a
    container's exit time, Docker's FinishedAt, is in that reading): a poll under way when the
    answer came may have read the host before it, so the second poll after it counts."""
    last = state.swap.audit[-1].at_s if state.swap.audit else 0.0

    def read_since(t: float) -> bool:
        r = state.reading("service")
        return r is not None and (r.ok_at_s or 0.0) > t

    for _ in range(2):
        runner.repoll("service")
        await until(lambda: read_since(last), 120)
        last = state.reading("service").ok_at_s


async def until(ready: Any, timeout_s: float = 300) -> None:
    """Wait for `ready()` on the demo's host, checking every 0.2 s; the demo ends if it never comes."""
    for _ in range(int(timeout_s / 0.2)):
        if ready():
            return
        await asyncio.sleep(0.2)
    raise SystemExit("the demo host did not get there in time")


def render_all(recording: Path, out: Path, name: str = "swap-report") -> list[Path]:
    report = report_from_recording(recording)
    report["host"]["recording"] = recording.name  # not this machine's temp path
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt, ext in (("md", "md"), ("html", "html"), ("json", "json")):
        path = out / f"{name}.{ext}"
        path.write_text(render(report, fmt), encoding="utf-8")
        written.append(path)
    png = out / f"{name}.png"  # tagged with Chromium and the HTML's sha256, as every PNG of screenshots/
    if draw_page(out / f"{name}.html", png, 1200, 4400, extra=("--hide-scrollbars",)):
        written.append(png)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m console.demo.swap_demo")
    parser.add_argument("out", type=Path)
    parser.add_argument("--oom", action="store_true", help="the new server runs out of memory; roll back")
    parser.add_argument("--speed", type=float, default=8.0)
    parser.add_argument("--tui", action="store_true",
                        help="moved: python -m console.ui.swap_tui_demo OUT (the swap through the console's screens)")
    parser.add_argument("--path", choices=("in-place", "beside", "restart"),
                        help="issue 24: play this path on its simulated host; writes swap-report-<path>.*")
    parser.add_argument("--runtime", choices=("systemd", "container", "compose"), default="systemd",
                        help="with --path: SGLang as systemd units (default), in containers, or (restart) a compose "
                             "service")
    args = parser.parse_args(argv)
    if args.runtime != "systemd" and not args.path:
        parser.error(f"--runtime {args.runtime} goes with --path")
    if args.runtime == "compose" and args.path != "restart":
        parser.error("--runtime compose goes with --path restart (the compose service is created by the swap)")
    if args.oom and args.path == "in-place":
        parser.error("--oom goes with the restart and beside paths: in place no new server starts (the running "
                     "server loads the new weights)")
    if args.path:
        # --oom: the new server runs out of GPU memory as it boots (restart: rolled back to the old one;
        # beside: the old one never stopped)
        faults = {"beside_oom": True} if args.oom else None
        recording, _ = asyncio.run(run_path_demo(args.out, args.path, speed=args.speed, runtime=args.runtime,
                                                 faults=faults))
        name = f"swap-report-{args.path}" + (f"-{args.runtime}" if args.runtime != "systemd" else "") + (
            "-rollback" if args.oom else "")
        for path in render_all(recording, args.out, name):
            print(path)
        return 0
    if args.tui:  # the screens are the UI's floor, above the demo: the swap through them is its own command
        print(f"the swap through the console's screens: python -m console.ui.swap_tui_demo {args.out}"
              + (f" --speed {args.speed:g}" if args.speed != 8.0 else ""), file=sys.stderr)
        return 2
    recording = asyncio.run(run_demo(args.out, speed=args.speed, oom=args.oom))
    name = "swap-report-rollback" if args.oom else "swap-report"
    for path in render_all(recording, args.out, name):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
