"""The swap report, from a recording: what changed and why, the fit predicted against what the server
logged, the download and its verification, the boot timeline, time to ready and downtime, GPU memory
before and after, the benchmark before and after, and who did (and approved) what, when.

The recording is replayed into a HostState (the same reducer the console uses), so the report says
what the screen said. Every string is passed through `redact_text` once more on the way out.
"""

from __future__ import annotations

import html
import json
import posixpath
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from console.core.derive.swap_observer import BESIDE_CONSOLE, _side, boot_time, verification
from console.core.derive.swap_view import audit_summary, format_duration, whole_second_parts
from console.core.recording import FLUSH_EVERY_S, read_recording
from console.core.state import HostState, ReadingChanged
from console.domain.analysis.fit import calibration
from console.domain.paths import host_named
from console.domain.swap import bench_choice, downtime_report
from console.domain.swap.preflight import fit_result
from console.redact import redact_text
from console.units import counted

SECTIONS = ("Host", "Old → new", "Swap plan", "Diff", "Fit", "Download", "Boot timeline", "Time to ready and downtime",
            "Path and downtime", "GPU memory", "Benchmark", "Audit log")  # "Path and downtime": downtime_report.py
BENCH_COLUMNS = (("output_throughput", "output tok/s", "{:.1f}"), ("request_throughput", "req/s", "{:.2f}"),
                 ("median_ttft_ms", "median TTFT ms", "{:.1f}"), ("p99_ttft_ms", "p99 TTFT ms", "{:.1f}"),
                 ("median_itl_ms", "median ITL ms", "{:.2f}"), ("accept_length", "accept len", "{:.2f}"))


# A recording last written to this recently is still being written (its writer flushes every
# FLUSH_EVERY_S, 5 s): three flushes missed and it is taken as ended where it ends.
STILL_WRITTEN_S = 3 * FLUSH_EVERY_S


class ReportError(ValueError):
    """No swap in this recording, or nothing to report (one line)."""


def _ts(at: float | None) -> str | None:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)) if at else None


