"""Regenerate screenshots/ from the demo: the story's moments at 120x40, one at 80x24, a few
maximized panes, the fit view, and the benchmark after a run. SVG always; PNG too when
`rsvg-convert` (Debian: librsvg2-bin) is installed.

    .venv/bin/python scripts/screenshots.py [--speed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "screenshots"


def save(app: object, name: str) -> None:
    svg = OUT / f"{name}.svg"
    app.save_screenshot(svg.name, str(OUT))  # type: ignore[attr-defined]
    if shutil.which("rsvg-convert"):
        subprocess.run(["rsvg-convert", str(svg), "-o", str(OUT / f"{name}.png")], check=True)
    print("saved", svg)


async def main(speed: float) -> None:
    import logging

    logging.getLogger("asyncio").setLevel(logging.ERROR)  # as the CLI does
    os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp()
    from console.app import ConsoleApp
    from console.session import HostSession, SimulatorThread, make_transport

    OUT.mkdir(exist_ok=True)
    sim = SimulatorThread(speed=speed)
    profile = sim.start()
    try:
        app = ConsoleApp.for_session(HostSession(profile, make_transport(profile), demo=True))
        async with app.run_test(size=(120, 40)) as pilot:
            async def at(t: float) -> None:
                while sim.sim.elapsed_s() < t:
                    await asyncio.sleep(0.2)

            await at(12)
            save(app, "01-downloading")
            await pilot.press("3")
            await pilot.pause(0.5)
            save(app, "02-service-diff")
            await pilot.press("3")
            app.pane("service").focus()
            await pilot.press("f")
            await pilot.pause(0.5)
            save(app, "03-fit")
            await pilot.press("escape")
            await at(62)
            save(app, "04-swap-loading")
            await at(90)
            save(app, "05-ready")
            await pilot.press("4")
            await pilot.pause(0.5)
            save(app, "06-log")
            await pilot.press("4")
            app.start_bench("quick", plan=[(4, 16, 256, 256), (16, 32, 256, 256)])
            while app.state.bench.live is not None or len(app.state.bench.results) < 2:
                await asyncio.sleep(0.5)
            await pilot.pause(1.5)
            save(app, "07-benchmark")
        small = ConsoleApp.for_session(HostSession(profile, make_transport(profile), demo=True))
        async with small.run_test(size=(80, 24)) as pilot:
            await pilot.pause(4)
            save(small, "08-80x24")
    finally:
        sim.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0)
    asyncio.run(main(ap.parse_args().speed))
