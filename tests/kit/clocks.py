"""A clock the test moves by hand, for anything that takes a `clock` callable (HostState, the flush
cadence, the share server): call it for the time, set or add to `t` to move it."""

from __future__ import annotations


class Clock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t