def _host_ts(at: float | None) -> str | None:
    """The host's time of a line (journald's µs, Docker's ns) to the millisecond, host local time."""
    if at is None:
        return None
    ms = int(at * 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms // 1000)) + f".{ms % 1000:03d}"


# The clock of the host's time of a log line, by the log source (console/host/sources/log.py's labels)
LINE_CLOCKS = (("journal of ", "journald"), ("docker logs of ", "docker"))
CLOCK_NOTES = {
    "journald": "journald's time of each line (__REALTIME_TIMESTAMP, the host's clock), to the millisecond",
    "docker": "Docker's time of each line (docker logs --timestamps, the host's clock), to the millisecond",
    "stamp": "the server's own stamp of each line (the log source gave no host time: whole seconds unless "
             "SGLANG_LOG_MS)",
}


def _line_clock(source: str | None) -> str:
    """Whose time the host's time of the log's lines is: journald's, Docker's, else only the stamp."""
    return next((clock for prefix, clock in LINE_CLOCKS if (source or "").startswith(prefix)), "stamp")


def _clock_note(rows: list[dict[str, Any]]) -> str | None:
    """One line under the boot table: which clock its "at" column is (each when they differ)."""
    clocks = list(dict.fromkeys(row["clock"] for row in rows))
    if not clocks:
        return None
    if len(clocks) == 1:
        return f"at: {CLOCK_NOTES[clocks[0]]}"
    return "at: " + "; else ".join(CLOCK_NOTES[c] for c in clocks)


def _model_path(side: Any) -> str | None:
    v = side.command.value("--model-path") if side is not None and side.command is not None else None
    return v if isinstance(v, str) and v else None


def _in_container(side: Any) -> bool:
    """A side read from `docker inspect` or a compose file (console/domain/analysis/container_diff.py)."""
    return side is not None and side.unit is None and (side.text or "").startswith(("# inspect:", "# compose:"))


def _compared(report: Any) -> str:
    """What the diff compared, old against new, in the host's words: two units, two containers, or a
    compose file's service (its launch as the file writes it) against the old container."""
    new = report.new if report is not None else None
    if not _in_container(new):
        return "the units"
    if (new.text or "").startswith("# compose:"):
        return "the compose file's service against the old container"
    return "the containers"


def _model_dir_on_host(side: Any) -> str | None:
    """The side's --model-path as a host directory: inside a container it is the container's path,
    read through the container's bind mounts (its launch's "mount: SRC -> DEST" lines); a path under
    no mount is the container's own, said as it is."""
    path = _model_path(side)
    if path is None or not _in_container(side):
        return path
    best: tuple[str, str] | None = None
    for line in (side.text or "").splitlines():
        if not line.startswith("mount: ") or " -> " not in line:
            continue
        source, dest = line.removeprefix("mount: ").removesuffix(" (ro)").split(" -> ", 1)
        dest = posixpath.normpath(dest)
        if (path == dest or path.startswith(dest.rstrip("/") + "/")) and (best is None or len(dest) > len(best[1])):
            best = (source, dest)
    if best is None:
        return path
    rest = path[len(best[1]):].lstrip("/")
    return posixpath.join(best[0], rest) if rest else best[0]


def _model_name(side: Any) -> str | None:
    if side is None or side.command is None:
        return None
    for flag in ("--served-model-name", "--model-path"):
        v = side.command.value(flag)
        if isinstance(v, str) and v:
            return v
    return None



def _memory(fact: dict[str, Any]) -> dict[str, Any]:
    """The GPU memory section: the observer's facts in the swap state, as they are (never chosen
    again here from the readings)."""
    def part(key: str) -> dict[str, Any]:
        return fact.get(key) or {}

    return {"before": part("before").get("gpus") or [], "before_at": _ts(part("before").get("at")),
            "stopped": part("stopped").get("gpus") or [], "stopped_at": _ts(part("stopped").get("at")),
            "after": part("after").get("gpus") or [], "after_at": _ts(part("after").get("at")),
            "after_what": part("after").get("what"), "freed": fact.get("freed") or [],
            "freed_by": fact.get("freed_by"), "recorded": bool(fact)}


@dataclass
class ReportBuilder:
    """Fed every event of a session in order (a recording, or a live state's events)."""

    host: str
    label: str
    state: HostState = field(init=False)
    started_at_s: float | None = None
    ended_at_s: float | None = None

    old_side: Any = None  # the old unit as first read (before the install replaced its file: in place)
    swap_boot: tuple[Any, ...] = ()  # the log's boot as it stood before a rollback began (the new server's)
    swap_log: Any = None  # the log's summary then: what the new server logged (its capacity, its caches)

    _t: float = 0.0

    def __post_init__(self) -> None:
        # The recording's clock, not this machine's: "now" is the time of the event being fed.
        self.state = HostState(self.host, label=self.label, clock=lambda: self._t)

    def feed(self, t: float, event: Any) -> None:
        """One event of the session, as the state applied it. The swap's facts are the observer's,
        written into the state live (and so into the recording): the report reads them, never
        derives them again."""
        self.started_at_s = t if self.started_at_s is None else self.started_at_s
        self.ended_at_s = self._t = t
        self._apply(event)

    def _apply(self, event: Any) -> None:
        self.state.apply(event)
        if isinstance(event, ReadingChanged) and event.source == "service" and self.old_side is None \
                and event.reading.data is not None and self.state.swap.steps["install"].state == "pending":
            setup = self.state.swap.setup
            side = _side(event.reading.data, setup.old_unit if setup is not None else None) \
                or event.reading.data.old
            if side is not None and side.command is not None:
                self.old_side = side
        rollback = self.state.swap.steps.get("rollback")
        log = self.state.data("log")
        if log is not None and (rollback is None or rollback.started_at_s is None
                                or (log.boot and not _the_rollbacks_boot(log.boot, rollback))):
            # the swap's boot as the log tells it: also a line read after the rollback began, while the
            # boot it belongs to was launched before (its ready line, read late)
            self.swap_boot = tuple(log.boot)
            self.swap_log = log

    def build(self) -> dict[str, Any]:
        s = self.state
        swap = s.swap
        if all(step.state == "pending" for step in swap.steps.values()) and swap.downtime is None \
                and not swap.audit:
            raise ReportError("no swap in this recording (no swap step ran or was seen on the host)")
        report = s.data("service")
        setup = swap.setup
        old_unit, new_unit = (setup.old_unit, setup.new_unit) if setup else (
            (report.old.name if report is not None and report.old is not None else None),
            (report.new.name if report is not None and report.new is not None else None))
        out: dict[str, Any] = {
            "host": {"host": s.host, "label": s.label, "from": _ts(self.started_at_s), "to": _ts(self.ended_at_s)},
            "old_new": {
                "old_unit": old_unit, "new_unit": new_unit,
                "old_model": _model_name(self.old_side or (report.old if report else None)),
                "new_model": _model_name(report.new if report else None),
                "old_model_dir": _model_dir_on_host(self.old_side or (report.old if report else None)),
                "kind": "container" if _in_container(self.old_side or (report.old if report else None)) else "unit",
                "repo_id": setup.repo_id if setup else None, "model_dir": setup.model_dir if setup else None,
                "compose_file": setup.compose_file if setup else None,
                "old_service": setup.old_service if setup else None,
                "new_service": setup.new_service if setup else None,
            },
            "steps": [{"key": st.key, "title": st.title, "state": st.state, "started": _ts(st.started_at_s),
                       "duration_s": st.duration_s, "detail": st.detail, "who": st.who}
                      for st in swap.ordered_steps()],
            "gate": [{"check": c.name, "ok": c.ok, "reason": c.reason, "overridden_by": c.overridden_by}
                     for c in swap.gate],
        }
        on = out["old_new"]
        if swap.path() == "in-place" and on["old_model"] and on["new_model"] and on["old_model"] != on["new_model"]:
            # A weight update keeps the name the server was started with (SGLang's served_model_name):
            # clients ask for the old name until the unit's new one takes effect at a restart
            on["served_as"] = on["old_model"]
        # In place on one unit the install rewrote the unit that serves: its change is the observer's
        # fact (the unit as it stood before the install), never the unit read against itself.
        installed = swap.install_diff()
        unknown = swap.install_change_unknown()
        out["diff"] = {
            # where the change was read: "the units" (old against new; containers: their `docker inspect`,
            # or the compose file's service against the old container), "the install" (the unit before
            # it as a reading saw it), "the backup" (UNIT.bak-STAMP on the host), or "unknown"
            "from": "unknown" if unknown else ("the backup" if installed.get("from") == "backup" else "the install")
            if installed or unknown else _compared(report),
            "unknown": unknown, "backup": installed.get("backup"),
            "installed_at": _ts(installed.get("installed_at")), "installed_by": installed.get("by"),
            "changes": [] if unknown else installed["changes"] if installed else [
                {"flag": c.flag, "change": c.change, "old": c.old, "new": c.new, "category": c.category,
                 "reason": c.reason} for c in (report.changes if report else ())],
            "env_changes": [] if unknown else installed["env_changes"] if installed else [
                {"name": e.name, "change": e.change, "old": e.old, "new": e.new}
                for e in (report.env_changes if report else ())],
            "unit_changes": [] if unknown else installed.get("unit_changes", []) if installed else [
                {"directive": u.directive, "section": u.section, "change": u.change, "old": u.old, "new": u.new,
                 "reason": u.reason} for u in (report.unit_changes if report else ())],
            "lints": [{"severity": lint.severity, "flag": lint.flag, "message": lint.message}
                      for lint in (report.lints if report else ())],
        }
        # the gate's and the diff pane's one figure: flags, environment and unit directives
        diff = out["diff"]
        if not unknown:  # a change nobody can read has no count (the Diff says why)
            diff["count"] = len(diff["changes"]) + len(diff["env_changes"]) + len(diff["unit_changes"])
        out["fit"] = self._fit()
        out["download"] = self._download()
        out["boot"], out["boot_note"] = self._boot()
        d = swap.downtime
        # The new server's own boot on every path (in place: the update's pause), from the state.
        ready = swap.time_to_ready()
        path = swap.path()
        step = swap.steps.get({"in-place": "in_place", "beside": "beside"}.get(path or "", "start_new"))
        out["timing"] = {
            "time_to_ready_s": ready[0] if ready else None,
            "time_to_ready_from": ready[1] if ready else None,
            "time_to_ready_to": ready[2] if ready else None,
            # the step that brings the new weights up on this path (start_new; in place: in_place;
            # beside: beside), and its state (a key named start_new_state held it on every path)
            "new_server_step": step.key if step else None,
            "new_server_state": step.state if step else None,
            "downtime_s": swap.downtime_s(self.ended_at_s or 0.0) if d else None,
            "downtime_running": bool(d is not None and d.ended_at_s is None),
            "downtime_parts": [{"part": n, "seconds": v} for n, v in swap.downtime_parts()],
            "downtime_from": _ts(d.started_at_s) if d else None, "downtime_from_source": d.start_source if d else None,
            "downtime_to": _ts(d.ended_at_s) if d else None,
            "downtime_to_source": (d.end_source or "not ready yet (still running at the end of the recording)")
            if d else None,
        }
        # issue 24 hook: swap_path, downtime_s, predicted_downtime_s and the path's section
        out.update(downtime_report.section(s, out["timing"]["downtime_s"]))
        out["gpu"] = _memory(swap.memory())
        out["bench"] = self._bench(out["old_new"])
        # Each command dated when it was sent (its entry is written when the reply came back, `duration_s`
        # later): the update's POST was sent when the pause began, not when the weights were in
        out["audit"] = [{"who": e.who, "at": _ts(_sent_at(e)), "answered_at": _ts(e.at_s),
                         "answered_after_s": e.duration_s, "action": e.action, "command": e.command,
                         "exit_status": e.exit_status, "output_tail": e.output_tail, "note": e.note}
                        for e in swap.audit]
        out["approvals"] = [{"action": a.action, "requested_by": a.requested_by, "requested_at": _ts(a.requested_at_s),
                             "status": a.status, "decided_by": a.decided_by, "decided_at": _ts(a.decided_at_s)}
                            for a in swap.approvals.values()]
        # Words name a path as the host names it (the demo's sandbox root left out); the audit keeps
        # the exact commands the console ran and what the host answered.
        root = s.info.host_root
        out = {k: v if k == "audit" else _host_named(v, root) for k, v in out.items()}
        return _redact(out)

    def _boot(self) -> tuple[list[dict[str, Any]], str | None]:
        """The swap's own boot: the new server's (restart, beside); in place, the update's lines
        (no server booted). A boot the log shows from before the swap began is not this swap's."""
        swap = self.state.swap
        log = self.state.data("log")
        boot = list(log.boot if log else ())
        rollback = swap.steps.get("rollback")
        if boot and rollback is not None and rollback.started_at_s is not None and _the_rollbacks_boot(boot, rollback):
            boot = list(self.swap_boot)  # the log's boot now is the rollback's (the old server's again)
        began = swap.began_at_s()
        launch = next((boot_time(b) for b in boot if b.phase == "launch"), None)
        earlier = began is not None and launch is not None and launch < began - 1
        d = swap.downtime
        # Each row's "at" is the host's time of its line (journald's, Docker's: `clock` says whose),
        # else the server's own stamp ("stamp": a file's lines, a recording made before)
        source = _line_clock(log.source if log is not None else None)
        if swap.path() == "in-place":
            rows = []
            if d is not None and d.start_source.startswith("in place") and d.started_at_s is not None:
                # the observer's dates of the update's begin and end lines (`line_time`)
                rows.append({"phase": "update begin", "at": _host_ts(d.started_at_s), "stamp": None,
                             "at_s": d.started_at_s, "clock": source, "seconds": 0.0,
                             "detail": d.start_source.removeprefix("in place: ")})
                if d.ended_at_s is not None:
                    rows.append({"phase": "update end", "at": _host_ts(d.ended_at_s), "stamp": None,
                                 "at_s": d.ended_at_s, "clock": source,
                                 "seconds": round(d.ended_at_s - d.started_at_s, 2), "detail": d.end_source})
            return rows, "in place: no server booted; the running server loaded the new weights" + (
                f" (the log's boot at {boot[0].at} is the old server's, before the swap)" if boot and earlier else "")
        if earlier:
            return [], (f"the new server's boot is not in the log yet (the log's boot at {boot[0].at} is the old "
                        "server's, before the swap)")
        def clock(b: Any) -> str:  # a file's line: its at_s is its stamp's (line_time); older recordings: none
            return source if b.at_s is not None else "stamp"

        return [{"phase": b.phase, "at": b.at if clock(b) == "stamp" else _host_ts(b.at_s), "stamp": b.at,
                 "at_s": b.at_s, "clock": clock(b), "seconds": b.seconds, "detail": b.detail} for b in boot], None

    def _fit(self) -> dict[str, Any]:
        result, why = fit_result(self.state)
        if result is None:
            return {"predicted": None, "why_not": why, "rows": []}
        # What the new server logged: after a rollback the log's summary is the old server's boot
        # again (its capacity, its caches), so the one kept from before the rollback began is read.
        log = self.swap_log if self.swap_log is not None else self.state.data("log")
        rows = calibration(result, log)
        swap = self.state.swap
        notes = []
        if swap.path() == "in-place":
            notes.append("the server logged: its own boot, before the update (an update in place boots nothing)")
        died = next((st for st in swap.steps.values() if st.state == "failed" and st.key != "rollback"
                     and "out of memory" in (st.detail or "").lower()), None)
        if died is not None and result.fits:
            notes.append(f"the prediction said it fits, but the new server ran out of GPU memory "
                         f"({died.title[:1].lower()}{died.title[1:]}: failed)")
        return {"predicted": {"fits": result.fits, "kv_tokens": result.max_total_tokens,
                              "max_running_requests": result.max_running_requests,
                              "weights_gib_per_gpu": round(result.weights_gib, 2),
                              "binding": result.binding_constraint},
                "rows": [{"what": w, "predicted": p, "logged": a} for w, p, a in rows], "notes": notes}

    def _download(self) -> dict[str, Any]:
        d = self.state.data("download")
        v = verification(self.state)
        return {
            "model_dir": d.model_dir if d else None, "complete": d.complete if d else None,
            "shards": f"{d.shards_done}/{d.shards_total}" if d else None,
            "bytes_done": d.bytes_done if d else None, "bytes_total": d.bytes_total if d else None,
            "problems": list(d.problems) if d else [],
            "verification": None if v is None else {"files": v.total_files, "matched": v.matched,
                                                    "mismatched": list(v.mismatched), "finished": v.finished,
                                                    "error": v.error},
        }

    def _bench(self, old_new: dict[str, Any]) -> dict[str, Any]:
        """Before and after by the one like-workload rule (console/domain/swap/bench_choice.py: the
        benchmark step's words read the same choice)."""
        c = bench_choice.choose(self.state)
        return {"before": _bench_row(c.before) if c.before else None, "after": [_bench_row(r) for r in c.after],
                "note": c.note,
                "compared": {"before": _bench_row(c.compared[0]), "after": _bench_row(c.compared[1])}
                if c.compared else None}


def _sent_at(entry: Any) -> float:
    """When an audited command was sent: its reply's time less how long it took, where that is known."""
    took = entry.duration_s
    return entry.at_s - took if isinstance(took, (int, float)) and 0 <= took <= entry.at_s else entry.at_s


def _the_rollbacks_boot(boot: Any, rollback: Any) -> bool:
    """The log's boot is the rollback's (the old server's again): launched once the rollback began."""
    return (boot_time(boot[0]) or 0.0) >= int(rollback.started_at_s)


def _bench_row(r: dict[str, Any]) -> dict[str, Any]:
    return {"model": r.get("model"), "concurrency": r.get("max_concurrency") or r.get("concurrency_level")
            or r.get("concurrency"), "input_len": r.get("random_input_len"), "output_len": r.get("random_output_len"),
            "prompts": r.get("num_prompts"), "dataset": r.get("dataset_name"),
            **{k: r.get(k) for k, _, _ in BENCH_COLUMNS}}


def _host_named(value: Any, root: str | None) -> Any:
    """Every string in `value` with the paths under `root` named as the host names them
    (console/domain/paths.py); `value` as it is on a real host (no root)."""
    if not root:
        return value
    if isinstance(value, str):
        return host_named(value, root)
    if isinstance(value, dict):
        return {k: _host_named(v, root) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_host_named(v, root) for v in value]
    return value


def _redact(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: _redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact(v) for v in value]
    return value


def _written_lately(path: Path) -> bool:
    try:
        return time.time() - path.stat().st_mtime <= STILL_WRITTEN_S
    except OSError:
        return False


def report_from_recording(path: Path, *, in_progress: bool = False) -> dict[str, Any]:
    """The report of a recording; `in_progress`: the session is still writing it (the palette's
    report): its end is where the writing is, said as "in progress", never as damage."""
    rec = read_recording(path)
    # A recording without its end that was written to a moment ago is being written (by this
    # console's palette, or another console still recording): what is there, "in progress". One
    # not written to since is what a killed session left: its end is the damage.
    if not in_progress and rec.damage is not None and "reading limit" not in rec.damage and _written_lately(path):
        in_progress = True
    header = rec.header
    builder = ReportBuilder(str(header.get("host") or "?"), str(header.get("label") or header.get("host") or "?"))
    for t, event in rec.entries:
        builder.feed(t, event)
    out = builder.build()
    out["host"]["recording"] = str(path)
    if header.get("demo"):
        out["host"]["note"] = ("the simulated demo host: its story runs time-compressed, so durations are "
                               "shorter than on a real host")
    if in_progress:
        out["host"]["in_progress"] = True
        out["host"]["recording_note"] = (f"in progress: the session is still recording; this report reads "
                                         f"the {len(rec.entries):,} events written so far")
    elif rec.damage:
        out["host"]["recording_damage"] = rec.damage
    return out


# -- rendering ---------------------------------------------------------------------------------------
def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.2f}"
    if isinstance(v, (list, tuple)):
        return " ".join(str(x) for x in v)
    return str(v)


