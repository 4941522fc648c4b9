"""SGLang's log lines, across versions (formats from SGLang 0.5.23's source and real users' logs,
see research/sglang_logs_metrics.md). One line in, one `LogEvent` out; unknown lines pass
through as kind "line". Pure and fast: the hot path is one prefix regex and a dispatch on a
keyword, so a flood of decode lines costs little.
"""

from __future__ import annotations

import datetime as dt
import re
import sys
from dataclasses import dataclass
from typing import Any

PREFIX = re.compile(
    r"^\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d{3})?|\d{2}:\d{2}:\d{2})(?P<ranks>(?: [A-Z_]+\d+)*)\] ")
# Python logging's own shapes, for lines that SGLang's processes print through other loggers or that a
# logging config (SGLANG_LOGGING_CONFIG_PATH) reformats:
#   `2025-02-26 15:44:36,973 - INFO - flashinfer.jit: Loading JIT ops: cascade`       (asctime - level - name:)
#   `(APIServer pid=1) INFO 06-21 07:16:53 [scheduler.py:239] Chunked prefill is …`  (level date [file:line])
PYLOG_PREFIX = re.compile(
    r"^(?:\((?P<proc>[^)]{1,60})\) )?(?:"
    r"(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d{3})?) -? ?(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)"
    r"(?: - | )(?:(?P<name>[\w.]+): |(?:\[(?P<where>[\w.]+:\d+)\] ))?"
    r"|(?P<level2>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<ts2>(?:\d{4}-)?\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d{3})?)"
    r" \[?(?P<where2>[\w.]+:\d+)\] )")
LEVEL_SEVERITY = {"WARNING": "warning", "WARN": "warning", "ERROR": "error", "CRITICAL": "error"}
# SGLang's own messages, wherever a logging config, a supervisor or a collector put them in the line
# (a pid between the level and `[file.py:line]`, Ray's `(Actor pid=N)`, journald's `host python3[N]:`,
# a container runtime's timestamp): the message body is what SGLang writes.
ANCHOR = re.compile(
    r"(?:Decode batch|Prefill batch|Load weight (?:begin|end)|KV Cache is allocated|Mamba Cache is allocated"
    r"|Capture (?:\w+ \w+ )?(?:cuda|CUDA) graph (?:begin|end)|max_total_num_tokens=|server_args=ServerArgs\("
    r"|Uvicorn running on|The server is fired up and ready to roll|Scheduler hit an exception"
    r"|Init torch distributed|KV cache pool is full)")
_ANY_TS = re.compile(r"(?P<full>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?)"
                     r"|(?:\d{2}-\d{2} )?\d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?")
_ANY_LEVEL = re.compile(r"\b(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b")
_ANY_RANK = re.compile(r"\b(?:TP|DP|PP|EP|CP|ATTN_TP|MOE_EP)\d+\b")
_ANY_PID = re.compile(r"\bpid[= ]\d+|\[\d+\]|\b\d{2,7}\b")
PREFIX_MAX = 240  # a longer "prefix" is a message that quotes SGLang, not a prefix
CAPACITY = re.compile(
    r"max_total_num_tokens=(\d+), (?:chunked_prefill_size=(-?\d+), )?max_prefill_tokens=(\d+), "
    r"max_running_requests=(\d+), context_len=(\d+)(?:, available_gpu_mem=([\d.]+) GB)?")
KVALLOC = re.compile(r"KV Cache is allocated\. (?:dtype: (\S+), )?#tokens: (\d+), "
                     r"(?:K size: ([\d.]+) GB, V size: ([\d.]+) GB|KV size: ([\d.]+) GB)")
MAMBA = re.compile(r"Mamba Cache is allocated\. max_mamba_cache_size: (\d+), conv_state size: ([\d.]+)\s*GB, "
                   r"ssm_state size: ([\d.]+)\s*GB")
LOADBEGIN = re.compile(r"Load weight begin\. avail mem=([\d.]+) GB")
LOADEND = re.compile(r"Load weight end\. (?:elapsed=([\d.]+) s, )?type=(\w+), (?:.*?)avail mem=([\d.]+) GB"
                     r"(?:, mem usage=([\d.]+) GB)?")
GRAPH_BEGIN = re.compile(r"Capture (?:(\w+) (\w+) )?(?:cuda|CUDA) graph begin\.(?:.*?avail mem=([\d.]+) GB)?")
GRAPH_END = re.compile(r"Capture (?:(\w+) (\w+) )?(?:cuda|CUDA) graph end\.(?: Time elapsed: ([\d.]+) s"
                       r"|.*?elapsed=([\d.]+) s(?:, mem usage=([\d.]+) GB)?(?:, avail mem=([\d.]+) GB)?)")
