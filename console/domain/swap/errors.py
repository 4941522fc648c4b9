"""How a swap step ends other than done: failed, refused before anything ran, or its command's
connection dropped (its outcome is re-read from the host). Their own module, below the executor
and every step module, so no step imports the controller (no import cycle inside console/domain/swap)."""

from __future__ import annotations


class StepFailed(Exception):
    """The step failed; the message says where and why (one line)."""


class StepRefused(StepFailed):
    """Refused before anything ran (the gate, the two-person rule): the host is as it was."""


class Dropped(Exception):
    """The connection went away during a command: its outcome must be re-read."""


_Dropped = Dropped  # the controller's name for it

__all__ = ["Dropped", "StepFailed", "StepRefused"]