def _dur(s: float | None) -> str:
    return format_duration(s)  # the plan's rounding: one figure everywhere


def _yes(v: Any) -> str:
    return "yes" if v is True else "no" if v is False else "unknown"


def headline(r: dict[str, Any]) -> list[str]:
    """The facts first: old → new, downtime, time to ready, before/after."""
    on, t, b = r["old_new"], r["timing"], r["bench"]
    old, new = on["old_model"] or on["old_unit"], on["new_model"] or on["new_unit"]
    if old == new and on.get("old_model_dir") and on.get("model_dir") and on["old_model_dir"] != on["model_dir"]:
        # the same name serves other weights (in place): the directories say what changed
        old, new = f"{old} ({on['old_model_dir']})", f"{new} ({on['model_dir']})"
    lines = [f"{_fmt(old)} → {_fmt(new)}" + (f" (still served as {on['served_as']} until restart)"
                                             if on.get("served_as") else "") + _rolled_back(r["steps"])]
    if t["downtime_s"] is not None:
        parts = " + ".join(f"{name} {_dur(sec)}" for name, sec in _whole_parts(t))
        source = t.get("downtime_from_source") or ""
        if not parts and source.startswith("beside") and source != BESIDE_CONSOLE:
            # seen on the host (an operator's, a console's that ended): what its facts said, and whose
            parts = "none, " + source.removeprefix("beside: ")
        elif not parts and source.startswith("beside"):
            parts = "none, traffic moved to the new server before the old one stopped"
        lines.append(f"downtime {_dur(t['downtime_s'])}" + (" (still running at the end of the recording)"
                                                             if t.get("downtime_running") else "")
                     + (f": {parts}" if parts else ""))
    else:
        lines.append("downtime: not measured (the old service was not seen stopping)")
    lines.append(f"time to ready {_dur(t['time_to_ready_s'])} (from {t.get('time_to_ready_from')} to "
                 f"{t.get('time_to_ready_to')})" if t["time_to_ready_s"] is not None
                 else f"time to ready: – (the new service: {_fmt(t['new_server_state'])})")
    pair = b.get("compared") or {}
    before, after = pair.get("before"), pair.get("after")
    if before and after and isinstance(before.get("output_throughput"), (int, float)) \
            and isinstance(after.get("output_throughput"), (int, float)):
        lines.append(f"output tok/s {before['output_throughput']:.0f} before → {after['output_throughput']:.0f} "
                     f"after ({_workload_text_row(after)})" + (f"; {b['note']}" if b["note"] else ""))
    elif b["note"]:
        lines.append(f"benchmark: {b['note']}")
    return lines


