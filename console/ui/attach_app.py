"""The console as a participant of a shared session is the console itself (console/ui/app.py's one
App): its host screen's header says who is attached and who drives, its palette has the pairing
commands and follow mode, and the app leaves when the core goes.

Used by `gpuconsole attach` (state: a mirror; control: `RemoteControl`), the browser
(textual-serve runs the attach app) and `gpuconsole --share` (state: the core's own; control: a
`LocalSeat`). Either way the core decides what is allowed. These names are kept for callers.
"""

from __future__ import annotations

from console.ui.app import CORE_GONE_EXIT, ConsoleApp, SharedConsoleApp
from console.ui.host_screen import NoteScreen

__all__ = ["CORE_GONE_EXIT", "ConsoleApp", "SharedConsoleApp", "NoteScreen"]
