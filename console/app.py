"""The single-host console: a thin App that shows one `HostScreen` (console/host_screen.py) over
one host's `HostState`. The screen holds the panes, bindings, help, palette and notices, and asks
the host only through a `HostControl` (console/core/control.py); the app starts and stops the
host's workers and saves screenshots."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

from textual import on
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widget import Widget
from textual.worker import Worker

from console.core.control import HostControl
from console.core.state import HostState
from console.host_screen import (  # noqa: F401  (help_text and HelpScreen: imported from here too)
    HelpScreen,
    HostScreen,
    help_text,
    host_commands,
    save_screenshot,
    save_screenshot_to,
    worker_failed,
)
from console.panes.header import HostHeader


def stylesheet_path() -> Path:
    """The stylesheet ships inside the package (wheel) or sits at the repo root (checkout)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "styles" / "console.tcss", here.parent / "styles" / "console.tcss"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError("console.tcss not found next to the package or at the repository root")


_heap_settled = False


def settle_heap() -> bool:
    """Once per process, when the console has started: collect, then freeze what is alive (the
    interpreter, Textual, Rich, the screen: a million objects) out of the collector's sight. A
    full collection walked all of them, 70-120 ms with the UI's loop held: the log flood's
    worst lags (issue 23). Later collections see only what was made since. Returns whether
    it froze (a second app in the same process, a test's, does not)."""
    global _heap_settled
    if _heap_settled:
        return False
    _heap_settled = True
    gc.collect()
    gc.freeze()
    return True


class ConsoleApp(App[int]):
    """The single-host console: it shows one `HostScreen` (console/host_screen.py), which holds
    the panes, bindings, help, palette commands and notices. `control` is what actions go
    through (None: a replay, nothing can be asked); `start` runs once the app is mounted (the
    runner connecting, or a replay playing)."""

    TITLE = "gpuconsole"
    CSS_PATH = str(stylesheet_path())
    # A priority binding of the app: a modal screen (the swap plan, the fit view) hides the app's
    # ordinary bindings, so without priority ctrl+s did nothing there.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "screenshot", "Screenshot", id="screenshot", tooltip="Save an SVG screenshot",
                priority=True)]

    def __init__(self, state: HostState, control: HostControl | None = None, *,
                 start: Callable[[], Awaitable[Any]] | None = None, close: Callable[[], Awaitable[Any]] | None = None,
                 screenshot: str | None = None, screenshot_after_s: float | None = None,
                 mode: str | None = None, recorder: Any = None, follow: bool = False) -> None:
        super().__init__()
        self.state = state
        self._start = start
        self._close = close
        self.mode = mode  # "replay", "attach": said in the header
        self._screenshot = screenshot
        self._screenshot_after_s = screenshot_after_s
        self.runner: Any = None
        self.recorder: Any = recorder
        self.host_screen = HostScreen(state, control, mode=mode, recorder=recorder, follow=follow)

    @classmethod
    def for_session(cls, session: Any, *, record: bool = False, record_dir: Path | None = None,
                    **kwargs: Any) -> ConsoleApp:
        """The usual console: a HostState for the session's host, its runner as the control,
        and (with `record`) the session recorded."""
        from console.core.recording import Recorder
        from console.core.runner import HostRunner
        from console.swap.controller import SwapController

        state = HostState(session.profile.host or "local", label=session.transport.label, demo=session.demo)
        runner = HostRunner(session, state, swap=SwapController)
        # The recorder first: the session's first event (the host, which panes have no source,
        # read-only) is in the recording (issue 20).
        recorder = Recorder(state, record_dir).start() if record else None
        runner.announce()

        async def close() -> None:
            await runner.close()
            if recorder is not None:
                recorder.close()

        app = cls(state, runner, start=runner.start, close=close, recorder=recorder, **kwargs)
        app.runner = runner
        return app

    def get_default_screen(self) -> Screen[Any]:
        return self.host_screen

    # -- what the host screen holds (kept here for callers that hold the app) ----------------
    @property
    def control(self) -> HostControl:
        return self.host_screen.control

    @control.setter
    def control(self, control: HostControl | None) -> None:
        self.host_screen.control = control

    @property
    def header(self) -> HostHeader:
        return self.host_screen.header

    def pane(self, key: str) -> Widget:
        return self.host_screen.pane(key)

    def _mounted_pane(self, key: str) -> Widget | None:
        return self.host_screen._mounted_pane(key)

    def action_swap_plan(self) -> None:
        self.host_screen.action_swap_plan()

    def action_swap_report(self) -> None:
        self.host_screen.action_swap_report()

    def action_fit(self) -> None:
        self.host_screen.action_fit()

    def start_bench(self, kind: str, plan: list[tuple[int, int, int, int]] | None = None) -> None:
        self.host_screen.start_bench(kind, plan)

    # -- lifecycle -----------------------------------------------------------------------
    def on_mount(self) -> None:
        self.call_after_refresh(settle_heap)  # after the first frame: the screen's objects frozen too
        if self._start is not None:
            self.run_worker(self._start(), group="host", exit_on_error=False)
        if self._screenshot and self._screenshot_after_s is not None:
            self.set_timer(self._screenshot_after_s, self._take_screenshot_and_exit)

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        worker_failed(self, event)

    async def on_unmount(self) -> None:
        self.workers.cancel_all()
        if self._close is not None:
            try:
                await asyncio.wait_for(self._close(), 4)
            except asyncio.TimeoutError:
                pass

    def action_show_help_panel(self) -> None:
        from textual.widgets import HelpPanel, Static

        super().action_show_help_panel()
        for panel in self.screen.query(HelpPanel):
            if not panel.query(".close-hint"):
                panel.mount(Static("[b]escape[/b] closes this panel", classes="close-hint"), before=0)

    def action_screenshot(self) -> None:
        save_screenshot(self)

    def _take_screenshot_and_exit(self) -> None:
        assert self._screenshot
        save_screenshot_to(self, self._screenshot)
        self.exit(0)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from host_commands(self, screen, super().get_system_commands(screen))