def _tail(text: str, width: int) -> str:
    """The end of a command's output in at most `width` characters, begun at a word ("…" before it),
    never cut inside one ("vice  Running as unit: …" was the end of "service")."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    end = text[-(width - 1):]
    cut = end.find(" ")
    return "…" + (end[cut + 1:] if 0 <= cut < width // 2 else end)


def _whole_parts(t: dict[str, Any]) -> list[tuple[str, int]]:
    return whole_second_parts([(p["part"], p["seconds"]) for p in t.get("downtime_parts") or []])


def _rolled_back(steps: list[dict[str, Any]]) -> str:
    """": rolled back (…)" after old → new when a rollback ran: the swap did not take."""
    rollback = next((s for s in steps if s["key"] == "rollback"), None)
    if rollback is None or rollback["state"] not in ("done", "failed", "running"):
        return ""
    failed = next((s for s in steps if s["state"] == "failed" and s["key"] != "rollback"), None)
    why = f"{failed['title'][:1].lower()}{failed['title'][1:]}: failed" if failed else "asked for"
    if rollback["state"] == "failed":
        return f": ROLLBACK FAILED ({why}; {rollback['detail'] or 'the rollback did not end well'})"
    if rollback["state"] == "running":
        return f": rolling back ({why})"
    return f": rolled back ({why}; {rollback['detail'] or 'the old service serves again'})"


def _workload_text_row(x: dict[str, Any]) -> str:
    return f"c={_fmt(x.get('concurrency'))} · {_fmt(x.get('input_len'))}/{_fmt(x.get('output_len'))}"


def report_title(r: dict[str, Any]) -> str:
    host = r["host"]
    day = (host.get("from") or "")[:10]
    return f"Swap report: {host['label']}" + (f", {day}" if day else "")


def _tables(r: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]], list[str]]]:
    """(section, header, rows, notes) for every section, shared by Markdown and HTML."""
    on = r["old_new"]
    t = r["timing"]
    sections: list[tuple[str, list[str], list[list[str]], list[str]]] = []
    host = r["host"]
    sections.append(("Host", ["host", "label", "from", "to"],
                     [[_fmt(host["host"]), _fmt(host["label"]), _fmt(host["from"]), _fmt(host["to"])]],
                     [n for n in (host.get("note"), host.get("recording_note"), host.get("recording_damage")) if n]))
    sections.append(("Old → new", ["", "old", "new"], [
        [on.get("kind") or "unit", _fmt(on["old_unit"]), _fmt(on["new_unit"])],
        ["model", _fmt(on["old_model"]), _fmt(on["new_model"]) + (
            f" (the unit's; still served as {on['served_as']} until restart)" if on.get("served_as") else "")],
        ["repo / directory", _fmt(on.get("old_model_dir")), f"{_fmt(on['repo_id'])} → {_fmt(on['model_dir'])}"],
        *([["compose service", _fmt(on.get("old_service")),
            f"{_fmt(on.get('new_service'))} in {_fmt(on['compose_file'])}"]] if on.get("compose_file") else [])],
        []))
    sections.append(("Swap plan", ["step", "state", "started", "took", "by", "detail"],
                     [[s["title"], s["state"], _fmt(s["started"]), _dur(s["duration_s"]), _fmt(s["who"]),
                       s["detail"]] for s in r["steps"]],
                     [f"gate: {g['check']} {'ok' if g['ok'] else 'FAILED' if g['ok'] is False else 'unknown'}"
                      f" — {g['reason']}" + (f" (overridden by {g['overridden_by']})" if g["overridden_by"] else "")
                      for g in r["gate"]]))
    diff = r["diff"]
    served_as = on.get("served_as")
    sections.append(("Diff", ["flag", "change", "old", "new", "why"],
                     [[c["flag"], c["change"], _fmt(c["old"]), _fmt(c["new"]), _fmt(c["reason"])]
                      for c in diff["changes"]]
                     + [[f"[{u['section']}] {u['directive']}", u["change"], _fmt(u["old"]), _fmt(u["new"]),
                         _fmt(u["reason"])] for u in diff.get("unit_changes") or ()],
                     _diff_source(diff)
                     + ([f"{counted(diff['count'], 'change')}: flags, environment and unit directives "
                         "(the gate's count)"]
                        if "count" in diff else [])
                     + ([f"in place: still served as {served_as} until restart (a weight update keeps the name "
                         "the server was started with; the unit's --served-model-name takes effect at a restart)"]
                        if served_as else [])
                     + [f"{lint['severity']}: " + (f"{lint['flag']} " if lint["flag"] and not
                                                 lint["message"].startswith(lint["flag"]) else "") + lint["message"]
                        for lint in diff["lints"]]
                     + [f"environment {e['change']}: {e['name']}" for e in diff["env_changes"]]))
    fit = r["fit"]
    p = fit["predicted"]
    sections.append(("Fit", ["", "predicted", "the server logged"],
                     [[x["what"], x["predicted"], x["logged"]] for x in fit["rows"]],
                     [f"fits: {_yes(p['fits'])}; binding: {p['binding']}" if p else
                      f"no prediction: {fit['why_not']}", *fit.get("notes", ())]))
    d = r["download"]
    v = d["verification"]
    sections.append(("Download", ["model dir", "complete", "shards", "GB"],
                     [[_fmt(d["model_dir"]), _yes(d["complete"]), _fmt(d["shards"]),
                       f"{(d['bytes_done'] or 0) / 1e9:.1f} of {(d['bytes_total'] or 0) / 1e9:.1f}"]],
                     [("sha256: not verified" if v is None else
                       f"sha256: {v['matched']}/{v['files']} match" + (f", differ: {', '.join(v['mismatched'])}"
                                                                      if v["mismatched"] else ""))]
                     + d["problems"]))
    since = "s since the update's begin" if r["boot"] and r["boot"][0]["phase"] == "update begin" else "s since launch"
    clock = _clock_note([b for b in r["boot"] if b.get("clock")])
    sections.append(("Boot timeline", ["phase", "at", since, "detail"],
                     [[b["phase"], _fmt(b["at"]), _fmt(b["seconds"]), b["detail"]] for b in r["boot"]],
                     [n for n in (clock, r.get("boot_note")) if n]))
    sections.append(("Time to ready and downtime", ["", "value", "from", "to"], [
        ["time to ready", _dur(t["time_to_ready_s"]), _fmt(t.get("time_to_ready_from") or "the new server's start"),
         _fmt(t.get("time_to_ready_to") or t["new_server_state"])],
        ["downtime", _dur(t["downtime_s"]), f"{_fmt(t['downtime_from'])} ({_fmt(t['downtime_from_source'])})",
         f"{_fmt(t['downtime_to'])} ({_fmt(t['downtime_to_source'])})"],
        *[[f"  {name}", _dur(sec), "", ""] for name, sec in _whole_parts(t)]],
        ["parts in whole seconds that add up to the downtime's (the JSON keeps each to the hundredth)"]
        if t.get("downtime_parts") else []))
    sections += downtime_report.tables(r)  # issue 24 hook
    sections.append(_gpu_table(r["gpu"]))
    b = r["bench"]
    def bench_row(which: str, x: dict[str, Any]) -> list[str]:
        return [which, _fmt(x["model"]), _fmt(x.get("concurrency")), _fmt(x.get("input_len")),
                _fmt(x.get("output_len")), _fmt(x.get("prompts")), _fmt(x.get("dataset"))] + [
            _num(x.get(k), f) for k, _, f in BENCH_COLUMNS]

    rows = [bench_row("before", b["before"])] if b["before"] else []
    rows += [bench_row("after", x) for x in b["after"]]
    sections.append(("Benchmark", ["", "model", "concurrency", "input tokens", "output tokens", "prompts", "dataset",
                                   *[c for _, c, _ in BENCH_COLUMNS]], rows, [b["note"]] if b["note"] else []))
    states = {st.get("key"): st.get("state") for st in r["steps"]}
    sections.append(("Audit log", ["when", "who", "action", "what it did", "status", "output", "script"],
                     [[_audit_when(a), a["who"], a["action"], _audit_line(a), _audit_status(a, states),
                       _tail(a["output_tail"] or "", 160), f"A{i}" if "\n" in (a["command"] or "") else ""]
                      for i, a in enumerate(r["audit"], 1)],
                     [f"approval: {a['action']} asked by {a['requested_by']} at {a['requested_at']}: {a['status']}"
                      + (f" by {a['decided_by']} at {a['decided_at']}" if a["decided_by"] else "")
                      for a in r["approvals"]]))
    return sections


def _gpu_table(g: dict[str, Any]) -> tuple[str, list[str], list[list[str]], list[str]]:
    """GPU memory: before, after the stop (where one drained), freed, after; the times of the
    readings they are and what "after" is after."""
    before = {row["gpu"]: row for row in g["before"]}
    stopped = {row["gpu"]: row for row in g.get("stopped") or ()}
    after = {row["gpu"]: row for row in g["after"]}
    freed = {row["gpu"]: row for row in g.get("freed") or ()}
    gpus = sorted(set(before) | set(stopped) | set(after))
    header = ["GPU", "before (MiB)"] + (["after the stop (MiB)"] if stopped else []) + [
        "freed (MiB)", "after (MiB)", "total (MiB)"]
    def mib(v: Any) -> str:
        return f"{v:,}" if isinstance(v, int) else _fmt(v)

    rows = []
    for i in gpus:
        was, then, now = before.get(i) or {}, stopped.get(i) or {}, after.get(i) or {}
        row = [str(i), mib(was.get("used_mib"))] + ([mib(then.get("used_mib"))] if stopped else [])
        known = was.get("used_mib") is not None and ((then if stopped else now).get("used_mib") is not None)
        took = (then if stopped else now).get("used_mib", 0) - was.get("used_mib", 0) if known else 0
        # a GPU that holds more than before (the new server's, beside) freed nothing: said, not "0"
        freed_cell = ("–" if not known else mib((freed.get(i) or {}).get("mib", 0)) if took <= 0
                      else f"none (+{took:,} in use)")
        row += [freed_cell, mib(now.get("used_mib")),
                mib(now.get("total_mib") or then.get("total_mib") or was.get("total_mib"))]
        rows.append(row)
    notes = []
    if not g.get("recorded"):
        notes.append("GPU memory unknown: the recording holds no GPU memory fact of this swap (no GPU reading "
                     "around it, or a recording made before the observer wrote them)")
    else:
        notes.append(f"before: the reading of {_fmt(g.get('before_at'))}, before the host began to change"
                     if g["before"] else "before: unknown (no GPU reading before the swap began)")
        if stopped:
            notes.append(f"after the stop: the first drained reading, {_fmt(g.get('stopped_at'))}")
        notes.append(f"after: the reading of {_fmt(g.get('after_at'))}, {g.get('after_what')}" if g["after"]
                     else "after: not yet (the swap is not over in this recording)")
        if g.get("freed_by"):
            notes.append("freed: before minus " + ("after the stop" if g["freed_by"] == "the stop" else "after"))
    return "GPU memory", header, rows, notes


def _audit_line(a: dict[str, Any]) -> str:
    """One line per audited action (the plan's own summary); the whole script is in the appendix."""


    return audit_summary(SimpleNamespace(command=a["command"] or "", note=a["note"]))


def _audit_when(a: dict[str, Any]) -> str:
    """When the command was sent, and how much later the host answered (where the console timed it)."""
    took = a.get("answered_after_s")
    return _fmt(a["at"]) + (f" (answered {took:.1f} s later)" if isinstance(took, (int, float)) else "")


def _audit_status(a: dict[str, Any], states: dict[Any, Any]) -> str:
    """A final status for every row: the exit status, or for what ran on (the benchmark, a
    verification) its step's state at the end of the recording."""
    if a["exit_status"] is not None:
        return "ok" if a["exit_status"] == 0 else f"exit {a['exit_status']}"
    if a["note"] == "started":
        return {"done": "done", "failed": "failed", "running": "still running at the end"}.get(
            states.get(a["action"]) or "", "started, no end recorded")
    return a["note"] or "noted"


def _scripts(r: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, whole script) for each audited action of more than one line: the appendix."""
    return [(f"A{i} · {a['at']} · {a['who']} · {a['action']}", a["command"])
            for i, a in enumerate(r["audit"], 1) if "\n" in (a["command"] or "")]


def _num(v: Any, fmt: str) -> str:
    return fmt.format(v) if isinstance(v, (int, float)) else "–"


def render_json(r: dict[str, Any]) -> str:
    return json.dumps(r, indent=2, default=str)


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#!|~<>&])|^([-+])")


def _md_cell(text: str) -> str:
    """Host data as Markdown text, never Markdown or HTML: `<script>`, `[x](javascript:…)`,
    images and headings passed through before (issue 21, item 8). Redacted here, cell by cell:
    a pass over the whole document read table pipes after `password:` as the value."""
    text = redact_text(str(text)).replace("\r", " ").replace("\n", " ")
    # `<`, `>` and `&` backslash-escaped (CommonMark): read as themselves in the text and on a
    # renderer, never as a tag or an entity, and never `&gt;` in a file people read as text
    return _MD_SPECIAL.sub(lambda m: "\\" + (m.group(1) or m.group(2)), text)


def _h(text: Any) -> str:
    """Host data as HTML text: redacted, then escaped (never the other way round)."""
    return html.escape(redact_text(str(text)))


def render_markdown(r: dict[str, Any]) -> str:
    lines = [f"# {_md_cell(report_title(r))}", ""] + [f"- **{_md_cell(h)}**" for h in headline(r)] + [""]
    for title, header, rows, notes in _tables(r):
        lines += [f"## {title}", ""]
        if rows:
            lines.append("| " + " | ".join(header) + " |")
            lines.append("|" + "---|" * len(header))
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
            lines.append("")
        elif not notes:
            lines += ["(nothing recorded)", ""]
        lines += [f"- {_md_cell(n)}" for n in notes]
        if notes:
            lines.append("")
    scripts = _scripts(r)
    if scripts:
        lines += ["## Appendix: audited scripts", ""]
        for label, script in scripts:
            text = redact_text(script)
            fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
            lines += [f"### {_md_cell(label)}", "", fence + "sh", text, fence, ""]
    return "\n".join(lines)


def bench_chart_svg(r: dict[str, Any], width: int = 640, height: int = 220) -> str:
    """Output tokens/s before and after, one bar per run (inline SVG: no image files, no scripts)."""
    b = r["bench"]
    bars: list[tuple[str, float, str]] = []
    if b["before"] and isinstance(b["before"].get("output_throughput"), (int, float)):
        bars.append((f"before: {b['before']['model']} c={_fmt(b['before']['concurrency'])}",
                     float(b["before"]["output_throughput"]), "#8a8f98"))
    for x in b["after"]:
        if isinstance(x.get("output_throughput"), (int, float)):
            bars.append((f"after: {x['model']} c={_fmt(x['concurrency'])}", float(x["output_throughput"]), "#2f9e44"))
    if not bars:
        return ""
    top = max(v for _, v, _ in bars) or 1.0
    bar_h = max(14, min(32, (height - 40) // len(bars) - 8))
    h = 40 + len(bars) * (bar_h + 8)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" role="img" '
             f'aria-label="output tokens per second, before and after">',
             '<text x="0" y="16" font-size="13" font-family="sans-serif">output tokens/s (higher is better)</text>']
    for i, (label, value, colour) in enumerate(bars):
        y = 28 + i * (bar_h + 8)
        w = int((width - 260) * value / top)
        parts.append(f'<text x="0" y="{y + bar_h * 0.7:.0f}" font-size="11" font-family="sans-serif">'
                     f'{html.escape(label[:36])}</text>')
        parts.append(f'<rect x="230" y="{y}" width="{max(w, 1)}" height="{bar_h}" fill="{colour}"/>')
        parts.append(f'<text x="{236 + w}" y="{y + bar_h * 0.7:.0f}" font-size="11" font-family="sans-serif">'
                     f'{value:.0f}</text>')
    parts.append("</svg>")
    return "".join(parts)


# Columns of long host text (paths, commands, details): they may break anywhere. Every other cell
# (a state, a time, a figure, a step's title) breaks only between words, never "ro/ot", "pendi/ng".
LONG_COLUMNS = ("detail", "what it did", "output", "from", "to", "why", "model dir", "label", "old", "new",
                "command", "reason")


def _cell_class(column: str, text: str) -> str:
    if column in LONG_COLUMNS:
        return ' class="long"'
    return ' class="short"' if " " not in str(text) or len(str(text)) <= 24 else ""


def render_html(r: dict[str, Any]) -> str:
    e = _h  # each piece redacted, then escaped: a pass over the document ate markup after `password:`
    body = [f"<h1>{e(report_title(r))}</h1>",
            "<ul class=lead>" + "".join(f"<li>{e(h)}</li>" for h in headline(r)) + "</ul>"]
    for title, header, rows, notes in _tables(r):
        body.append(f'<section id="{e(title.lower().replace(" ", "-").replace("→", "to"))}"><h2>{e(title)}</h2>')
        if rows:
            body.append("<table><thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr></thead><tbody>")
            for row in rows:
                cls = ""
                if title == "Swap plan":
                    cls = f' class="{e(row[1])}"'
                body.append(f"<tr{cls}>" + "".join(f"<td{_cell_class(header[i] if i < len(header) else '', c)}>"
                                                   f"{e(c)}</td>" for i, c in enumerate(row)) + "</tr>")
            body.append("</tbody></table>")
        elif not notes:
            body.append("<p class=empty>(nothing recorded)</p>")
        if notes:
            body.append("<ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
        if title == "Benchmark":
            chart = bench_chart_svg(r)
            if chart:
                body.append(f'<figure class="chart">{chart}</figure>')
        body.append("</section>")
    scripts = _scripts(r)
    if scripts:
        body.append('<section id="appendix"><h2>Appendix: audited scripts</h2>')
        for label, script in scripts:
            body.append(f"<h3>{e(label)}</h3><pre>{e(script)}</pre>")
        body.append("</section>")
    style = ("body{font:14px/1.4 sans-serif;margin:24px;color:#1d1f23}h1{font-size:22px}h2{font-size:16px;"
             "border-bottom:1px solid #ccd;padding-bottom:2px;margin-top:22px}table{border-collapse:collapse;"
             "width:100%}td,th{border:1px solid #dde;padding:3px 6px;text-align:left;vertical-align:top;"
             "font-size:12px}th{background:#f2f3f7}tr.failed td{background:#fde8e8}tr.done td:nth-child(2)"
             "{color:#2f7d32}.lead{font-size:16px}td{overflow-wrap:break-word}td.long{overflow-wrap:anywhere}"
             "td.short{white-space:nowrap}h3{font-size:13px}"
             "pre{background:#f5f6f8;padding:6px;font-size:12px;white-space:pre-wrap}")
    doc = (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>"
           f"{e(report_title(r))}</title><style>{style}</style></head><body>{''.join(body)}</body></html>")
    return doc


def render(r: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return render_json(r)
    if fmt == "html":
        return render_html(r)
    return render_markdown(r)


def _diff_source(diff: dict[str, Any]) -> list[str]:
    """The Diff section's first note: in place on one unit, what the change was read from."""
    if diff.get("unknown"):
        return [f"the install's change: {diff['unknown']}"]
    if diff.get("from") == "the backup":
        by = diff.get("installed_by") or "an unknown author"
        return [f"from the backup {diff.get('backup')}: installed {_fmt(diff.get('installed_at'))} by {by}"]
    return []
