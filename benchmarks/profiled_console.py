"""`python benchmarks/profiled_console.py START END OUT -- gpuconsole args`: the console as users
run it, with cProfile on its UI thread from START to END seconds after the process began (stats in
OUT) and what it drew in that window (frames, layouts, refreshes by widget) in OUT.json. A
benchmark's own instrument (`demo_idle_cpu.py --cprofile`): the figures it takes are not the
console's cost (the profiler multiplies it), only where that cost goes."""

from __future__ import annotations

import cProfile
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

T0 = time.monotonic()


def main() -> None:
    start, end, out = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    args = sys.argv[5:] if sys.argv[4:5] == ["--"] else sys.argv[4:]
    from textual.app import App
    from textual.screen import Screen
    from textual.widget import Widget

    profiler = cProfile.Profile()
    counts: dict[str, Any] = {"frames": 0, "layouts": 0, "refresh_by_widget": Counter(),
                              "render_lines_by_widget": Counter(), "render_ms_by_widget": Counter()}
    state: dict[str, Any] = {"on": False, "causes": {}}
    frame, layout, refresh, run_async = Screen._compositor_refresh, Screen._refresh_layout, Widget.refresh, App.run_async
    render_lines = Widget.render_lines

    def counted_render_lines(self: Any, crop: Any) -> Any:  # what each widget's lines cost in the frames
        if not state["on"]:
            return render_lines(self, crop)
        t = time.thread_time()
        try:
            return render_lines(self, crop)
        finally:
            name = f"{type(self).__name__}#{self.id}"
            counts["render_lines_by_widget"][name] += crop.height
            counts["render_ms_by_widget"][name] += round(1000 * (time.thread_time() - t), 3)

    def counted_frame(self: Any) -> None:
        counts["frames"] += state["on"]
        frame(self)

    def counted_layout(self: Any, *a: Any, **k: Any) -> None:
        counts["layouts"] += state["on"]
        layout(self, *a, **k)

    def counted_refresh(self: Any, *a: Any, **k: Any) -> Any:
        if state["on"]:
            counts["refresh_by_widget"][f"{type(self).__name__}#{self.id}"] += 1
        return refresh(self, *a, **k)

    async def timed_run_async(self: Any, *a: Any, **k: Any) -> Any:
        import asyncio

        def causes() -> dict[str, int]:  # the host screen's flushes by cause (a tree that counts them)
            return dict(getattr(getattr(self, "host_screen", None), "flush_causes", {}))

        def on() -> None:
            state["on"] = True
            state["causes"] = causes()
            profiler.enable()

        def off() -> None:
            profiler.disable()
            state["on"] = False
            counts["flush_causes"] = {k: n - state["causes"].get(k, 0) for k, n in sorted(causes().items())
                                      if n - state["causes"].get(k, 0)}
            profiler.dump_stats(out)
            Path(out + ".json").write_text(json.dumps(counts))

        loop = asyncio.get_running_loop()
        loop.call_at(loop.time() + start - (time.monotonic() - T0), on)
        loop.call_at(loop.time() + end - (time.monotonic() - T0), off)
        return await run_async(self, *a, **k)

    Screen._compositor_refresh, Screen._refresh_layout, Widget.refresh = counted_frame, counted_layout, counted_refresh  # type: ignore[method-assign]
    Widget.render_lines = counted_render_lines  # type: ignore[method-assign]
    App.run_async = timed_run_async  # type: ignore[method-assign]
    from console.cli.main import main as console_main

    # Its own data dir, as demo_idle_cpu.py gives its console: a `--demo` records, and a profile
    # must not leave a recording among the user's (the tests' isolation guard saw one).
    os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="gpuconsole-profile-")
    sys.argv = ["gpuconsole", *args]
    sys.exit(console_main())


if __name__ == "__main__":
    main()
