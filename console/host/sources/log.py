"""The log source: one long-lived stream (`journalctl -f -o json` for units, `tail -F` for a file),
lines batched every 150 ms and never dropped (a full queue slows the stream, it loses nothing).
After a reconnect it resumes after the journal cursor or at the byte offset it had reached."""

from __future__ import annotations

import asyncio
import atexit
import calendar
import contextlib
import datetime as dt
import json
import logging
import os
import pickle
import re
import struct
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any
from dataclasses import dataclass, replace

from console.domain.analysis.log_state import LogSummary, LogTracker
from console.host.backoff import Backoff
from console.host.parsers.sglang_log import LogEvent
from console.host.parsers.sglang_log import parse_line as _parse_line
from console.host.parsers.systemd import UnitTransition, parse_pid1_message
from console.redact import redact_text
from console.sanitize import clean_line
from console.host.sources.base import describe_error
from console.host.transport.base import ConnectionState, LineStream, Transport, join, operand

BATCH_S = 0.15
BATCH_MAX = 2000
PARSE_SLICE = 100  # lines parsed (or events built) between two offers of the GIL to the UI's thread (~2-4 ms)
# Decoding, cleaning, redacting and parsing a batch run off the event loop (issue 36: at 20k lines/s
# they were most of the loop's time and its lag). A batch of PROCESS_MIN_LINES or more (a flood) is
# parsed in a process of its own (`ParserProcess`), so the parse never holds this process's GIL: on
# a thread it took ~70 % of the console's CPU in a flood, and the UI's thread waited for the GIL
# between the parse's slices. The parser thread below sends the process the batch and builds the
# events from its answer (plain tuples: cheap), a slice at a time. A small batch (a live log's few
# lines) is parsed on the thread itself: a round trip to the process would cost more than the parse.
# One thread for every follower: each follower waits for its batch before it reads the next, so its
# lines stay in order and its resume point (offset, cursor) has one writer at a time; the process
# gets the decoder's resume point with each batch and sends the new one back with its events.
PROCESS_MIN_LINES = 500
PROCESS_FAILURES_MAX = 3  # a parser process that died this often: the thread parses from then on
_PARSER: ThreadPoolExecutor | None = None
_PROCESS: ParserProcess | None = None
_PROCESS_FAILURES = 0
_PARSER_LOCK = threading.Lock()
log = logging.getLogger("gpuconsole.log")


def parser_thread() -> ThreadPoolExecutor:
    global _PARSER
    with _PARSER_LOCK:
        if _PARSER is None:
            _PARSER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpuconsole-log-parse")
        return _PARSER


