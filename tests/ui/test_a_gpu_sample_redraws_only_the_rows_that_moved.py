"""A GPU sample whose figures move on one GPU's row draws that row again, not the pane: the rows
that read the same (the other GPUs, the total) keep what was drawn (issue 36: the
GPU pane was a third of the demo's frame time, all of it drawn again each second for a few
changed figures). What is on screen is what a whole render of the same text draws, cell for cell,
also after a resize and with the pane gone stale and back."""

from __future__ import annotations

from typing import Any

from console.core.state import HostState, ReadingChanged
from console.model import GpuDevice, GpuStatus, Reading
from tests.kit.hosts import wait_for
from tests.kit.screens import gpu_pane_on_clocks


def _sample(state: HostState, at: float, utils: tuple[int, ...]) -> Reading[GpuStatus]:
    gpus = tuple(GpuDevice(i, "NVIDIA H200", f"GPU-{i}", 84_000, 143_771, util, 55 + i, 350.0 + i, 700.0)
                 for i, util in enumerate(utils))
    reading = Reading("gpu", GpuStatus("nvml", gpus, driver="580.95.05", sampled_at_s=at), at)
    state.apply(ReadingChanged("gpu-01", "gpu", reading))
    return reading


def _drawn(pane: Any) -> list[str]:
    """The pane's rows as the compositor gets them (text and styles)."""
    return [repr(list(strip)) for strip in (pane.render_line(y) for y in range(pane.size.height))]


def _whole(pane: Any) -> list[str]:
    """The same rows drawn from the pane's text at once, the way Textual draws a Static (blank rows
    under the text)."""
    from textual.strip import Strip
    from textual.visual import Visual

    width, height = pane.size
    strips = Visual.to_strips(pane, pane._render(), width, height, pane.visual_style)
    strips += [Strip.blank(width, pane.visual_style.rich_style)] * (height - len(strips))
    return [repr(list(strip)) for strip in strips]


async def test_a_gpu_sample_redraws_only_the_rows_that_moved(monkeypatch: Any) -> None:
    from textual.visual import Visual

    drawn_rows: list[int] = []
    to_strips = Visual.to_strips.__func__  # type: ignore[attr-defined]

    def counted(cls: Any, widget: Any, visual: Any, width: int, height: int | None, style: Any, **kw: Any) -> Any:
        strips = to_strips(cls, widget, visual, width, height, style, **kw)
        if type(widget).__name__ == "GpuPane":
            drawn_rows.append(len(strips))
        return strips

    monkeypatch.setattr(Visual, "to_strips", classmethod(counted))
    flush_clock, clock, state, app = gpu_pane_on_clocks(monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.host_screen.pane("gpu")
        await pilot.pause()

        async def second(utils: tuple[int, ...]) -> None:
            clock.t += 1.0
            flush_clock.t += 1.0
            reading = _sample(state, clock.t, utils)
            await wait_for(lambda: pane.reading is not None and pane.reading.ok_at_s == reading.ok_at_s, timeout=30)
            await pilot.pause()

        for _ in range(pane.content_size.width + 2):  # the histories' visible tail is full and still
            clock.t += 1.0
            _sample(state, clock.t, (50, 60, 70, 80))
        await second((50, 60, 70, 80))
        await wait_for(lambda: "80%" in str(pane.render()), timeout=30)
        rows = pane.size.height
        assert str(pane.render()).count("\n") + 1 < rows  # the text fits: drawn line by line
        drawn_rows.clear()
        await second((50, 61, 70, 80))  # GPU 1's utilization moves, nothing else
        await wait_for(lambda: "61%" in str(pane.render()), timeout=30)
        await wait_for(lambda: "61%" in "".join(s.text for s in pane.render_line(2)), timeout=30)
        assert sum(drawn_rows) <= 2, f"{sum(drawn_rows)} rows drawn for one GPU's moved figures ({rows} in the pane)"
        assert _drawn(pane) == _whole(pane)
        # Another GPU, then two at once: still the rows that moved; the screen is a whole render's.
        before = (50, 61, 70, 80)
        for utils in ((50, 61, 71, 80), (52, 61, 71, 83)):
            drawn_rows.clear()
            await second(utils)
            await wait_for(lambda: f"{utils[2]}%" in "".join(s.text for s in pane.render_line(3))
                           and f"{utils[3]}%" in "".join(s.text for s in pane.render_line(4)), timeout=30)
            moved = sum(a != b for a, b in zip(utils, before))
            assert sum(drawn_rows) <= 2 * moved, f"{sum(drawn_rows)} rows drawn for {moved} GPUs' moved figures"
            assert _drawn(pane) == _whole(pane)
            before = utils
        # Stale (its style changes with the frame's class) and live again, a resize: whole renders, the same cells.
        clock.t += 30.0
        app.host_screen._tick()
        await wait_for(lambda: pane.has_class("-stale"), timeout=30)
        await pilot.pause()
        assert _drawn(pane) == _whole(pane)
        await second((53, 61, 71, 83))
        await wait_for(lambda: not pane.has_class("-stale"), timeout=30)
        assert _drawn(pane) == _whole(pane)
        await pilot.resize_terminal(100, 40)
        await wait_for(lambda: pane.size.width < 110 // 2, timeout=30)
        await pilot.pause()
        assert _drawn(pane) == _whole(pane)
        await second((54, 61, 71, 83))
        await wait_for(lambda: "54%" in "".join(s.text for s in pane.render_line(1)), timeout=30)
        assert _drawn(pane) == _whole(pane)