OOM = re.compile(r"(CUDA out of memory|OutOfMemoryError|Not enough memory|out of memory\. Try to lower"
                 r"|leave no GPU memory for the KV cache|Not enough GPU memory for hybrid)")
RETRACT = re.compile(r"KV cache pool is full\. Retract requests\. #retracted_reqs: (\d+)")

BOOT_PHASES = ("launch", "weights loading", "weights loaded", "mamba cache", "kv cache", "cuda graphs",
               "cuda graphs done", "capacity", "http up", "ready")


class _NoFields(dict[str, Any]):
    """The fields of a line that has none, one object shared by all of them (an empty dict of its
    own cost each held line 64 B): read like any dict, never written."""

    __slots__ = ()
    __hash__ = object.__hash__  # one shared default (dataclasses refuse an unhashable one)

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a line's fields are read only: build a dict of your own")

    __setitem__ = __delitem__ = setdefault = update = pop = popitem = clear = __ior__ = _refuse  # type: ignore[assignment]


NO_FIELDS: dict[str, Any] = _NoFields()
_intern = sys.intern
_set = object.__setattr__


@dataclass(frozen=True, slots=True)
class LogEvent:
    """One parsed line. `kind`: line, prefill, decode, boot, error, warning, traceback, access.

    A held line costs its text and little more (the state holds thousands, in the core and in each
    attached console): a line without fields shares `NO_FIELDS`, its stamp, kind, severity, ranks
    and phase are interned (a busy log's lines share their second, and decoding them in an attached
    console made new strings of each), and a batch line's statistics are read from its text, not
    kept as a copy of its tail (see `batch_fields`)."""

    kind: str
    text: str
    ts: str | None = None
    ranks: str = ""
    severity: str = "info"  # info, warning, error
    phase: str | None = None  # for boot events, one of BOOT_PHASES
    fields: dict[str, Any] = NO_FIELDS
    # A batch line's `key: value` list as recordings made before session 13 carry it; the parser
    # leaves it empty (the list is in `text`: `batch_fields` reads it there).
    body: str = ""
    # The host's time of the line (epoch seconds), where its source records one: journald's
    # `__REALTIME_TIMESTAMP` (µs; `journalctl -o json`), Docker's (ns; `docker logs --timestamps`).
    # Written once, by the source's decoder (console/host/sources/log.py `LineDecoder`). None where
    # the source has none (a file followed with `tail -F`, a recording made before it existed):
    # then the server's own stamp `ts` (whole seconds, unless SGLANG_LOG_MS) is the line's time.
    # Every fact dated from a log line reads it through `line_time`.
    at_s: float | None = None

    def __post_init__(self) -> None:
        # Every way a line is made passes here: the parser, `dataclasses.replace`, the parser
        # process's rows built again, the codec's decoding (msgspec calls it too).
        # Written only where interning gave another object: the parser's kinds, severities and
        # empty ranks are literals, interned already, and a frozen field's write is the cost here
        # (building a line went from 0.92 to 1.56 µs with every field written back).
        if not self.fields and self.fields is not NO_FIELDS:
            _set(self, "fields", NO_FIELDS)
        ts, phase, kind, severity, ranks = self.ts, self.phase, self.kind, self.severity, self.ranks
        if ts is not None and (held := _intern(ts)) is not ts:
            _set(self, "ts", held)
        if phase is not None and (held := _intern(phase)) is not phase:
            _set(self, "phase", held)
        if (held := _intern(kind)) is not kind:
            _set(self, "kind", held)
        if (held := _intern(severity)) is not severity:
            _set(self, "severity", held)
        if (held := _intern(ranks)) is not ranks:
            _set(self, "ranks", held)


def stamp_s(ts: str | None) -> float | None:
    """A log line's own stamp ("2026-11-30 15:04:05[.123456]", local time) as epoch seconds; a
    dateless "15:04:05" is today's. None when absent or not a stamp."""
    if not ts:
        return None
    try:
        if len(ts) <= 12:  # "15:04:05": today
            ts = f"{dt.date.today().isoformat()} {ts}"
        return dt.datetime.fromisoformat(ts.replace(",", ".")).timestamp()
    except ValueError:
        return None


def line_time(event: LogEvent) -> float | None:
    """When the line was logged, as epoch seconds: the host's time of it where its source gave one
    (`at_s`: journald's µs, Docker's ns), else the server's own stamp (a file's lines, whole seconds)."""
    at = event.at_s
    return at if at is not None else stamp_s(event.ts)


def batch_fields(event: LogEvent) -> dict[str, Any]:
    """The statistics of a Prefill/Decode line. Lazy: in a flood only the latest line is needed. Read
    from the line's text, found as the parser found it (so no copy of it is held per line)."""
    if event.body:  # a recording made before the list was left in the text
        return parse_batch_body(event.body)
    if event.kind in ("decode", "prefill"):
        batch = _batch(_message(event.text)[0])
        if batch is not None:
            return parse_batch_body(batch[1].rstrip(", "))
    return event.fields