class ParserProcess:
    """`python -m console.host.sources.log_parser_process`, fed one batch at a time through its
    stdin (a length, then the pickled decoder state and lines) and answering on its stdout; used
    from the parser thread only. It ends when its stdin closes (this process exiting, or dying).
    In the console's session, not one of its own: Linux schedules each session as a group of its
    own (autogroup, on by default), so a parser in a session of its own took as much of a core as
    the whole console however nice it was; in the console's group its nice puts it below the UI
    thread. It ignores SIGINT (Ctrl-C is the console's)."""

    def __init__(self) -> None:
        root = str(Path(__file__).resolve().parents[3])  # the tree this `console` package is in
        env = dict(os.environ)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen([sys.executable, "-m", "console.host.sources.log_parser_process"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env)

    def parse(self, state: tuple[object, ...], raw_lines: list[bytes]) -> tuple[int, tuple[object, ...], list[Any]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        send_frame(self.proc.stdin, (state, b"\n".join(raw_lines)))
        return recv_frame(self.proc.stdout)  # type: ignore[no-any-return]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(1)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def send_frame(out: IO[bytes], obj: object) -> None:
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(struct.pack("<Q", len(payload)))
    out.write(payload)
    out.flush()


def recv_frame(inp: IO[bytes]) -> object:
    """One frame (the other end is our own process), or EOFError when the pipe ended."""
    head = inp.read(8)
    if len(head) < 8:
        raise EOFError("the parser process ended")
    (size,) = struct.unpack("<Q", head)
    payload = inp.read(size)
    if len(payload) < size:
        raise EOFError("the parser process ended mid-answer")
    return pickle.loads(payload)


def parser_process() -> ParserProcess | None:
    """The one parser process, started at the first flood; None once it has died
    PROCESS_FAILURES_MAX times or cannot start (the thread parses instead)."""
    global _PROCESS, _PROCESS_FAILURES
    with _PARSER_LOCK:
        if _PROCESS is None and _PROCESS_FAILURES < PROCESS_FAILURES_MAX and sys.executable:
            try:
                _PROCESS = ParserProcess()
            except OSError as exc:
                log.warning("the log parser process did not start (%s): parsing on the thread", exc)
                _PROCESS_FAILURES = PROCESS_FAILURES_MAX
            else:
                atexit.register(_PROCESS.close)
        return _PROCESS


def _parser_process_failed(process: ParserProcess) -> None:
    global _PROCESS, _PROCESS_FAILURES
    with _PARSER_LOCK:
        if _PROCESS is process:
            _PROCESS = None
            _PROCESS_FAILURES += 1
    with contextlib.suppress(OSError):
        process.proc.kill()
    process.close()


# A traceback comes one journal entry (or one write) per line and may straddle two batches: it is
# closed (one error, named by its last line) once the stream has been quiet this long, not when a
# batch happens to end after its header (the real journald cut an OOM's traceback at its header).
TRACEBACK_QUIET_S = 1.0
BACKLOG_S = 2.0  # lines read within this long of a stream's start are its backlog (not the log moving now)
BACKLOG_LINES = 300
BACKLOG_BYTES = 256 << 10
WAIT_RUNNING_S = 2.0  # a container followed beside another, not running: asked again this often on the host
# `--all`: without it journalctl -o json prints "MESSAGE":null for a field over 4,096 bytes, and
# SGLang's launch line (server_args=ServerArgs(...)) is ~16 KB (tests/data/real/journal_long_line.json).
# _SYSTEMD_UNIT tells PID 1's own lines (init.scope) from the server's; UNIT names their unit.
JOURNAL_JSON = ("-o", "json", "--all", "--output-fields=MESSAGE,_SYSTEMD_UNIT,UNIT", "--no-pager")


# journald's own line when a unit logged past its rate limit (RateLimitBurst per RateLimitIntervalSec,
# or the unit's LogRateLimit*): the lines it dropped are gone from the journal for good.
# systemd 252: "Suppressed 180 messages from sglang-x.service" (tests/data/real/journal_rate_limited.json).
SUPPRESSED = re.compile(r"^Suppressed (\d+) messages from (\S+)$")


def lost_lines_event(message: str) -> LogEvent | None:
    """journald's word that it dropped a unit's lines, as a log line marked as lost; else None."""
    m = SUPPRESSED.match(message.strip())
    if m is None:
        return None
    dropped, unit = int(m.group(1)), clean_line(m.group(2))
    return LogEvent("lost", f"journald dropped {dropped:,} lines of {unit} (its log rate limit): they are not "
                            "in this log", severity="warning",
                    fields={"kind": "lines lost", "dropped": dropped, "unit": unit})


@dataclass(frozen=True, slots=True)
class LogBatch:
    events: tuple[LogEvent, ...]
    summary: LogSummary
    note: str | None = None  # "stream ended: …", "resumed after cursor", …
    error: str | None = None


_END = object()


class Backlog:
    """Which of a stream's lines are its backlog (old lines `tail`, `journalctl -n` or `docker logs
    --tail` print at its start), not the log moving now: those read within BACKLOG_S of its opening,
    counted as they are read, not as they are parsed (a loaded console parsed a quiet host's backlog
    late, took it for the log moving and woke the server poll: issue 36), and for a file those up
    to the size it had at the opening, however late they were read."""

    def __init__(self, opened_s: float, file_end: int | None = None) -> None:
        self.opened_s = opened_s
        self.file_end = file_end  # the file's size at the opening (a file's stream only)
        self.lines = 0  # lines read within BACKLOG_S of the opening
        self._fed = 0

    def read(self, lines: int, now_s: float) -> None:
        """`lines` raw lines were read from the stream at `now_s` (the loop's time)."""
        if now_s - self.opened_s <= BACKLOG_S:
            self.lines += lines

    def live(self, lines: int, offset: int | None = None) -> bool:
        """Whether a batch of the next `lines` raw lines (a file's read up to `offset`) holds a line
        the log wrote after the stream opened."""
        self._fed += lines
        if self.file_end is not None and offset is not None and offset <= self.file_end:
            return False
        return self._fed > self.lines


def parse_line(text: str) -> LogEvent:
    """Clean, redact, then parse: events, errors and the server's reasons never hold a secret
    or a terminal escape sequence (issue 21, item 1)."""
    return _parse_line(redact_text(clean_line(text)))


def journal_time(realtime_us: object) -> str | None:
    """journald's `__REALTIME_TIMESTAMP` (µs since the epoch, always in `journalctl -o json`) as the
    host-local stamp SGLang's lines carry ("2026-12-01 08:03:12.123456"); None when absent or odd."""
    if not isinstance(realtime_us, str) or not realtime_us.isdigit():
        return None

    return dt.datetime.fromtimestamp(int(realtime_us) / 1e6).isoformat(sep=" ", timespec="microseconds")


def docker_time_s(stamp: str, cache: list[Any] | None = None) -> float | None:
    """Docker's time of a line (`docker logs --timestamps`: RFC 3339 in UTC, "2026-12-03T17:12:32.123456789Z")
    as epoch seconds (to the µs); None when it is not one. `cache`: [whole second's text, its epoch]
    (a flood's lines share their second: one calendar conversion per second, not per line)."""
    base = stamp[:19]
    if cache is not None and cache[0] == base:
        whole = cache[1]
    else:
        try:
            whole = calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S"))
        except ValueError:
            return None
        if cache is not None:
            cache[0], cache[1] = base, whole
    frac = stamp[20:-1] if stamp[19:20] == "." else ""
    if frac and not frac.isdigit():
        return None
    return whole + (int(frac[:6].ljust(6, "0")) / 1e6 if frac else 0.0)


class LineDecoder:
    """A stream's raw lines to events: journalctl's JSON, a file's bytes or `docker logs`' stamped
    lines decoded, cleaned, redacted and parsed, with the stream's resume point (the journal
    cursor, the file's byte offset, Docker's last timestamp) advanced as it goes. Plain data, so a
    batch can be parsed in the parser process: `state()` goes there with the lines, comes back
    advanced, and `load()` takes it."""

    def __init__(self, container: str | None = None, log_file: str | None = None, *, tagged: bool = False) -> None:
        self.container = container
        self.log_file = log_file
        self.since: str | None = None  # a container's last line's Docker timestamp (RFC 3339, nanoseconds)
        # Several containers followed at once (beside: the old one serving, the new one booting): each
        # line comes as "NAME LINE" (the follower tags it with the container whose stream it came
        # from), each container's resume point its own.
        self.tagged = tagged
        self.since_of: dict[str, str] = {}
        self.came_from: str | None = None  # the container of the line decoded last (tagged)
        self.cursor: str | None = None
        self.offset: int | None = None
        self.skip_partial = False
        self.resume_cursor: str | None = None  # the entry --cursor= starts at: seen already, skipped
        self.vacuumed_note: str | None = None
        self._docker_ts: str | None = None
        self._docker_second: list[Any] = ["", 0]  # `docker_time_s`'s cache
        # The host's time of the line decoded last (epoch s): journald's __REALTIME_TIMESTAMP, Docker's
        # --timestamps; None for a file's line (the event's `at_s`: see console/host/parsers/sglang_log.py)
        self.at_s: float | None = None
        self._transition: UnitTransition | None = None
        self._suppressed: str | None = None  # journald's "Suppressed N messages from UNIT"
        self._journal_ts: str | None = None  # journald's own time of PID 1's line (the swap observer dates by it)

    def state(self) -> tuple[object, ...]:
        return (self.container, self.log_file, self.since, self.cursor, self.offset, self.skip_partial,
                self.resume_cursor, self.vacuumed_note, self.tagged, dict(self.since_of))

    def load(self, state: tuple[object, ...]) -> None:
        (self.container, self.log_file, self.since, self.cursor, self.offset, self.skip_partial,  # type: ignore[assignment]
         self.resume_cursor, self.vacuumed_note, self.tagged, self.since_of) = state

    def parse(self, raw: bytes) -> LogEvent | None:
        """One raw line's event, its `at_s` the host's time of the line where the source gave one."""
        event = self.parse_bare(raw)
        if event is not None and self.at_s is not None and event.at_s is None:
            event = replace(event, at_s=self.at_s)
        return event

    def parse_bare(self, raw: bytes) -> LogEvent | None:
        """`parse` less the host's time of the line, which is left in `self.at_s` (the parser process
        sends it beside the event's fields: no copy of the event per line)."""
        self._transition = self._journal_ts = None
        self._suppressed = None
        self.at_s = None
        text = self.decode(raw)
        if text is None:
            return None
        if self._suppressed is not None:  # journald dropped lines: said, never silent
            return lost_lines_event(self._suppressed)
        if self._transition is not None:  # systemd's own line about the unit: a fact, not a log line
            t = self._transition
            return LogEvent("unit", clean_line(text), ts=self._journal_ts, severity="error" if t.failing else "info",
                            fields={"kind": f"unit {t.kind}", "transition": t.kind, "unit": t.unit, "code": t.code,
                                    "status": t.status, "result": t.result, "restart_counter": t.restart_counter})
        event = parse_line(text)
        if self._docker_ts is not None and event.ts is None:
            # Docker's time, as SGLang writes its own: "2026-11-28 07:41:13"
            event = replace(event, ts=self._docker_ts[:19].replace("T", " "))
        if self.tagged and self.came_from is not None:  # which container said it
            event = replace(event, fields={**event.fields, "container": self.came_from})
        return event

    def decode(self, raw: bytes) -> str | None:
        self._docker_ts = None
        if self.tagged:
            name, _, raw = raw.partition(b" ")
            self.came_from = clean_line(name.decode("utf-8", "replace"))
        if self.container is not None:
            text = raw.decode("utf-8", "replace")
            ts, sep, rest = text.partition(" ")
            if not sep or len(ts) < 20 or ts[4:5] != "-" or not ts.endswith("Z"):
                return text  # a line of docker's own (an error): show it as it is
            since = self.since_of.get(self.came_from or "") if self.tagged else self.since
            if since is not None and ts <= since:
                return None  # seen before the reconnect: --since is inclusive
            if self.tagged:
                self.since_of[self.came_from or ""] = ts
            else:
                self.since = ts
            self._docker_ts = ts
            self.at_s = docker_time_s(ts, self._docker_second)
            return rest
        if self.log_file is not None:
            assert self.offset is not None
            self.offset += len(raw) + 1
            if self.skip_partial:
                self.skip_partial = False
                return None
            return raw.decode("utf-8", "replace")
        if raw.strip() == b"-- No entries --":  # journalctl's word for an empty backlog, not a log line
            return None
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: nesting deeper than Python recurses
            return raw.decode("utf-8", "replace")  # not JSON: a journalctl message; show it
        if not isinstance(entry, dict):
            return None
        cursor = entry.get("__CURSOR")
        if self.resume_cursor is not None:
            resumed, self.resume_cursor = self.resume_cursor, None
            if cursor == resumed:
                return None  # the last entry read before the reconnect
            self.vacuumed_note = ("the journal no longer holds the last entry read (rotated and vacuumed): "
                                  "resumed at the oldest entry it kept")
        if isinstance(cursor, str):
            self.cursor = cursor
        realtime = entry.get("__REALTIME_TIMESTAMP")
        if realtime.__class__ is str and realtime.isdigit():  # journald's own time of the entry (µs)
            self.at_s = int(realtime) / 1e6
        message = entry.get("MESSAGE")
        if entry.get("_SYSTEMD_UNIT") == "init.scope" and isinstance(message, str):
            self._transition = parse_pid1_message(message)
            self._journal_ts = journal_time(entry.get("__REALTIME_TIMESTAMP"))
        if entry.get("_SYSTEMD_UNIT") == "systemd-journald.service" and isinstance(message, str) \
                and SUPPRESSED.match(message.strip()):
            self._suppressed = message
        if isinstance(message, list):  # journald sends non-UTF-8 messages as a byte array
            return bytes(b for b in message if isinstance(b, int) and 0 <= b < 256).decode("utf-8", "replace")
        return message if isinstance(message, str) else None


def parse_in_process(state: tuple[object, ...], blob: bytes) -> tuple[int, tuple[object, ...], list[tuple[object, ...]]]:
    """In the parser process: a batch (its lines joined by newlines: one bytes object to send) parsed
    from the decoder's resume point; the events as plain tuples (built again in the console far
    faster than a frozen dataclass unpickles), the new resume point, and this process's id."""
    decoder = LineDecoder()
    decoder.load(state)
    rows = []
    for raw in blob.split(b"\n"):
        e = decoder.parse_bare(raw)
        if e is not None:
            rows.append((e.kind, e.text, e.ts, e.ranks, e.severity, e.phase, e.fields or None, e.body,
                         decoder.at_s if e.at_s is None else e.at_s))
    return os.getpid(), decoder.state(), rows


def _events_of(rows: list[tuple[object, ...]]) -> list[LogEvent]:
    """The parser process's rows as events (on the parser thread: a slice, then the GIL offered)."""
    events = []
    for i in range(0, len(rows), PARSE_SLICE):
        if i:
            time.sleep(0)
        events += [LogEvent(k, t, ts, r, sev, ph, f or {}, b, at)  # type: ignore[arg-type]
                   for k, t, ts, r, sev, ph, f, b, at in rows[i:i + PARSE_SLICE]]
    return events


class LogFollower:
    def __init__(self, transport: Transport, *, units: tuple[str, ...] = (), log_file: str | None = None,
                 backlog: int = BACKLOG_LINES, container: str | None = None,
                 compare_container: str | None = None) -> None:
        if not units and not log_file and not container:
            raise ValueError("a log source needs units, a file or a container")
        self.transport = transport
        self.units = units
        # Two containers (the new one and the one it replaces) are followed at once, each by its own
        # `docker logs -f` (beside, the old one serves while the new one boots: both logs are the
        # swap's), each line tagged with its container and each container resumed at its own last
        # line's time. A container that is not running is waited for on the host (`docker logs -f`
        # of a created or stopped container ends at once).
        self.decoder = LineDecoder(container, log_file, tagged=bool(container and compare_container))
        self.compare_container = compare_container
        self.parsed_in: int | None = None  # the id of the process that parsed the last flood's batch
        self.backlog = backlog
        self.label = (f"file {log_file}" if log_file
                      else f"docker logs of {container}" + (f" and {compare_container}" if compare_container else "")
                      if container else "journal of " + ", ".join(units))
        self.tracker = LogTracker(self.label)
        self.backoff = Backoff()
        self._connected_status: str | None = None
        self._watching = False
        self._feed_backoffs: list[Backoff] = []  # the containers' own streams' (followed at once)
        self._file_end: int | None = None  # the file's size when its stream opened (`Backlog`)

    def _on_state(self, state: ConnectionState) -> None:
        """When the connection comes back the stream restarts now, not after a backoff grown while
        it was down (lines resumed up to 7.6 s late; issue 15)."""
        if state.usable and self._connected_status not in (None, "connected"):
            self.backoff.wake()
            for backoff in self._feed_backoffs:
                backoff.wake()
        self._connected_status = state.status

    # -- the command ---------------------------------------------------------------------
    def _followed(self) -> tuple[str, ...]:
        """The containers followed at once (the new one first)."""
        return tuple(c for c in (self.container, self.compare_container) if c)

    def _container_command(self, name: str) -> tuple[str, str | None]:
        """`docker logs -f` of one of the containers followed at once, from its own resume point,
        once it runs (waited for on the host, a `docker inspect` every WAIT_RUNNING_S)."""
        args = ["docker", "logs", "--follow", "--timestamps"]
        since = self.decoder.since_of.get(name)
        if since:
            args += ["--since", since]
            note = f"docker logs of {name} resumed after its last line's Docker timestamp"
        else:
            args += ["--tail", str(self.backlog)]
            note = None
        # Until it runs, or it ran since the wait began: a container that starts and dies between two
        # asks (a boot that fails in under WAIT_RUNNING_S) still has its lines read, the cause of its death.
        inspect = ["docker", "inspect", "--type", "container", "-f"]
        first = join([*inspect, "{{.State.Status}} {{.State.StartedAt}}", "--", name])
        now = join([*inspect, "{{.State.Running}} {{.State.Status}} {{.State.StartedAt}}", "--", name])
        return (f"first=$({first} 2>/dev/null); "
                f'until s=$({now} 2>/dev/null) && {{ [ "${{s%% *}}" = true ] || [ "${{s#* }}" != "$first" ]; }}; '
                f"do sleep {WAIT_RUNNING_S:g}; done; "
                f"exec {join([*args, '--', name])} 2>&1"), note

    async def _command(self) -> tuple[str, str | None]:
        if self.container is not None:
            # --timestamps: Docker's own time for lines that carry none, and where to resume (--since).
            args = ["docker", "logs", "--follow", "--timestamps"]
            if self.since:
                args += ["--since", self.since]
                note = "resumed after the last line's Docker timestamp"
            else:
                args += ["--tail", str(self.backlog)]
                note = None
            follow = "exec " + join([*args, "--", self.container]) + " 2>&1"
            if not self.compare_container:
                return follow, note
            running = join(["docker", "inspect", "--type", "container", "-f", "{{.State.Running}}", "--",
                            self.container])
            other = "exec " + join([*args, "--", self.compare_container]) + " 2>&1"
            return f'if [ "$({running} 2>/dev/null)" = true ]; then {follow}; else {other}; fi', note
        if self.log_file is None:
            args = ["journalctl", *[f"--unit={u}" for u in self.units], "-f", *JOURNAL_JSON]
            if self.cursor:
                # --cursor (inclusive), then the entry itself skipped: --after-cursor of an entry a
                # vacuum removed skips the first entry that survived (systemd 252 steps twice).
                args.append(f"--cursor={self.cursor}")
                self._resume_cursor = self.cursor
                note = "resumed after the journal cursor"
            else:
                args += ["-n", str(self.backlog)]
                note = None
            return "exec " + join(args), note
        path = operand(self.log_file)
        size_r = await self.transport.run(f"wc -c < {path}", timeout=10)
        size = int(size_r.text.strip()) if size_r.ok and size_r.text.strip().isdigit() else 0
        note = None
        if self.offset is None:
            start = max(0, size - BACKLOG_BYTES)
            self._skip_partial = start > 0
        elif size < self.offset:
            start, note = 0, "the log file shrank (truncated or rotated): reading it from the start"
            self._skip_partial = False
        else:
            start, note = self.offset, "resumed at the byte offset"
            self._skip_partial = False
        self.offset = start
        self._file_end = size
        return f"exec tail -c +{start + 1} -F -- {path}", note

    # What the decoder reads and its resume point, as the follower's own (the command reads and sets them)
    container = property(lambda self: self.decoder.container, lambda self, v: setattr(self.decoder, "container", v))
    log_file = property(lambda self: self.decoder.log_file, lambda self, v: setattr(self.decoder, "log_file", v))
    since = property(lambda self: self.decoder.since, lambda self, v: setattr(self.decoder, "since", v))
    cursor = property(lambda self: self.decoder.cursor, lambda self, v: setattr(self.decoder, "cursor", v))
    offset = property(lambda self: self.decoder.offset, lambda self, v: setattr(self.decoder, "offset", v))
    _skip_partial = property(lambda self: self.decoder.skip_partial,
                             lambda self, v: setattr(self.decoder, "skip_partial", v))
    _resume_cursor = property(lambda self: self.decoder.resume_cursor,
                              lambda self, v: setattr(self.decoder, "resume_cursor", v))
    _vacuumed_note = property(lambda self: self.decoder.vacuumed_note,
                              lambda self, v: setattr(self.decoder, "vacuumed_note", v))

    def _parse(self, raw: bytes) -> LogEvent | None:
        return self.decoder.parse(raw)

    def _decode(self, raw: bytes) -> str | None:
        return self.decoder.decode(raw)

    def _parse_batch(self, raw_lines: list[bytes]) -> list[LogEvent]:
        """A batch's events in the lines' order (on the parser thread)."""
        events = []
        for i, raw in enumerate(raw_lines):
            if i and i % PARSE_SLICE == 0:
                time.sleep(0)  # the GIL offered to the UI's thread: it waits for at most a slice
            event = self._parse(raw)
            if event is not None:
                events.append(event)
        return events

    def _parse_batch_in_process(self, raw_lines: list[bytes]) -> list[LogEvent]:
        """A flood's batch parsed in the parser process (on the parser thread, which waits for it
        and builds the events); the thread parses it when there is no process or it died (from the
        same resume point: the decoder moves only with an answer, so nothing is lost or doubled)."""
        process = parser_process()
        if process is not None:
            try:
                pid, state, rows = process.parse(self.decoder.state(), raw_lines)
            except Exception as exc:  # noqa: BLE001 - the process died (killed, out of memory): the thread parses
                log.warning("the log parser process failed (%s): parsing on the thread", describe_error(exc))
                _parser_process_failed(process)
            else:
                self.decoder.load(state)
                self.parsed_in = pid
                return _events_of(rows)
        self.parsed_in = os.getpid()
        return self._parse_batch(raw_lines)

    async def _parse_off_loop(self, raw_lines: list[bytes], *, process: bool = True) -> list[LogEvent]:
        """`_parse_batch` on the parser thread (a flood's batch through the parser process unless
        `process` is False). Cancelled meanwhile, it still waits for the thread to finish the batch
        (a few ms) before the cancel goes on: nothing else may touch the follower's resume point
        while the thread writes it."""
        if not raw_lines:
            return []
        big = process and len(raw_lines) >= PROCESS_MIN_LINES
        work = self._parse_batch_in_process if big else self._parse_batch
        done = asyncio.get_running_loop().run_in_executor(parser_thread(), work, raw_lines)
        try:
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            await asyncio.wait({done})
            raise

    async def read_backlog(self) -> tuple[LogEvent, ...]:
        """One read of the backlog (no following), fed to this follower's own tracker: the one
        the server watcher reads, as in the app. For `snapshot --json`."""
        if self.decoder.tagged:
            return await self._read_backlogs()
        if self.container is not None:
            args = ["docker", "logs", "--timestamps", "--tail", "5000", "--"]
            read = join([*args, self.container]) + " 2>&1"
            if self.compare_container:  # the one that runs, as the follow reads (a created one has no log)
                running = join(["docker", "inspect", "--type", "container", "-f", "{{.State.Running}}", "--",
                                self.container])
                read = (f'if [ "$({running} 2>/dev/null)" = true ]; then {read}; '
                        f"else {join([*args, self.compare_container])} 2>&1; fi")
            result = await self.transport.run(read, timeout=30)
        elif self.log_file is None:
            args = ["journalctl", *[f"--unit={u}" for u in self.units], *JOURNAL_JSON, "-n", "5000"]
            result = await self.transport.run(join(args), timeout=30)
        else:
            result = await self.transport.run(f"tail -c {8 << 20} -- {operand(self.log_file)}", timeout=30)
        saved = self.offset
        self.offset = 0
        self._skip_partial = False
        try:
            # One read, once (`snapshot`): starting the parser process would cost more than the parse.
            events = await self._parse_off_loop([raw for raw in result.stdout.split(b"\n") if raw], process=False)
        finally:
            self.offset = saved
        self.tracker.feed(events)
        self.tracker.flush()
        return tuple(events)

    async def _read_backlogs(self) -> tuple[LogEvent, ...]:
        """`read_backlog` of the containers followed at once: each one's tail (one that does not
        exist or cannot be read left out), tagged with its name and merged in Docker's time."""
        raw_lines: list[bytes] = []
        for name in self._followed():
            result = await self.transport.run(
                join(["docker", "logs", "--timestamps", "--tail", "5000", "--", name]) + " 2>&1", timeout=30)
            if result.ok:
                tag = name.encode() + b" "
                raw_lines += [tag + raw for raw in result.stdout.split(b"\n") if raw]

        def stamp(raw: bytes) -> bytes:
            parts = raw.split(b" ", 2)
            return parts[1] if len(parts) > 2 and parts[1].endswith(b"Z") else b""

        raw_lines.sort(key=stamp)
        events = await self._parse_off_loop(raw_lines, process=False)
        self.tracker.feed(events)
        self.tracker.flush()
        return tuple(events)

    async def snapshot_once(self) -> LogSummary:
        await self.read_backlog()
        return self.tracker.summary()

    # -- the loop ------------------------------------------------------------------------
    async def batches(self) -> AsyncIterator[LogBatch]:
        backoff = self.backoff
        loop = asyncio.get_running_loop()
        if not self._watching:
            self._watching = True
            self.transport.on_state(self._on_state)
        if self.decoder.tagged:
            async for batch in self._merged_batches():
                yield batch
            return
        while True:
            try:
                command, note = await self._command()
                stream = await self.transport.stream(command)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a source never raises
                yield LogBatch((), self.tracker.summary(), error=f"log stream: {describe_error(exc)}")
                await backoff.failed()
                continue
            if note:
                yield LogBatch((), self.tracker.summary(), note=note)
            # A list of lines per item (a read's, 64 KiB at most): 64 items hold up to 4 MiB.
            queue: asyncio.Queue[object] = asyncio.Queue(maxsize=64)
            backlog = Backlog(loop.time(), self._file_end if self.log_file is not None else None)
            reader = asyncio.ensure_future(_pump(stream, queue, backlog))
            got = 0
            try:
                ended = False
                while not ended:
                    item = await _next_item(queue, self.tracker.traceback_pending)
                    if item is _QUIET:
                        self.tracker.flush()  # the stream went quiet: the traceback is whole
                        yield LogBatch((), self.tracker.summary())
                        continue
                    if item is _END:
                        break
                    raw_lines: list[bytes] = list(item)  # type: ignore[call-overload]
                    deadline = loop.time() + BATCH_S
                    while len(raw_lines) < BATCH_MAX:
                        item = await _item_by(queue, deadline)
                        if item is None:
                            break
                        if item is _END:
                            ended = True
                            break
                        raw_lines.extend(item)  # type: ignore[call-overload]
                    events = await self._parse_off_loop(raw_lines)  # type: ignore[arg-type]
                    got += len(events)
                    for lost in (e for e in events if e.kind == "lost"):
                        yield LogBatch((), self.tracker.summary(), note=lost.text)
                    if self._vacuumed_note is not None:
                        vacuumed, self._vacuumed_note = self._vacuumed_note, None
                        yield LogBatch((), self.tracker.summary(), note=vacuumed)
                    # What a stream reads in its first seconds is its backlog (tail -c, journalctl -n):
                    # old lines, not the log moving now, however late they are parsed.
                    self.tracker.feed(events, live=backlog.live(len(raw_lines), self.offset))
                    yield LogBatch(tuple(events), self.tracker.summary())
                    backoff.reset()
            finally:
                reader.cancel()
                with contextlib.suppress(BaseException):
                    await reader
                await stream.close()
            self.tracker.flush()  # a traceback the stream ended on is whole
            why = stream.stderr_tail.splitlines()[-1:] or [f"exit {stream.exit_status}"]
            yield LogBatch((), self.tracker.summary(), note=f"log stream ended ({why[0]}); reconnecting")
            if got:
                backoff.reset()
            await backoff.failed()


    async def _feed(self, slot: int, queue: asyncio.Queue[object]) -> None:
        """One of the containers followed at once (the `slot`-th of `_followed()`, named again at each
        connect): its lines into the shared queue as ("lines", whether they are its backlog (read within
        BACKLOG_S of its opening: `Backlog`), the lines tagged "NAME LINE"), its notes and errors as
        ("note"|"error", text); reconnected when its `docker logs -f` ends (the container stopped),
        with its own backoff."""
        loop = asyncio.get_running_loop()
        backoff = Backoff()
        self._feed_backoffs.append(backoff)
        while True:
            try:
                name = self._followed()[slot]
                command, note = self._container_command(name)
                stream = await self.transport.stream(command)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a source never raises
                await queue.put(("error", f"log stream: {describe_error(exc)}"))
                await backoff.failed()
                continue
            if note:
                await queue.put(("note", note))
            opened = loop.time()
            got = 0
            tag = name.encode() + b" "
            try:
                async for lines in stream.chunks():
                    got += len(lines)
                    await queue.put(("lines", loop.time() - opened <= BACKLOG_S, [tag + raw for raw in lines]))
            finally:
                await stream.close()
            why = stream.stderr_tail.splitlines()[-1:] or [f"exit {stream.exit_status}"]
            await queue.put(("note", f"docker logs of {name} ended ({why[0]}); reconnecting"))
            if got:
                backoff.reset()
            await backoff.failed()

    async def _merged_batches(self) -> AsyncIterator[LogBatch]:
        """The batches of the containers followed at once (see `_feed`): their lines in the order
        they came, batched as one stream's."""
        loop = asyncio.get_running_loop()
        # A list of lines per item (a read's, 64 KiB at most): 64 items hold up to 4 MiB.
        queue: asyncio.Queue[object] = asyncio.Queue(maxsize=64)
        self._feed_backoffs = []
        feeders = [asyncio.ensure_future(self._feed(i, queue)) for i in range(2)]
        try:
            while True:
                item = await _next_item(queue, self.tracker.traceback_pending)
                if item is _QUIET:
                    self.tracker.flush()  # the streams went quiet: the traceback is whole
                    yield LogBatch((), self.tracker.summary())
                    continue
                kind, *rest = item  # type: ignore[misc]
                if kind != "lines":
                    if kind == "note":
                        self.tracker.flush()  # a traceback its stream ended on is whole
                    yield LogBatch((), self.tracker.summary(), **{kind: rest[0]})
                    continue
                backlog, raw_lines = rest[0], list(rest[1])  # backlog: every read of the batch its stream's backlog
                deadline = loop.time() + BATCH_S
                held: object = None
                while len(raw_lines) < BATCH_MAX:
                    item = await _item_by(queue, deadline)
                    if item is None:
                        break
                    if item[0] != "lines":  # type: ignore[index]
                        held = item  # said after this batch's lines
                        break
                    backlog = backlog and item[1]  # type: ignore[index]
                    raw_lines.extend(item[2])  # type: ignore[index]
                events = await self._parse_off_loop(raw_lines)
                for lost in (e for e in events if e.kind == "lost"):
                    yield LogBatch((), self.tracker.summary(), note=lost.text)
                # What a stream reads in its first seconds is its backlog (`--tail`): old lines,
                # however late they are parsed.
                self.tracker.feed(events, live=not backlog)
                yield LogBatch(tuple(events), self.tracker.summary())
                if held is not None:
                    kind, text = held  # type: ignore[misc]
                    if kind == "note":
                        self.tracker.flush()
                    yield LogBatch((), self.tracker.summary(), **{kind: text})
        finally:
            for feeder in feeders:
                feeder.cancel()
            for feeder in feeders:
                with contextlib.suppress(BaseException):
                    await feeder


_QUIET = object()  # `_next_item`: the stream went quiet with a traceback pending


async def _next_item(queue: asyncio.Queue[object], traceback_pending: bool) -> object:
    """The queue's next item; `_QUIET` when a traceback is pending and nothing came for
    TRACEBACK_QUIET_S (the traceback is whole then)."""
    if not traceback_pending:
        return await queue.get()
    try:
        return await asyncio.wait_for(queue.get(), TRACEBACK_QUIET_S)
    except asyncio.TimeoutError:
        return _QUIET


async def _item_by(queue: asyncio.Queue[object], deadline: float) -> object | None:
    """The queue's next item if one comes by `deadline` (the loop's time), else None."""
    try:
        return queue.get_nowait()
    except asyncio.QueueEmpty:
        wait = deadline - asyncio.get_running_loop().time()
        if wait <= 0:
            return None
        try:
            return await asyncio.wait_for(queue.get(), wait)
        except asyncio.TimeoutError:
            return None


async def _pump(stream: LineStream, queue: asyncio.Queue[object], backlog: Backlog | None = None) -> None:
    """Stream lines into the queue, a list per read (one queue item per 64 KiB, not per line); a
    full queue makes us stop reading (backpressure), never drop. `backlog` counts the reads as they come."""
    loop = asyncio.get_running_loop()
    try:
        async for lines in stream.chunks():
            if backlog is not None:
                backlog.read(len(lines), loop.time())
            await queue.put(lines)
    finally:
        await queue.put(_END)


async def read_log_file(path: str, max_bytes: int = 64 << 20) -> LogSummary:
    """`snapshot --log-file FILE`: a local file read once (the tail end if it is huge)."""

    tracker = LogTracker(f"file {path}")

    def _read() -> list[str]:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            if size > max_bytes:
                fh.seek(size - max_bytes)
                fh.readline()
            return fh.read().decode("utf-8", "replace").splitlines()

    lines = await asyncio.to_thread(_read)
    for i in range(0, len(lines), 5000):
        tracker.feed([parse_line(line) for line in lines[i:i + 5000]], time.time())
    tracker.flush()
    return tracker.summary()
