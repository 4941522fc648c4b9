"""Every session recorded, and any recording replayed into the same UI with no host.

A recording is gzip'd JSON lines under the XDG data dir (`recordings/`): a header line, then one
line per state event, `{"t": wall time, "e": event}`, in the codec's encoding. The state is a
reducer over events, so applying a recording's events reproduces what the panes showed. The
first event of every file is the whole state (`StateSnapshot`), written again every
`SNAPSHOT_EVERY_S`: replay `--at T` starts from the last snapshot before T (issue 20).

The gzip stream is flushed every few seconds, so a console that is killed leaves a file readable
up to its last flush; replay stops at the damage with a notice. Files rotate at `max_file_bytes`
and the oldest recordings go once all of them pass `max_total_bytes`.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import math
import os
import re
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from console import __version__
from console.core import codec
from console.core.state import Event, HostState, Notice, ReplayInfo, StateSnapshot
from console.locations import data_home
from console.sanitize import clean_json, json_may_hold_control

log = logging.getLogger("gpuconsole.recording")

FORMAT = "gpuconsole-recording"
VERSION = 1
FLUSH_EVERY_S = 5.0
SNAPSHOT_EVERY_S = 180.0  # a seek replays at most this much; each snapshot costs about one log tail
MAX_FILE_BYTES = 64 << 20
MAX_TOTAL_BYTES = 1 << 30
# Reading limits (issue 21, item 9): a recording is a file anyone can hand over. A line longer
# than the longest event the core writes is skipped without holding it; reading stops past
# MAX_READ_BYTES decompressed (a 1 MB gzip bomb inflated to 2.1 GB in memory before).
MAX_LINE_BYTES = 16 << 20
MAX_READ_BYTES = 768 << 20
_LONG_LINE = object()


class RecordingError(Exception):
    """Not a recording, or one this version cannot read: one line for the operator."""


def default_dir() -> Path:
    return data_home() / "recordings"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "host"


class Recorder:
    """Subscribes to one HostState and appends its events. Never raises into the state: a disk
    that fills up stops the recording with a notice; the console goes on."""

    def __init__(self, state: HostState, directory: Path | None = None, *,
                 max_file_bytes: int = MAX_FILE_BYTES, max_total_bytes: int = MAX_TOTAL_BYTES,
                 flush_every_s: float = FLUSH_EVERY_S, snapshot_every_s: float = SNAPSHOT_EVERY_S) -> None:
        self.state = state
        self.directory = directory or default_dir()
        self.max_file_bytes = max_file_bytes
        self.max_total_bytes = max_total_bytes
        self.flush_every_s = flush_every_s
        self.snapshot_every_s = snapshot_every_s
        self.snapshots_written = 0
        self._last_snapshot = 0.0
        self.path: Path | None = None
        self.paths: list[Path] = []
        self.error: str | None = None
        self.events_written = 0
        self._raw: IO[bytes] | None = None
        self._gz: gzip.GzipFile | None = None
        self._last_flush = 0.0
        self._unsubscribe: Any = None
        self._stamp = time.strftime("%Y%m%d-%H%M%S")
        self._part = 0

    def start(self) -> Recorder:
        try:
            self._open()
        except OSError as exc:
            self._fail(exc)
            return self
        self._unsubscribe = self.state.subscribe(self._on_event)
        return self

    def _open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        suffix = f"-part{self._part}" if self._part else ""
        self.path = self.directory / f"{_safe(self.state.host)}-{self._stamp}{suffix}.jsonl.gz"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        self._raw = os.fdopen(fd, "wb")
        self._gz = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=6)
        header = {"format": FORMAT, "version": VERSION, "gpuconsole": __version__, "host": self.state.host,
                  "label": self.state.label, "demo": self.state.demo, "started_at": time.time(), "part": self._part}
        self._gz.write(json.dumps(header).encode() + b"\n")
        self.paths.append(self.path)
        self.write_snapshot()  # every file starts with the whole state: each part replays alone
        self._prune()

    def _line(self, event: Event) -> bytearray:
        line = bytearray(b'{"t":%.6f,"e":' % self.state.now())
        codec.encode_event_into(event, line)  # encoded once, into the line (a snapshot is megabytes)
        line += b"}\n"
        return line

    def write_snapshot(self) -> None:
        """The whole state, now (at start, at each rotation, every `snapshot_every_s`)."""
        if self._gz is None:
            return
        self._gz.write(self._line(self.state.snapshot()))
        self.snapshots_written += 1
        self._last_snapshot = time.monotonic()

    def _on_event(self, event: Event) -> None:
        if self._gz is None:
            return
        try:
            self._gz.write(self._line(event))
            self.events_written += 1
            now = time.monotonic()
            if now - self._last_snapshot >= self.snapshot_every_s:
                self.write_snapshot()
            if now - self._last_flush >= self.flush_every_s:
                self._last_flush = now
                self._gz.flush(zlib.Z_SYNC_FLUSH)
                assert self._raw is not None
                self._raw.flush()
                if self._raw.tell() >= self.max_file_bytes:
                    self._rotate()
        except OSError as exc:
            self._fail(exc)

    def flush(self) -> None:
        """Everything written so far readable by `read_recording` (the swap report reads it live)."""
        if self._gz is None or self._raw is None:
            return
        try:
            self._gz.flush(zlib.Z_SYNC_FLUSH)
            self._raw.flush()
        except OSError as exc:
            self._fail(exc)

    def _rotate(self) -> None:
        self._close_files()
        self._part += 1
        self._open()

    def _prune(self) -> None:
        """Oldest recordings go once all of them pass max_total_bytes (never the one being written)."""
        files = sorted(self.directory.glob("*.jsonl.gz"), key=lambda p: p.stat().st_mtime)
        total = sum(p.stat().st_size for p in files)
        for old in files:
            if total <= self.max_total_bytes:
                break
            if old == self.path:
                continue
            total -= old.stat().st_size
            old.unlink(missing_ok=True)

    def _fail(self, exc: OSError) -> None:
        self.error = f"recording stopped: {exc.strerror or exc}"
        log.error("%s", self.error)
        self._close_files()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self.state.apply(Notice(self.state.host, "recording", self.error, "warning", time.time()))

    def _close_files(self) -> None:
        gz, raw = self._gz, self._raw
        self._gz = self._raw = None
        for closer in (gz, raw):
            if closer is not None:
                try:
                    closer.close()
                except OSError:
                    pass

    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._close_files()


# -- reading ---------------------------------------------------------------------------------
@dataclass
class Recording:
    path: Path
    header: dict[str, Any]
    entries: list[tuple[float, Event]] = field(default_factory=list)
    skipped: int = 0  # lines that did not decode (counted, never fatal)
    damage: str | None = None  # where and why reading stopped early

    @property
    def snapshots(self) -> list[int]:
        """Indices of the entries that are the whole state (a seek starts at one)."""
        return [i for i, (_, event) in enumerate(self.entries) if isinstance(event, StateSnapshot)]

    @property
    def started_at(self) -> float:
        return self.entries[0][0] if self.entries else float(self.header.get("started_at") or 0.0)

    @property
    def duration_s(self) -> float:
        return self.entries[-1][0] - self.started_at if self.entries else 0.0


class _TooBig(Exception):
    pass


def _lines(path: Path) -> Iterator[Any]:
    """The decompressed lines, each at most MAX_LINE_BYTES (a longer one is read through in
    bounded pieces and given as `_LONG_LINE`); `_TooBig` past MAX_READ_BYTES in all."""
    max_line, max_total = MAX_LINE_BYTES, MAX_READ_BYTES
    total = 0
    with gzip.open(path, "rb") as fh:
        while True:
            line = fh.readline(max_line + 1)
            if not line:
                return
            total += len(line)
            if len(line) > max_line:
                while not line.endswith(b"\n"):
                    line = fh.readline(1 << 20)
                    total += len(line)
                    if not line or total > max_total:
                        break
                if total > max_total:
                    raise _TooBig(total)
                yield _LONG_LINE
                continue
            if total > max_total:
                raise _TooBig(total)
            yield line


def read_recording(path: Path) -> Recording:
    """The whole recording; `RecordingError` when it is not one (or of another version)."""
    if not path.is_file():
        raise RecordingError(f"{path}: no such file")
    lines = _lines(path)
    try:
        first = next(lines)
        header = json.loads(first)
    except (OSError, EOFError, zlib.error, StopIteration) as exc:
        raise RecordingError(f"{path}: not a gpuconsole recording ({exc or 'empty'})") from None
    except _TooBig:
        raise RecordingError(f"{path}: not a gpuconsole recording (its first line passes "
                             f"{MAX_READ_BYTES >> 20} MiB)") from None
    except (ValueError, TypeError, RecursionError):  # `_LONG_LINE`, not JSON, nested too deep
        raise RecordingError(f"{path}: not a gpuconsole recording (the first line is not its header)") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise RecordingError(f"{path}: not a gpuconsole recording")
    if header.get("version") != VERSION:
        raise RecordingError(f"{path}: a recording of format version {header.get('version')!r}; this "
                             f"gpuconsole {__version__} reads version {VERSION}")
    rec = Recording(path, header)
    n = 1
    try:
        for n, line in enumerate(lines, start=2):  # noqa: B007 - n names the damaged line
            if line is _LONG_LINE:
                rec.skipped += 1
                continue
            if not line.endswith(b"\n"):
                rec.damage = f"line {n} is cut short (the recording ends there)"
                break
            try:
                t, event = _decode_line(line)
            except (ValueError, codec.DecodeError, RecursionError):
                rec.skipped += 1
                continue
            rec.entries.append((t, event))
    except (OSError, EOFError, zlib.error) as exc:
        rec.damage = f"damaged after line {n} ({exc or 'unexpected end'})"
    except _TooBig:
        rec.damage = (f"read up to line {n}: the rest passes {MAX_READ_BYTES / (1 << 20):g} MiB uncompressed "
                      "(the reading limit)")
    return rec


def _decode_line(line: bytes) -> tuple[float, Event]:
    # {"t":123.456,"e":{...}}: the event's bytes are passed to the codec as they are.
    if not line.startswith(b'{"t":'):
        raise ValueError("not an entry")
    comma = line.index(b",")
    t = float(line[5:comma])
    if not math.isfinite(t) or not 0 <= t < 1e11:  # 1e400, NaN: not a time (issue 21, item 9)
        raise ValueError("not a time")
    if not line[comma:].startswith(b',"e":'):
        raise ValueError("not an entry")
    body = line[comma + 5:].rstrip()
    if not body.endswith(b"}"):
        raise ValueError("not an entry")
    body = body[:-1]
    if _HUGE_NUMBER.search(body) is not None:
        # 1e400 decodes as inf: every number is checked finite (the slow path, for such lines only)
        json.loads(body, parse_float=_finite_float, parse_constant=_no_constant)
    if json_may_hold_control(body):
        # a crafted or older recording: host strings are cleaned here as the sources clean them now
        body = json.dumps(clean_json(json.loads(body), block=True), ensure_ascii=False).encode()
    return t, codec.decode_event(body)


_HUGE_NUMBER = re.compile(rb"[0-9][eE][+-]?[0-9]{3}|NaN|Infinity")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {text[:20]}")
    return value


def _no_constant(text: str) -> float:
    raise ValueError(f"not a number: {text}")


class Replayer:
    """Plays a recording into a HostState on the recording's clock: the state's `now()` is the
    recording's time (`speed` times as fast), so ages and staleness are what they were then;
    `at_s` seeks there first (from the last snapshot before it). `state.replay` says where it is."""

    def __init__(self, recording: Recording, state: HostState, *, speed: float = 1.0, at_s: float = 0.0) -> None:
        self.recording = recording
        self.state = state
        self.speed = speed
        self.at_s = max(0.0, at_s)
        self.position_s = 0.0
        self.finished = False
        self._t0 = recording.started_at
        self._wall0 = time.monotonic()
        self._next = 0  # the first entry not applied yet
        state.clock = self.now
        self._publish()

    def now(self) -> float:
        if self.finished:
            return self._t0 + self.position_s
        return self._t0 + self.at_s + (time.monotonic() - self._wall0) * self.speed

    def _publish(self) -> None:
        self.state.replay = ReplayInfo(self._t0, self.recording.duration_s, self.speed, self.finished,
                                       str(self.recording.path))

    def seek(self, at_s: float) -> None:
        """The state as it was `at_s` seconds in (forward from where the replay is): the last
        snapshot at or before it, then every event after that snapshot up to `at_s`, never an
        event from after it."""
        entries = self.recording.entries
        start = self._next  # forward only: a state cannot be unapplied
        for i in self.recording.snapshots:
            if i >= self._next and entries[i][0] - self._t0 <= at_s:
                start = i  # a snapshot on the way: what came before it is in it
        i = start
        while i < len(entries) and entries[i][0] - self._t0 <= at_s:
            self.state.apply(entries[i][1])
            i += 1
        self._next = i
        self.at_s = self.position_s = at_s
        self._wall0 = time.monotonic()

    async def run(self) -> None:
        if self._next == 0:
            self.seek(self.at_s)
        self._wall0 = time.monotonic()
        entries = self.recording.entries
        while self._next < len(entries):
            t, event = entries[self._next]
            offset = t - self._t0
            wait = (offset - self.at_s) / self.speed - (time.monotonic() - self._wall0)
            if wait > 0:
                await asyncio.sleep(wait)
            self.position_s = offset
            self._next += 1
            self.state.apply(event)
        self.position_s = max(self.position_s, self.at_s, self.recording.duration_s)
        self.finished = True
        self._publish()
        rec = self.recording
        message = f"end of the recording: {len(rec.entries)} events over {rec.duration_s:.0f}s"
        if rec.skipped:
            message += f", {rec.skipped} lines that did not decode skipped"
        if rec.damage:
            message += f"; the recording is damaged: {rec.damage}"
        self.state.apply(Notice(self.state.host, "replay", message, "warning" if rec.damage else "information",
                                self.now()))

    def apply_until(self, at_s: float) -> None:
        """The state at `at_s` seconds into the recording, at once, and stay there (tests, reports)."""
        self.seek(at_s)
        self.finished = True
        self._publish()
