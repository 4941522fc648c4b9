"""The console's one App: a `HostScreen` (console/ui/host_screen.py) for one host, a `FleetScreen`
(console/ui/fleet_screen.py) for N, whose Enter opens the same HostScreen. The screens hold the panes,
bindings, help, palette and notices, and ask a host only through a `HostControl`
(console/core/control.py); the app starts and stops the workers, saves screenshots, and, in a
shared session (`attach`, the browser, `--share`), says who is attached and leaves when the core
goes. The console, attach, replay, the fleet and the browser all run this one class."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from textual import on
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import HelpPanel, Static
from textual.worker import Worker

from console.core.control import HostControl, NoControl
from console.core.recording import Recorder
from console.core.runner import HostRunner
from console.core.state import Client, HostState
from console.domain.deploy.recording import DeploymentRecorder
from console.domain.deploy.swap import DeploymentSwap, format_report
from console.domain.swap.controller import SwapController, audit_path, default_who
from console.locations import stylesheet
from console.ui.deploy_screen import DeploymentScreen
from console.ui.fleet_screen import FleetScreen
from console.ui.host_screen import (  # noqa: F401  (help_text and HelpScreen: imported from here too)
    HelpScreen,
    HostScreen,
    NoteScreen,
    help_text,
    host_commands,
    save_screenshot,
    save_screenshot_to,
    worker_failed,
)
from console.ui.panes.header import HostHeader


def stylesheet_path() -> Path:
    return stylesheet()


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


CORE_GONE_EXIT = 3  # `attach`'s exit status when the core it mirrored went away


class ConsoleApp(App[int]):
    """The console: one `HostScreen` for one host (`state`), or the `FleetScreen` first for N
    (`ConsoleApp.for_fleet`; Enter opens a host's HostScreen, escape comes back). `control` is
    what a host's actions go through (None: a replay, nothing can be asked); `start` runs once the
    app is mounted (the runner connecting, a replay playing, the fleet's workers). In a shared
    session `control` also carries the pairing requests (`seat` is its other name)."""

    TITLE = "gpuconsole"
    CSS_PATH = str(stylesheet_path())
    # A priority binding of the app: a modal screen (the swap plan, the fit view) hides the app's
    # ordinary bindings, so without priority ctrl+s did nothing there.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "screenshot", "Screenshot", id="screenshot", tooltip="Save an SVG screenshot",
                priority=True)]

    def __init__(self, state: HostState | None, control: HostControl | None = None, *,
                 start: Callable[[], Awaitable[Any]] | None = None, close: Callable[[], Awaitable[Any]] | None = None,
                 screenshot: str | None = None, screenshot_after_s: float | None = None,
                 mode: str | None = None, recorder: Any = None, follow: bool = False,
                 seat: HostControl | None = None, exit_when_core_goes: bool = True,
                 fleet: Sequence[HostState] | None = None, host_for: Callable[[str], Any] | None = None,
                 title: str = "fleet", deployment_lines: Callable[[], list[str]] | None = None,
                 first_screen: Screen[Any] | None = None) -> None:
        super().__init__()
        self.state = state
        self._start = start
        self._close = close
        self._close_task: asyncio.Task[Any] | None = None  # the close, once started (`exit`)
        self.mode = mode  # "replay", "attach", "fleet": said in the header
        self._screenshot = screenshot
        self._screenshot_after_s = screenshot_after_s
        self.runner: Any = None
        self.recorder: Any = recorder
        # A shared session: leave when the core goes (or, with --wait, the CLI waits for it);
        # `--share`: the socket others attach to and the invites' files, said while sharing.
        self.exit_when_core_goes = exit_when_core_goes
        self.core_gone: str | None = None
        self.share_address: str | None = None
        self.share_lines: tuple[str, ...] = ()
        # The fleet: its states, and (state, control, note) to open for a row's key.
        self.fleet_states = list(fleet) if fleet is not None else []
        self.host_for = host_for
        self.fleet_title = title
        self.fleet_screen: FleetScreen | None = None
        self.host_screen: HostScreen | None = None
        self.first_screen = first_screen  # a deployment's screen: shown first, as a fleet's is
        if first_screen is not None:
            self.bind("q", "quit", description="Quit")
        elif fleet is not None:
            self.title = "gpuconsole fleet"
            self.fleet_screen = FleetScreen(self.fleet_states, self.open_host, title=title,
                                            deployment_lines=deployment_lines)
            self.bind("q", "quit", description="Quit")
        else:
            assert state is not None, "one host's state, or the fleet's, or a first screen"
            self.host_screen = HostScreen(state, control if control is not None else seat, mode=mode,
                                          recorder=recorder, follow=follow)

    @classmethod
    def for_fleet(cls, states: Sequence[HostState], *, host_for: Callable[[str], Any] | None = None,
                  start: Callable[[], Any] | None = None, close: Callable[[], Any] | None = None,
                  title: str = "fleet", screenshot: str | None = None,
                  screenshot_after_s: float | None = None,
                  deployment_lines: Callable[[], list[str]] | None = None) -> ConsoleApp:
        """The fleet console: the fleet screen first; Enter opens a host. `host_for(key)` gives the
        (state, control, note) to open for a row; `start`/`close` run the fleet's workers;
        `deployment_lines` each deployment whose hosts the fleet holds, as one row with its nodes."""
        return cls(None, start=start, close=close, screenshot=screenshot, screenshot_after_s=screenshot_after_s,
                   mode="fleet", fleet=states, host_for=host_for, title=title, deployment_lines=deployment_lines)

    @classmethod
    def for_deployment(cls, watch: Any, *, screenshot: str | None = None, screenshot_after_s: float = 3.0,
                       demo: bool = False, share: bool = False, attached: bool = False, record: bool = False,
                       record_dir: Path | None = None, invite: tuple[str, ...] = (),
                       web: tuple[str, int] | None = None) -> ConsoleApp:
        """`gpuconsole --deployment NAME`: the deployment's screen first (it starts the watch: every
        node's session and probe); every node closed on quit. `share`: served to `gpuconsole attach
        --deployment NAME`; `attached`: the watch is such an attached one (it only watches, and approves)."""
        own = watch.audit_file  # a demo run's own log, else the user's
        swap = None if attached else DeploymentSwap(watch, who=default_who(), audit_file=own or audit_path(demo=demo))
        screen = DeploymentScreen(watch, swap, start_watch=True, share=share, invite=invite, web=web,
                                  approver=watch.approve if attached else None)
        # recorded as a host session is (each node's HostState, the probes, the swaps' reports)
        recorder = DeploymentRecorder(watch, record_dir).start() if record and swap is not None else None
        if recorder is not None and swap is not None:
            swap.on_end.append(lambda run: recorder.swap_ended(run.outcome, format_report(run, watch.deployment)))

        async def close() -> None:
            await screen.close_share()
            await watch.close()
            if recorder is not None:
                recorder.close()

        app = cls(None, close=close, screenshot=screenshot, screenshot_after_s=screenshot_after_s,
                  mode="deployment", first_screen=screen)
        app.title = "gpuconsole · deployment"
        return app

    @classmethod
    def for_deployment_replay(cls, watch: Any, *, screenshot: str | None = None,
                              screenshot_after_s: float | None = None) -> ConsoleApp:
        """`gpuconsole replay DIR` of a deployment recording: its screen as it was (nothing can be asked)."""
        screen = DeploymentScreen(watch, None, start_watch=True, report=watch.report)
        app = cls(None, close=watch.close, screenshot=screenshot, screenshot_after_s=screenshot_after_s or 3.0,
                  mode="deployment", first_screen=screen)
        app.title = "gpuconsole · deployment replay"
        return app

    @classmethod
    def for_session(cls, session: Any, *, record: bool = False, record_dir: Path | None = None,
                    **kwargs: Any) -> ConsoleApp:
        """The usual console: a HostState for the session's host, its runner as the control,
        and (with `record`) the session recorded."""
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
        return self.host_screen if self.host_screen is not None else super().get_default_screen()

    def open_host(self, key: str) -> None:
        """A fleet row's host, in the one host screen the single-host console shows; escape
        comes back to the fleet."""
        if self.host_for is None:
            return
        found = self.host_for(key)
        if found is None:
            self.notify(f"{key}: nothing to open", severity="warning", markup=False)
            return
        state, control, note = found
        self.push_screen(HostScreen(state, control if control is not None else NoControl(
            "no SSH session to this host (a Prometheus row): nothing can be asked of it"), back=True, note=note))

    # -- what the host screen holds (kept here for callers that hold the app) ----------------
    @property
    def screen_of_host(self) -> HostScreen:
        assert self.host_screen is not None, "a fleet console has a host screen per opened row"
        return self.host_screen

    @property
    def control(self) -> HostControl:
        return self.screen_of_host.control

    @control.setter
    def control(self, control: HostControl | None) -> None:
        self.screen_of_host.control = control

    @property
    def seat(self) -> HostControl:
        return self.control

    @seat.setter
    def seat(self, seat: HostControl | None) -> None:
        self.control = seat

    @property
    def header(self) -> HostHeader:
        return self.screen_of_host.header

    def pane(self, key: str) -> Widget:
        return self.screen_of_host.pane(key)

    def _mounted_pane(self, key: str) -> Widget | None:
        return self.screen_of_host._mounted_pane(key)

    def action_swap_plan(self) -> None:
        self.screen_of_host.action_swap_plan()

    def action_swap_report(self) -> None:
        self.screen_of_host.action_swap_report()

    def action_fit(self) -> None:
        self.screen_of_host.action_fit()

    def start_bench(self, kind: str, plan: list[tuple[int, int, int, int]] | None = None) -> None:
        self.screen_of_host.start_bench(kind, plan)

    # -- a shared session: who am I, the pairing commands (they live on the host screen) ------
    @property
    def follow(self) -> bool:
        return self.screen_of_host.follow

    @property
    def me(self) -> Client | None:
        if self.state is None:
            return None
        return next((c for c in self.state.presence.clients if c.id == self.control.client_id), None)

    @property
    def driving(self) -> bool:
        return self.screen_of_host.driving

    def core_lost(self, why: str) -> None:
        """The core went away (its socket closed): say so, then leave (or, with --wait, the CLI
        waits for it)."""
        self.core_gone = why
        self.notify(why, title="pairing", severity="error", timeout=10, markup=False)
        if self.exit_when_core_goes:
            self.set_timer(2.0, lambda: self.exit(CORE_GONE_EXIT))

    def action_toggle_follow(self) -> None:
        self.screen_of_host.action_toggle_follow()

    def action_set_note(self) -> None:
        self.screen_of_host.action_set_note()

    def action_ask_drive(self) -> None:
        self.screen_of_host.action_ask_drive()

    def hand_over(self, to: int) -> None:
        self.screen_of_host.hand_over(to)

    def accept(self, client: int) -> None:
        self.screen_of_host.accept(client)

    # -- lifecycle -----------------------------------------------------------------------
    def on_mount(self) -> None:
        self.call_after_refresh(settle_heap)  # after the first frame: the screen's objects frozen too
        if self.fleet_screen is not None:
            self.push_screen(self.fleet_screen)
        if self.first_screen is not None:
            self.push_screen(self.first_screen)
        if self._start is not None:
            self.run_worker(self._start(), group="fleet" if self.fleet_screen is not None else "host",
                            exit_on_error=False)
        if self._screenshot and self._screenshot_after_s is not None:
            self.set_timer(self._screenshot_after_s, self._take_screenshot_and_exit)

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        worker_failed(self, event)

    def on_ready(self) -> None:
        for line in self.share_lines[1:]:  # `--share`'s invites: where each file is, said once, for a while
            self.notify(line, title="pairing: invite", timeout=60, markup=False)

    def exit(self, result: Any = None, return_code: int = 0, message: Any = None) -> None:
        """Leave: the connections start closing now, beside Textual taking the screens down (a
        fleet's 100 hosts started closing only once every screen was gone, 0.6 s after `q`, and
        the app's exit took 2.2 s: issue 36). `on_unmount` waits for that close, bounded."""
        self._start_close()
        super().exit(result, return_code, message)

    def _start_close(self) -> asyncio.Task[Any] | None:
        if self._close is not None and self._close_task is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # exit asked before the app ran: on_unmount closes
                return None
            self._close_task = loop.create_task(self._close())
        return self._close_task

    async def on_unmount(self) -> None:
        self.workers.cancel_all()
        closing = self._start_close()
        if closing is not None:
            try:  # a fleet closes many connections: it is given longer
                await asyncio.wait_for(asyncio.shield(closing), 8 if self.fleet_screen is not None else 4)
            except asyncio.TimeoutError:
                closing.cancel()

    def action_show_help_panel(self) -> None:
        super().action_show_help_panel()
        for panel in self.screen.query(HelpPanel):
            if not panel.query(".close-hint"):
                panel.mount(Static("[b]escape[/b] closes this panel", classes="close-hint"), before=0)

    def action_screenshot(self) -> None:
        if self.fleet_screen is not None:
            save_screenshot(self, "gpuconsole-fleet")
        else:
            save_screenshot(self)

    def _take_screenshot_and_exit(self) -> None:
        assert self._screenshot
        save_screenshot_to(self, self._screenshot)
        self.exit(0)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from host_commands(self, screen, super().get_system_commands(screen))


def FleetApp(states: Sequence[HostState], **kwargs: Any) -> ConsoleApp:  # noqa: N802  (the name callers know)
    """The fleet console: `ConsoleApp.for_fleet` (one App; a single host is a fleet of one)."""
    return ConsoleApp.for_fleet(states, **kwargs)


# A shared session's console is the console (`attach`, the browser, `--share`): the name callers know.
SharedConsoleApp = ConsoleApp
