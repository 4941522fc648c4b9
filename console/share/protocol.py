"""The pairing protocol: how `gpuconsole attach` (and each browser tab) talks to a shared core.

Newline-delimited JSON over a Unix socket (default) or TCP on loopback. Every line is one object
whose `"t"` names its kind. The state's events travel in the core's own codec
(`console.core.codec`), wrapped as `{"t": "event", "e": <event>}`, so a client's state is a
mirror built by the same reducer as the core's.

    client                                   core
    hello {version, name, token}      ->
                                      <-     welcome {version, client, role}   (or: refused {reason})
                                      <-     event … (the state as it is now: host, readings,
                                             log tail, bench, presence, note), then every new event
    <request> {id, …}                 ->
                                      <-     reply {id, error | said}

Requests: verify, swap, pick {new, old}, bench {kind, plan}, stop_bench, note {text},
hand_over {to}, ask_drive, accept {client}, view {pane}, stats (read-only, anyone: the reply's
`said` is a JSON object of the state's sizes, benchmarks/soak.py reads it). The core checks the role: an observer's
verify, swap, pick, bench and stop_bench are refused (`reply.error`), never carried out.

Limits: a client line is at most `MAX_CLIENT_LINE` bytes, at most `RATE_PER_S` a second (burst
`RATE_BURST`); a line that is too long, not JSON, not a known message, or over the rate gets that
client dropped, and only that client. A known request with a bad value (a check name too long, an
unknown bench kind) gets `reply.error` and the client stays. A wrong or missing token (TCP) gets the connection closed
with nothing sent. A client of another version gets `refused` with both versions named.
"""

from __future__ import annotations

import re
import time
from typing import Annotated, Any

import msgspec

from console.core import codec
from console.core.events import Event

VERSION = 2  # 2: the welcome snapshot is one StateSnapshot event (issue 20)
MAX_CLIENT_LINE = 4096  # a request is small; anything longer is not one of ours
MAX_CORE_LINE = 16 << 20  # the longest line a client accepts from the core (a log batch)
RATE_PER_S = 20.0
RATE_BURST = 60
HELLO_TIMEOUT_S = 5.0
LOG_CHUNK = 500  # log lines per event in the welcome snapshot

Name = Annotated[str, msgspec.Meta(max_length=64)]
Text = Annotated[str, msgspec.Meta(max_length=400)]
Pane = Annotated[str, msgspec.Meta(max_length=32)]
Unit = Annotated[str, msgspec.Meta(max_length=256)]
Small = Annotated[int, msgspec.Meta(ge=0, le=1_000_000)]
Id = Annotated[int, msgspec.Meta(ge=0, le=2**53)]

ROLE_DRIVER, ROLE_OBSERVER = "driver", "observer"
# Requests that change the host or load it: only the driver may make them.
DRIVER_ONLY = frozenset({"verify", "swap", "pick", "bench", "stop_bench",
                         "swap_preview", "swap_confirm", "swap_override"})


class ProtocolError(ValueError):
    """A line that is not a message of this protocol (one line, for the log)."""


# -- client -> core --------------------------------------------------------------------------
class _Msg(msgspec.Struct, tag_field="t", forbid_unknown_fields=True, frozen=True):
    pass


class Hello(_Msg, tag="hello"):
    version: int
    name: Name = ""
    token: Annotated[str, msgspec.Meta(max_length=128)] = ""
    # Join as an observer even when nobody drives (a browser tab: the first tab had become the
    # driver; issue 35, item 4). Only ever a restriction, so the client may choose it.
    observe: bool = False


class Verify(_Msg, tag="verify"):
    id: Id


class Swap(_Msg, tag="swap"):
    id: Id


class Pick(_Msg, tag="pick"):
    id: Id
    new: Unit
    old: Unit | None = None


class Bench(_Msg, tag="bench"):
    id: Id
    kind: Annotated[str, msgspec.Meta(pattern="^(quick|sweep)$")] = "quick"
    plan: Annotated[list[tuple[Small, Small, Small, Small]], msgspec.Meta(max_length=16)] | None = None


class StopBench(_Msg, tag="stop_bench"):
    id: Id


class SetNote(_Msg, tag="note"):
    id: Id
    text: Text


class HandOver(_Msg, tag="hand_over"):
    id: Id
    to: Id


class AskDrive(_Msg, tag="ask_drive"):
    id: Id


class Accept(_Msg, tag="accept"):
    id: Id
    client: Id


class View(_Msg, tag="view"):
    """The pane this client has maximized (None: the grid); follow mode mirrors the driver's."""

    id: Id
    pane: Pane | None = None


# -- the swap from the console (issue 13): the driver previews (the core answers with the exact
# commands) and confirms; anyone else attached approves or denies; the requester may withdraw.
# Gate check names have digits (`sha256`): a pattern without them dropped the driver (issue 21, item 6).
StepKey = Annotated[str, msgspec.Meta(max_length=32, pattern="^[a-z0-9_]+$")]
Token = Annotated[str, msgspec.Meta(max_length=64, pattern="^[A-Za-z0-9_-]*$")]


