"""Regenerate screenshots/ from the demo: the story's moments at 120x40, one at 80x24, a few
maximized panes, the fit view, and the benchmark after a run. SVG always; PNG too when headless
Chromium is installed (Debian: chromium). Not rsvg-convert: it drops the spaces between styled
spans ("connectedup 53s"), where Chromium renders the SVG as the terminal shows it. Each PNG
records its renderer and its SVG's sha256 (tEXt chunks), which a test checks.

    .venv/bin/python scripts/screenshots.py [--speed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "screenshots"

from console.demo.png_meta import draw_page, png_text  # noqa: E402,F401 (png_text: tests/ui/test_layout.py)


def render_png(svg: Path, png: Path) -> bool:
    """The SVG as headless Chromium draws it, at its own size; False when Chromium is missing."""
    import math
    import re

    text = svg.read_text()
    m = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', text)
    width, height = (math.ceil(float(m.group(1))), math.ceil(float(m.group(2)))) if m else (1482, 1026)
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / svg.name  # the fonts' web addresses removed: local fonts only
        local.write_text(re.sub(r',?\s*url\("https?://[^"]*"\)\s*format\("[^"]*"\)', "", text))
        return draw_page(local, png, width, height, source=svg)


def save(app: object, name: str) -> None:
    svg = OUT / f"{name}.svg"
    app.save_screenshot(svg.name, str(OUT))  # type: ignore[attr-defined]
    print("saved", svg, "and PNG" if render_png(svg, OUT / f"{name}.png") else "(no chromium: no PNG)")


async def main(speed: float) -> None:
    import logging

    logging.getLogger("asyncio").setLevel(logging.ERROR)  # as the CLI does
    os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp()
    from console.demo.hostsim.process import SimulatorThread
    from console.host.session import HostSession, make_transport
    from console.ui.app import ConsoleApp

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
            for _ in range(60):  # a loaded machine: wait for the diff pane's first reading
                if getattr(small.pane("service"), "reading", None) is not None:
                    break
                await asyncio.sleep(0.5)
            await pilot.pause(0.5)
            save(small, "08-80x24")
    finally:
        sim.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speed", type=float, default=1.0, help="the demo's clock (1: real time)")
    ap.add_argument("--png-only", action="store_true", help="only redraw the PNGs of the SVGs already there")
    args = ap.parse_args()
    if args.png_only:
        for svg in sorted(OUT.glob("*.svg")):
            render_png(svg, svg.with_suffix(".png"))
            print("rendered", svg.with_suffix(".png"))
    else:
        asyncio.run(main(args.speed))
