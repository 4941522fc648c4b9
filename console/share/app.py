"""The console as a participant of a shared session: the usual app and host screen (whose header
says who is attached and who drives, whose palette has the pairing commands and follow mode);
this app adds leaving when the core goes.

Used by `gpuconsole attach` (state: a mirror; control: `RemoteControl`), the browser
(textual-serve runs the attach app) and `gpuconsole --share` (state: the core's own; control: a
`LocalSeat`). Either way the core decides what is allowed.
"""

from __future__ import annotations

from typing import Any

from console.app import ConsoleApp
from console.core.control import HostControl
from console.core.state import Client
from console.host_screen import NoteScreen  # noqa: F401  (its home moved to the host screen)

CORE_GONE_EXIT = 3


class SharedConsoleApp(ConsoleApp):
    """`seat` is the control (kept as a name for callers): one `HostControl` does the host's
    actions and the pairing requests alike."""

    def __init__(self, state: Any, control: HostControl | None, *, seat: HostControl | None = None,
                 follow: bool = False, exit_when_core_goes: bool = True, **kwargs: Any) -> None:
        super().__init__(state, control if control is not None else seat, follow=follow, **kwargs)
        self.exit_when_core_goes = exit_when_core_goes
        self.core_gone: str | None = None
        # `--share`: the socket others attach to (the header shows it) and what was said of it
        # (the invites' files), on screen while sharing (issue 35, item 3).
        self.share_address: str | None = None
        self.share_lines: tuple[str, ...] = ()

    def on_ready(self) -> None:
        for line in self.share_lines[1:]:  # the invites: where each file is, said once, for a while
            self.notify(line, title="pairing: invite", timeout=60, markup=False)

    @property
    def seat(self) -> HostControl:
        return self.control

    @seat.setter
    def seat(self, seat: HostControl | None) -> None:
        self.control = seat

    @property
    def follow(self) -> bool:
        return self.host_screen.follow

    # -- who am I ----------------------------------------------------------------------------
    @property
    def me(self) -> Client | None:
        return next((c for c in self.state.presence.clients if c.id == self.control.client_id), None)

    @property
    def driving(self) -> bool:
        return self.host_screen.driving

    def core_lost(self, why: str) -> None:
        """The core went away (its socket closed): say so, then leave (or, with --wait, the CLI
        waits for it)."""
        self.core_gone = why
        self.notify(why, title="pairing", severity="error", timeout=10, markup=False)
        if self.exit_when_core_goes:
            self.set_timer(2.0, lambda: self.exit(CORE_GONE_EXIT))

    # -- the pairing commands live on the host screen; these names are kept for callers -------
    def action_toggle_follow(self) -> None:
        self.host_screen.action_toggle_follow()

    def action_set_note(self) -> None:
        self.host_screen.action_set_note()

    def action_ask_drive(self) -> None:
        self.host_screen.action_ask_drive()

    def hand_over(self, to: int) -> None:
        self.host_screen.hand_over(to)

    def accept(self, client: int) -> None:
        self.host_screen.accept(client)