def _num(value: str) -> float | int | bool:
    """Numbers as SGLang prints them; branch on the shape (exceptions are slow on a hot path)."""
    if value.isdigit():
        return int(value)
    if value[-1:] == "%":
        return float(value[:-1]) / 100
    if value == "True" or value == "False":
        return value == "True"
    return float(value)  # "0.11", "-561981", "2210.55"; raises ValueError on a label


def parse_batch_body(body: str) -> dict[str, Any]:
    """`key: value` pairs separated by ", " (plain string splits: 3x faster than a findall)."""
    out: dict[str, Any] = {}
    for part in body.split(", "):
        key, sep, value = part.partition(": ")
        if not sep:
            continue
        try:
            out[key.strip()] = _num(value)
        except ValueError:
            continue  # a field that is not a number (a label): skip it, keep the rest
    return out


def _f(x: str | None) -> float | None:
    return float(x) if x else None


def parse_line(line: str) -> LogEvent:
    """Never raises: a line whose numbers do not parse (`avail mem=1.2.3 GB`) is shown as text and
    marked `unparsed`, so one bad line never stops the log (issue 15)."""
    try:
        return _parse_line(line)
    except (ValueError, OverflowError, IndexError) as exc:
        return LogEvent("line", line, fields={"unparsed": f"{type(exc).__name__}: {str(exc)[:80]}"})


def _parse_line(line: str) -> LogEvent:
    """The one place where a line's kind and severity are decided: the tracker, the pane's colours and
    its `n`/`N` navigation all read `LogEvent.severity` from here."""
    event = _classify(line)
    if event.severity != "error" and line[:1] != "[":
        m = PYLOG_PREFIX.match(line)
        level = (m.group("level") or m.group("level2")) if m else None
        floor = LEVEL_SEVERITY.get(level or "")
        if floor is not None and (floor == "error" or event.severity == "info"):
            fields = dict(event.fields)
            fields.setdefault("kind", floor)
            return LogEvent(event.kind if event.kind not in ("line", "access") else floor, event.text, event.ts,
                            event.ranks, floor, event.phase, fields, event.body, event.at_s)
    return event


def _message(line: str) -> tuple[str, str | None, str]:
    """The message SGLang wrote, behind whatever prefix the line has: (message, stamp, ranks)."""
    m = PREFIX.match(line)
    ts = ranks = None
    msg = line
    if m:
        ts, ranks = m.group("ts"), m.group("ranks").strip()
        msg = line[m.end():]
    elif line[:1] != "[" and (p := PYLOG_PREFIX.match(line)) is not None:
        ts = p.group("ts") or p.group("ts2")
        ranks = p.group("proc") or ""
        msg = line[p.end():]
    ranks = ranks or ""
    # SGLang's own prefix is followed by its message, unless a config added fields after it ("[pid 7] ").
    if not msg.startswith(("Decode batch", "Prefill batch")) and (m is None or msg[:1] in "[("):
        moved = _relocate(msg)
        if moved is not None:
            msg, found_ts, found_ranks = moved
            ts, ranks = ts or found_ts, ranks or found_ranks
    return msg, ts, ranks


def _batch(msg: str) -> tuple[bool, str] | None:
    """A Decode/Prefill batch message: (decode, its `key: value` list); None for any other."""
    if msg.startswith("Decode batch") or msg.startswith("Prefill batch"):
        decode = msg[0] == "D"
        rest = msg[12 if decode else 13:]
        if rest.startswith(" ["):  # LOG_FORWARD_ITERS: "Decode batch [123], ..."
            rest = rest[rest.find("]") + 1:]
        if rest[:2] in (". ", ", "):
            return decode, rest[2:]
    return None


