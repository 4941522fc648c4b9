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

from typing import Any

import msgspec

from console.analysis.bench_view import BenchData
from console.analysis.download import DownloadProgress
from console.analysis.log_state import LogSummary
from console.analysis.server_status import ServerStatus
from console.analysis.service_report import ServiceReport
from console.bench.runner import Progress
from console.core.state import (  # pairing (issue 12)
    BenchChanged,
    ConnectionChanged,
    Event,
    HostInfo,
    LogAppended,
    NoteChanged,
    Notice,
    Presence,
    ReadingChanged,
    StateSnapshot,
    VerifyChanged,
)
from console.model import GpuStatus, HostSummary, Reading
from console.parsers.sglang_log import LogEvent
from console.sources.download import VerifyProgress
from console.swap.downtime_model import PathEvent
from console.swap.model import (
    ApprovalChanged,
    AuditAppended,
    DowntimeChanged,
    GateChanged,
    SwapData,
    SwapSetup,
    SwapStepChanged,
)
from console.transport.base import ConnectionState

# What each source's Reading holds: the decoder needs the concrete type.
SOURCE_TYPES: dict[str, type[Any]] = {
    "host": HostSummary,
    "gpu": GpuStatus,
    "download": DownloadProgress,
    "service": ServiceReport,
    "server": ServerStatus,
    "log": LogSummary,
}

EVENT_KINDS: dict[str, type[Any]] = {
    "host": HostInfo,
    "reading": ReadingChanged,
    "log": LogAppended,
    "connection": ConnectionChanged,
    "notice": Notice,
    "verify": VerifyChanged,
    "bench": BenchChanged,
    "presence": Presence,  # pairing (issue 12)
    "note": NoteChanged,
    # the swap (issue 13): every field typed, so the generic decode path takes them as they are
    "swap_step": SwapStepChanged,
    "swap_gate": GateChanged,
    "swap_downtime": DowntimeChanged,
    "swap_approval": ApprovalChanged,
    "swap_audit": AuditAppended,
    "swap_setup": SwapSetup,
    "snapshot": StateSnapshot,  # the whole state (issue 20)
    "swap_path": PathEvent,  # issue 24: the path plan, pre-warm, outcome (console/swap/downtime_model.py)
}
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


def encode_event(event: Event) -> bytes:
    kind = KIND_OF.get(type(event))
    if kind is None:
        raise TypeError(f"not an event: {type(event).__name__}")
    body = to_builtins(event)
    body["event"] = kind
    return _encoder.encode(body)


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
        if kind is VerifyChanged:
            return VerifyChanged(**msgspec.structs.asdict(msgspec.json.decode(data, type=_TypedVerify)))
        if kind is StateSnapshot:
            return _decode_snapshot(data)
        if kind is BenchChanged:
            raw = msgspec.json.decode(data, type=_TypedBench)
            fields = msgspec.structs.asdict(raw)
            return BenchChanged(**fields)
        event: Event = msgspec.json.decode(data, type=kind)
        return event
    except (msgspec.DecodeError, msgspec.ValidationError, TypeError) as exc:
        raise DecodeError(f"{head.event} event: {exc}") from None


# Typed mirrors of the events whose fields are `Any` in the state (the state stays free of the
# codec's needs; the codec knows the concrete types).
class _TypedVerify(msgspec.Struct, forbid_unknown_fields=False):
    host: str
    progress: VerifyProgress | None


class _TypedBench(msgspec.Struct):
    host: str
    kind: str
    label: str | None = None
    total: int | None = None
    progress: Progress | None = None
    record: dict[str, Any] | None = None
    error: str | None = None
    runs: tuple[dict[str, Any], ...] = ()


class _TypedSnapshot(msgspec.Struct):
    host: str
    at_s: float
    info: HostInfo
    readings: tuple[tuple[str, msgspec.Raw], ...] = ()
    connection: ConnectionState | None = None
    log_lines: tuple[LogEvent, ...] = ()
    log_lines_total: int = 0
    notices: tuple[Notice, ...] = ()
    verify: VerifyProgress | None = None
    bench: BenchData = BenchData()
    swap: SwapData = SwapData()
    presence: Presence | None = None
    note: NoteChanged | None = None


def _decode_snapshot(data: bytes | str) -> StateSnapshot:
    raw = msgspec.json.decode(data, type=_TypedSnapshot)
    fields = msgspec.structs.asdict(raw)
    # Each reading by its source's type; one of a source this version does not know is left out.
    fields["readings"] = tuple((source, decode_reading(source, bytes(body))) for source, body in raw.readings
                               if source in SOURCE_TYPES)
    return StateSnapshot(**fields)


from typing import Generic, TypeVar  # noqa: E402

T = TypeVar("T")


class _TypedReadingChanged(msgspec.Struct, Generic[T]):
    host: str
    source: str
    reading: Reading[T]

    def as_event(self) -> ReadingChanged:
        return ReadingChanged(self.host, self.source, self.reading)


__all__ = ["SOURCE_TYPES", "EVENT_KINDS", "DecodeError", "encode_event", "decode_event", "encode_reading",
           "decode_reading", "to_builtins", "ConnectionState", "LogEvent"]
