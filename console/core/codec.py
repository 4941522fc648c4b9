"""The one encoding of readings and events: JSON through msgspec.

msgspec, because it encodes and decodes our frozen, slotted dataclasses as they are (no schema
classes to keep in step, no base class to inherit), validates types on the way in (a reading
from another version or a damaged recording is an error, not a half-filled object), handles
generics (`Reading[GpuStatus]`), and is fast enough for a 20k lines/s log flood (≈1 µs an event).
pydantic would need a model per type or a slower dataclass adapter; cattrs needs hand-written
hooks for the unions here.

The same bytes feed `snapshot --json`, the recordings, the attach protocol and the reports.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Generic, TypeVar

import msgspec

from console.domain.analysis.download import DownloadProgress
from console.domain.analysis.log_state import LogSummary
from console.domain.analysis.server_status import ServerStatus
from console.domain.analysis.service_report import ServiceReport
from console.domain.bench.runner import Progress
from console.core.events import (
    EVENT_TYPES,
    BenchChanged,
    Event,
    ReadingChanged,
    StateSnapshot,
    VerifyChanged,
)
from console.model import GpuStatus, HostSummary, Reading
from console.host.parsers.router import RouterReading
from console.host.parsers.sglang_log import LogEvent
from console.host.sources.download import VerifyProgress
from console.host.transport.base import ConnectionState

# What each source's Reading holds: the decoder needs the concrete type.
SOURCE_TYPES: dict[str, type[Any]] = {
    "host": HostSummary,
    "gpu": GpuStatus,
    "download": DownloadProgress,
    "service": ServiceReport,
    "server": ServerStatus,
    "log": LogSummary,
    "router": RouterReading,
}

# The wire tag of every event, from its one declaration (console/core/events.py). The tags are the
# format of every recording and of the share protocol: an event's tag never changes.
EVENT_KINDS: dict[str, type[Any]] = dict(EVENT_TYPES)
KIND_OF: dict[type[Any], str] = {v: k for k, v in EVENT_KINDS.items()}


class DecodeError(ValueError):
    """Bytes that are not an event of this version (damaged, truncated or foreign)."""


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, float) and obj != obj:  # pragma: no cover - msgspec encodes NaN as null
        return None
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


_encoder = msgspec.json.Encoder(enc_hook=_enc_hook)


class _Head(msgspec.Struct):
    event: str
    source: str | None = None


def to_builtins(value: Any) -> Any:
    """A reading or event as plain JSON types (dicts, lists, numbers, strings)."""
    return msgspec.to_builtins(value, enc_hook=_enc_hook)


def encode_reading(reading: Reading[Any]) -> bytes:
    return _encoder.encode(reading)


def decode_reading(source: str, data: bytes) -> Reading[Any]:
    kind = SOURCE_TYPES.get(source)
    if kind is None:
        raise DecodeError(f"unknown source {source!r}")
    try:
        return msgspec.json.decode(data, type=Reading[kind])  # type: ignore[valid-type]
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise DecodeError(f"{source} reading: {exc}") from None


def encode_event_into(event: Event, out: bytearray) -> None:
    """The event's JSON appended to `out`, encoded once, straight from the event (no tree of dicts
    of it first, no copy after): a recording's snapshot of the whole state is megabytes, written
    every few minutes. Its tag comes first: `{"event":"log","host":…}`."""
    kind = KIND_OF.get(type(event))
    if kind is None:
        raise TypeError(f"not an event: {type(event).__name__}")
    out += b'{"event":"%s"' % kind.encode()
    start = len(out)
    _encoder.encode_into(event, out, start)
    # the event's own object follows the tag in the same object: its "{" becomes the comma
    if out[start + 1] == 0x7D:  # "{}": an event without fields
        del out[start]
    else:
        out[start] = 0x2C


def encode_event(event: Event) -> bytes:
    out = bytearray()
    encode_event_into(event, out)
    return bytes(out)


def _event_type(head: _Head) -> type[Any]:
    kind = EVENT_KINDS.get(head.event)
    if kind is None:
        raise DecodeError(f"unknown event {head.event!r}")
    return kind


def decode_event(data: bytes | str) -> Event:
    """One event from its JSON; `DecodeError` (one line) for anything else."""
    try:
        head = msgspec.json.decode(data, type=_Head)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise DecodeError(f"not an event: {exc}") from None
    kind = _event_type(head)
    try:
        if kind is ReadingChanged:
            source_type = SOURCE_TYPES.get(head.source or "")
            if source_type is None:
                raise DecodeError(f"unknown source {head.source!r}")
            return msgspec.json.decode(data, type=_TypedReadingChanged[source_type]).as_event()  # type: ignore
        if kind is StateSnapshot:
            return _decode_snapshot(data)
        typed = _TYPED.get(kind)
        if typed is not None:  # an event with a field the state types as Any: decoded as its concrete type
            return kind(**msgspec.structs.asdict(msgspec.json.decode(data, type=typed)))  # type: ignore[no-any-return]
        event: Event = msgspec.json.decode(data, type=kind)
        return event
    except (msgspec.DecodeError, msgspec.ValidationError, TypeError) as exc:
        raise DecodeError(f"{head.event} event: {exc}") from None


def _typed(event_type: type[Any], **concrete: Any) -> type[msgspec.Struct]:
    """A Struct with the fields of `event_type` as declared in console/core/events.py (names, order,
    defaults), the ones named in `concrete` given the concrete type the codec decodes them as (the
    events keep `Any` there: the state stays free of the sources' and the benchmark's types)."""
    hints = typing.get_type_hints(event_type)
    fields: list[tuple[str, Any, Any]] = []
    for f in dataclasses.fields(event_type):
        kind = concrete.get(f.name, hints[f.name])
        if f.default is not dataclasses.MISSING:
            fields.append((f.name, kind, f.default))
        elif f.default_factory is not dataclasses.MISSING:
            fields.append((f.name, kind, msgspec.field(default_factory=f.default_factory)))
        else:
            fields.append((f.name, kind, msgspec.NODEFAULT))
    return msgspec.defstruct(f"_Typed{event_type.__name__}", fields)


_TYPED: dict[type[Any], type[msgspec.Struct]] = {
    VerifyChanged: _typed(VerifyChanged, progress=VerifyProgress | None),
    BenchChanged: _typed(BenchChanged, progress=Progress | None),
}
# A snapshot's readings are decoded each by its source's type (below), its verification as one.
_TypedSnapshot = _typed(StateSnapshot, readings=tuple[tuple[str, msgspec.Raw], ...], verify=VerifyProgress | None)


def _decode_snapshot(data: bytes | str) -> StateSnapshot:
    raw = msgspec.json.decode(data, type=_TypedSnapshot)
    fields = msgspec.structs.asdict(raw)
    # Each reading by its source's type; one of a source this version does not know is left out.
    fields["readings"] = tuple((source, decode_reading(source, bytes(body))) for source, body in fields["readings"]
                               if source in SOURCE_TYPES)
    return StateSnapshot(**fields)


T = TypeVar("T")


class _TypedReadingChanged(msgspec.Struct, Generic[T]):
    host: str
    source: str
    reading: Reading[T]

    def as_event(self) -> ReadingChanged:
        return ReadingChanged(self.host, self.source, self.reading)


__all__ = ["SOURCE_TYPES", "EVENT_KINDS", "DecodeError", "encode_event", "encode_event_into", "decode_event",
           "encode_reading", "decode_reading", "to_builtins", "ConnectionState", "LogEvent"]