def _classify(line: str) -> LogEvent:
    msg, ts, ranks = _message(line)
    # Hot path first: batch statistics.
    batch = _batch(msg)
    if batch is not None:
        return LogEvent("decode" if batch[0] else "prefill", line, ts, ranks)
    if "INFO:" in msg and ('"GET ' in msg or '"POST ' in msg):
        return LogEvent("access", line, ts, ranks)
    boot = _boot(msg)
    if boot is not None:
        phase, fields = boot
        return LogEvent("boot", line, ts, ranks, phase=phase, fields=fields)
    if OOM.search(msg):
        return LogEvent("error", line, ts, ranks, "error", fields={"kind": "oom"})
    if msg.startswith("Scheduler hit an exception") or msg.startswith("Traceback (most recent call last)"):
        return LogEvent("traceback", line, ts, ranks, "error", fields={"kind": "exception"})
    if "watchdog timeout" in msg:
        return LogEvent("error", line, ts, ranks, "error", fields={"kind": "watchdog"})
    if msg.startswith("Health check failed"):
        return LogEvent("error", line, ts, ranks, "error", fields={"kind": "health"})
    if "NaN detected" in msg or "NaN in the logits" in msg:
        return LogEvent("error", line, ts, ranks, "error", fields={"kind": "nan"})
    if msg.startswith("Received sigquit"):
        return LogEvent("error", line, ts, ranks, "error", fields={"kind": "crash"})
    r = RETRACT.search(msg)
    if r:
        return LogEvent("warning", line, ts, ranks, "warning", fields={"kind": "retract", "retracted": int(r.group(1))})
    if "is deprecated" in msg or "deprecated and will be removed" in msg:
        return LogEvent("warning", line, ts, ranks, "warning", fields={"kind": "deprecation"})
    if "is larger than the profiled value" in msg or msg.startswith(("WARNING", "Warning")) or " WARNING " in msg:
        return LogEvent("warning", line, ts, ranks, "warning", fields={"kind": "warning"})
    if msg.startswith(("ERROR", "RuntimeError", "ValueError", "AssertionError", "torch.")) or " ERROR " in msg:
        return LogEvent("error", line, ts, ranks, "error", fields={"kind": "error"})
    return LogEvent("line", line, ts, ranks)


def _relocate(msg: str) -> tuple[str, str | None, str] | None:
    """SGLang's message behind a prefix this parser does not know: (message, timestamp, ranks).

    The prefix must look like one (a time, a level, a pid or a rank in it; no quote; it ends where
    a field ends), so a request or an error that merely quotes "Decode batch" stays a line."""
    m = ANCHOR.search(msg, 0, PREFIX_MAX + 40)
    if m is None or m.start() == 0 or m.start() > PREFIX_MAX:
        return None
    prefix = msg[:m.start()]
    if prefix[-1] not in " \t|:]-" or '"' in prefix or "'" in prefix:
        return None
    stamps = list(_ANY_TS.finditer(prefix))
    if not stamps and not _ANY_LEVEL.search(prefix) and not _ANY_PID.search(prefix):
        return None
    # SGLang's own stamp is the innermost full date-time (a supervisor's comes first, often without the year).
    full = [t.group("full") for t in stamps if t.group("full")]
    ts = full[-1].replace("T", " ") if full else (stamps[0].group(0) if stamps else None)
    ranks = " ".join(_ANY_RANK.findall(prefix))
    return msg[m.start():], ts, ranks


def _boot(msg: str) -> tuple[str, dict[str, Any]] | None:
    if msg.startswith("server_args=ServerArgs("):
        return "launch", {}
    if msg.startswith("Load weight begin"):
        m = LOADBEGIN.search(msg)
        return "weights loading", {"avail_gib": _f(m.group(1)) if m else None}
    if msg.startswith("Load weight end"):
        m = LOADEND.search(msg)
        if m:
            return "weights loaded", {"seconds": _f(m.group(1)), "model_class": m.group(2),
                                      "avail_gib": _f(m.group(3)), "weights_gib": _f(m.group(4))}
        return "weights loaded", {}
    if msg.startswith("Mamba Cache is allocated"):
        m = MAMBA.search(msg)
        return "mamba cache", ({"max_mamba_cache_size": int(m.group(1)), "conv_gib": _f(m.group(2)),
                                "ssm_gib": _f(m.group(3))} if m else {})
    if "KV Cache is allocated" in msg:
        m = KVALLOC.search(msg)
        if m:
            return "kv cache", {"dtype": m.group(1), "tokens": int(m.group(2)), "k_gib": _f(m.group(3)),
                                "v_gib": _f(m.group(4)), "kv_gib": _f(m.group(5))}
        return "kv cache", {}
    if msg.startswith("Capture") and "graph begin" in msg:
        m = GRAPH_BEGIN.search(msg)
        return "cuda graphs", {"avail_gib": _f(m.group(3)) if m else None}
    if msg.startswith("Capture") and "graph end" in msg:
        m = GRAPH_END.search(msg)
        secs = (m.group(3) or m.group(4)) if m else None
        return "cuda graphs done", {"seconds": _f(secs), "graph_gib": _f(m.group(5)) if m else None}
    if msg.startswith("max_total_num_tokens="):
        m = CAPACITY.search(msg)
        if m:
            return "capacity", {"max_total_num_tokens": int(m.group(1)),
                                "chunked_prefill_size": int(m.group(2)) if m.group(2) else None,
                                "max_prefill_tokens": int(m.group(3)), "max_running_requests": int(m.group(4)),
                                "context_len": int(m.group(5)), "available_gpu_mem_gib": _f(m.group(6))}
        return "capacity", {}
    if "Uvicorn running on" in msg:
        return "http up", {}
    if "The server is fired up and ready to roll" in msg:
        return "ready", {}
    return None
