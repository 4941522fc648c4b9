"""The console as a participant of a shared session: the usual app, plus who is attached and who
drives (header), the pairing commands (palette), follow mode, and leaving when the core goes.

Used by `gpuconsole attach` (state: a mirror; control: `RemoteControl`) and `gpuconsole --share`
(state: the core's own; control: a `LocalSeat`). Either way the core decides what is allowed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Protocol

from textual import on
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Label

from console.app import ConsoleApp, StateChanged
from console.core.state import Client, NoteChanged, Presence

CORE_GONE_EXIT = 3


class Seat(Protocol):
    """What a participant may ask of the share server besides the host actions."""

    client_id: int

    def set_note(self, text: str) -> str | None: ...
    def hand_over(self, to: int) -> str | None: ...
    def ask_drive(self) -> str | None: ...
    def accept(self, client: int) -> str | None: ...
    def set_view(self, pane: str | None) -> None: ...


class NoteScreen(ModalScreen[str | None]):
    """One line, shared with everyone attached."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    NoteScreen { align: center middle; }
    NoteScreen > Vertical { width: 80; max-width: 95%; height: auto; border: round $accent;
        background: $surface; padding: 0 1; }
    """

    def __init__(self, current: str) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Shared note (everyone attached sees it; empty clears it)")
            yield Input(self.current, id="note-input", max_length=200)

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class SharedConsoleApp(ConsoleApp):
    def __init__(self, state: Any, control: Any, *, seat: Seat, follow: bool = False,
                 exit_when_core_goes: bool = True, **kwargs: Any) -> None:
        super().__init__(state, control, **kwargs)
        self.seat = seat
        self.follow = follow
        self.exit_when_core_goes = exit_when_core_goes
        self.core_gone: str | None = None
        self._view_sent: str | None = None
        self._main: Any = None  # the console's own screen (set at mount), not a modal on top of it

    # -- who am I ----------------------------------------------------------------------------
    @property
    def me(self) -> Client | None:
        return next((c for c in self.state.presence.clients if c.id == self.seat.client_id), None)

    @property
    def driving(self) -> bool:
        me = self.me
        return me is not None and me.role == "driver"

    def on_mount(self) -> None:  # Textual also runs ConsoleApp.on_mount
        self.header.me = self.seat.client_id
        self._main = self.screen
        # However the pane got maximized or restored (number key, escape, palette): tell the core.
        self.watch(self._main, "maximized", lambda _: self._send_view(), init=False)

    def on_state_changed(self, message: StateChanged) -> None:  # ConsoleApp's handler runs too
        if isinstance(message.event, (Presence, NoteChanged)):
            self.header.refresh_state()
            if isinstance(message.event, Presence) and self.follow:
                self._follow_driver()

    def core_lost(self, why: str) -> None:
        """The core went away (its socket closed): say so, then leave (or, with --wait, the CLI
        waits for it)."""
        self.core_gone = why
        self.notify(why, title="pairing", severity="error", timeout=10)
        if self.exit_when_core_goes:
            self.set_timer(2.0, lambda: self.exit(CORE_GONE_EXIT))

    # -- views -------------------------------------------------------------------------------
    def _maximized_key(self) -> str | None:
        widget = self._main.maximized
        wid = widget.id if widget is not None else None
        return wid[:-5] if wid and wid.endswith("-pane") else None

    def _send_view(self) -> None:
        key = self._maximized_key()
        if key != self._view_sent:
            self._view_sent = key
            self.seat.set_view(key)

    def _follow_driver(self) -> None:
        driver = self.state.driver
        if driver is None or driver.id == self.seat.client_id:
            return
        if driver.view == self._maximized_key():
            return
        if driver.view is None:
            self._main.minimize()
        else:
            pane = self._mounted_pane(driver.view)
            if pane is not None:
                self._main.maximize(pane, container=False)

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        self.notify("following the driver's view" if self.follow else "your own view again", title="follow")
        if self.follow:
            self._follow_driver()

    # -- pairing commands --------------------------------------------------------------------
    def _said(self, title: str, why: str | None) -> None:
        if why:
            self.notify(why, title=title, severity="warning")

    def action_set_note(self) -> None:
        current = self.state.note.text if self.state.note is not None else ""

        def done(text: str | None) -> None:
            if text is not None:
                self._said("note", self.seat.set_note(text))

        self.push_screen(NoteScreen(current), done)

    def action_ask_drive(self) -> None:
        self._said("driver", self.seat.ask_drive())

    def hand_over(self, to: int) -> None:
        self._said("driver", self.seat.hand_over(to))

    def accept(self, client: int) -> None:
        self._said("driver", self.seat.accept(client))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Set the shared note", "One line everyone attached sees", self.action_set_note)
        yield SystemCommand("Follow the driver's view" if not self.follow else "Stop following the driver",
                            "Mirror the pane the driver has maximized", self.action_toggle_follow)
        presence = self.state.presence
        if not self.driving:
            yield SystemCommand("Ask to drive", "The driver accepts from the palette", self.action_ask_drive)
            return
        for client in presence.clients:
            if client.id == self.seat.client_id:
                continue
            if client.id in presence.asking:
                yield SystemCommand(f"Accept: {client.name} drives", f"{client.name} asked to drive",
                                    lambda c=client.id: self.accept(c))
            yield SystemCommand(f"Hand over driving to {client.name}", "You observe afterwards",
                                lambda c=client.id: self.hand_over(c))
