"""The messages that carry data from source workers to the app. Only the app's workers post them."""

from __future__ import annotations

from typing import Any

from textual.message import Message

from console.model import Reading
from console.transport.base import ConnectionState


class ReadingReady(Message, bubble=False):
    """A source's latest Reading; a backlog collapses to the newest one per source."""

    def __init__(self, source: str, reading: Reading[Any]) -> None:
        super().__init__()
        self.source = source
        self.reading = reading

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ReadingReady) and message.source == self.source


class ConnectionChanged(Message, bubble=False):
    def __init__(self, state: ConnectionState) -> None:
        super().__init__()
        self.state = state

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ConnectionChanged)


class LogLinesReady(Message, bubble=False):
    """A batch of parsed log lines. Never replaced or dropped: every line reaches the pane."""

    def __init__(self, events: tuple[Any, ...]) -> None:
        super().__init__()
        self.events = events


class BenchEvent(Message, bubble=False):
    """Posted from the bench thread: progress of run `index`, its result, or the end of all runs."""

    def __init__(self, kind: str, index: int = 0, payload: Any = None) -> None:
        super().__init__()
        self.kind = kind  # "progress", "result" or "done"
        self.index = index
        self.payload = payload
