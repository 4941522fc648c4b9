"""The demo's swap driven through the console's own screens (headless Textual pilot): the plan
screen's keys, each confirmation's enter, and SVG screenshots of the plan at its moments:

    python -m console.ui.swap_tui_demo OUT [--speed 8]

The same simulated host and plan as console/demo/swap_demo.py (which drives the swap through the
core, without screens); this one stands on the UI's floor, since it runs the App.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from console.demo.hostsim.scenario import demo_profile, start_scenario
from console.demo.swap_demo import simulated_host, until
from console.host.session import HostSession, make_transport
from console.ui.app import ConsoleApp
from console.ui.panes.swap import ConfirmScreen


async def run_tui_demo(out: Path, *, speed: float = 8.0) -> Path:
    """The same swap driven through the console's own screens (headless Textual pilot): the plan
    screen's keys, each confirmation's enter; SVG screenshots of the plan at its moments."""
    work = Path(tempfile.mkdtemp(prefix="gpuconsole-swap-tui-"))
    sim = await simulated_host(work, speed)
    await start_scenario(sim)
    profile = demo_profile(sim).with_overrides({"gpu_interval_s": 0.5})
    app = ConsoleApp.for_session(HostSession(profile, make_transport(profile), demo=True,
                                             bench_path=work / "bench.jsonl"), record=True, record_dir=work / "rec")
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    try:
        async with app.run_test(size=(130, 48)) as pilot:
            state = app.state
            app.runner.swap.bench_plan = [(1, 4, 256, 128), (4, 8, 256, 128)]
            await until(lambda: state.data("service") is not None and state.data("gpu") is not None)
            app.action_swap_plan()
            await pilot.pause()
            shots = {"download": "swap-plan-1-download", "stop_old": "swap-plan-2-confirm-stop",
                     "benchmark": "swap-plan-3-done"}
            for key, letter in (("download", "d"), ("install", "i"), ("preflight", "g"), ("stop_old", "s"),
                                ("start_new", "n"), ("benchmark", "b")):
                await pilot.press(letter)
                await pilot.pause(0.3)
                if not isinstance(app.screen, ConfirmScreen):
                    raise SystemExit(f"{key}: no confirmation came up")
                if key == "stop_old":
                    app.save_screenshot(f"{shots[key]}.svg", str(out))
                await pilot.press("enter")
                if key == "download":
                    await until(lambda: (state.data("download") is not None
                                          and state.data("download").bytes_done > 120e9))
                    await pilot.pause(0.6)
                    app.save_screenshot(f"{shots[key]}.svg", str(out))
                await until(lambda k=key: state.swap.steps[k].state in ("done", "failed", "skipped"), 600)
                print(f"{key}: {state.swap.steps[key].state} — {state.swap.steps[key].detail}", file=sys.stderr)
            await pilot.pause(1.0)
            app.save_screenshot(f"{shots['benchmark']}.svg", str(out))
    finally:
        await sim.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m console.ui.swap_tui_demo",
                                     description="the demo's swap through the console's screens; SVGs into OUT")
    parser.add_argument("out", type=Path)
    parser.add_argument("--speed", type=float, default=8.0)
    args = parser.parse_args(argv)
    asyncio.run(run_tui_demo(args.out, speed=args.speed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