class SwapPreview(_Msg, tag="swap_preview"):
    id: Id
    key: StepKey


class SwapConfirm(_Msg, tag="swap_confirm"):
    id: Id
    preview: Token


class SwapOverride(_Msg, tag="swap_override"):
    id: Id
    check: StepKey
    typed: Text


class SwapDecide(_Msg, tag="swap_decide"):
    id: Id
    request: Token
    decision: Annotated[str, msgspec.Meta(pattern="^(approve|deny|withdraw)$")]


class Stats(_Msg, tag="stats"):
    """How much the core holds (read-only, any role): the reply's `said` is a JSON object."""

    id: Id


Request = (Verify | Swap | Pick | Bench | StopBench | SetNote | HandOver | AskDrive | Accept | View
           | SwapPreview | SwapConfirm | SwapOverride | SwapDecide | Stats)
ClientMessage = (Hello | Verify | Swap | Pick | Bench | StopBench | SetNote | HandOver | AskDrive | Accept | View
                 | SwapPreview | SwapConfirm | SwapOverride | SwapDecide | Stats)
REQUEST_KIND: dict[type[Any], str] = {cls: cls.__struct_config__.tag for cls in Request.__args__}  # type: ignore
REQUEST_KINDS = frozenset(REQUEST_KIND.values())

_client_decoder = msgspec.json.Decoder(ClientMessage)


def decode_client(line: bytes) -> Hello | Request:
    """A client's line; `ProtocolError` for anything else."""
    if len(line) > MAX_CLIENT_LINE:
        raise ProtocolError(f"message of {len(line)} bytes (at most {MAX_CLIENT_LINE})")
    try:
        msg: Hello | Request = _client_decoder.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ProtocolError(str(exc).splitlines()[0][:200]) from None
    return msg


class _Kind(msgspec.Struct):
    t: str
    id: Id


_kind_decoder = msgspec.json.Decoder(_Kind)


def bad_request_id(line: bytes) -> int | None:
    """The id of a line that is one of our requests with a bad value (`swap_override` of a check
    name too long, `bench` of an unknown kind): it gets an error reply, not a drop (issue 21,
    item 6). None for anything else (not JSON, no id, an unknown kind: those are dropped)."""
    try:
        head = _kind_decoder.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return head.id if head.t in REQUEST_KINDS else None


def encode_client(msg: Hello | Request) -> bytes:
    return msgspec.json.encode(msg) + b"\n"


# -- core -> client --------------------------------------------------------------------------
class Welcome(_Msg, tag="welcome"):
    version: int
    client: int
    role: str
    host: str = ""


class Refused(_Msg, tag="refused"):
    reason: str
    version: int = VERSION


class Reply(_Msg, tag="reply"):
    id: int
    error: str | None = None  # refused or failed: why
    said: str | None = None  # done, with something to say ("stopping after the requests in flight")


class EventLine(_Msg, tag="event"):
    e: msgspec.Raw


CoreMessage = Welcome | Refused | Reply | EventLine
_core_decoder = msgspec.json.Decoder(CoreMessage)


def decode_core(line: bytes) -> Welcome | Refused | Reply | EventLine:
    try:
        msg: Welcome | Refused | Reply | EventLine = _core_decoder.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ProtocolError(str(exc).splitlines()[0][:200]) from None
    return msg


def encode_core(msg: Welcome | Refused | Reply) -> bytes:
    return msgspec.json.encode(msg) + b"\n"


_EVENT_HEAD = b'{"t":"event","e":'


def event_frame(event: Event) -> bytearray:
    """The event framed for the wire, encoded once straight into its frame (`codec.encode_event_into`)
    and written as it is to every client: no copy of the event's JSON (it was copied into bytes and
    twice more to frame it; the attach's snapshot is megabytes). The frame is never changed after."""
    out = bytearray(_EVENT_HEAD)
    codec.encode_event_into(event, out)
    out += b"}\n"
    return out


# -- names and notes -------------------------------------------------------------------------
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def clean_text(text: str, limit: int) -> str:
    """What another person typed, safe to draw: no control characters (no escape sequences, no
    bidi overrides), one line, at most `limit` characters."""
    return _UNPRINTABLE.sub(" ", text).strip()[:limit]


_NAME_CHARS = re.compile(r"[^\w .@-]")


def clean_name(name: str) -> str:
    """A person's name as others see it: word characters, space, `.`, `@`, `-` only (no `[`, so
    nothing in it is ever read as Textual markup where a notice quotes it), at most 32."""
    return _NAME_CHARS.sub("", clean_text(name, 32)).strip() or "anonymous"


# -- rate limit ------------------------------------------------------------------------------
class TokenBucket:
    """`rate` messages a second on average, `burst` at once."""

    def __init__(self, rate: float = RATE_PER_S, burst: int = RATE_BURST, clock: Any = time.monotonic) -> None:
        self.rate, self.burst, self.clock = rate, float(burst), clock
        self.tokens = float(burst)
        self.at = clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True
