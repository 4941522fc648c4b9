"""The swap's view in the state: the plan's steps, the preflight gate's checks, approvals, the audit
log and the downtime clock, kept from the swap's events (declared with every event in
console/core/events.py). No Textual, no I/O: the state (console.core.state) holds it, every view
reads it.
"""

from __future__ import annotations

import shlex
from collections import deque
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from console.core.derive.downtime import FAST_STEPS
from console.core.events import (  # declared once, with every event (named here for the swap's modules)
    SWAP_EVENTS,
    ApprovalChanged,
    AuditAppended,
    AuditEntry,
    DowntimeChanged,
    GateChanged,
    GateCheck,
    PathEvent,
    SwapData,
    SwapSetup,
    SwapStep,
    SwapStepChanged,
)

# "refused": the gate or the two-person rule said no before anything ran (the old service still
# serves; there is nothing to roll back), which is not a failure.
# A beside switch where the router removed the old worker before it added the new one: between the two
# the router had no worker, every request through it refused (the observer's downtime's start source)
ROUTER_GAP = "router gap: no worker in the router from its removal of"

STEP_STATES = ("pending", "running", "done", "failed", "skipped", "refused")

# The story's swap, in order; rollback is offered, not planned.
PLAN_STEPS: tuple[tuple[str, str], ...] = (
    ("download", "Download the model"),
    ("verify", "Verify the files (sha256)"),
    ("install", "Install the new unit"),
    ("preflight", "Preflight gate"),
    ("stop_old", "Stop the old service, drain GPU memory"),
    ("start_new", "Start the new service, wait for ready"),
    ("benchmark", "Benchmark, beside the old model's last run"),
)
ROLLBACK = ("rollback", "Roll back: stop the new service, start the old one")
STEP_TITLES = dict((*PLAN_STEPS, ROLLBACK, *FAST_STEPS))  # FAST_STEPS: issue 24's paths
AUDIT_KEEP = 500
# The swap's GPU memory facts (console/core/derive/swap_observer.py's MemoryFacts writes them): one
# PathEvent of this kind, {"before", "stopped", "after": {"at", "gpus": [...]}, "freed": [...]}.
MEMORY = "memory"
# In place on one unit, the install rewrites the file of the unit that serves: the unit as it stood
# before the install against the unit after it (the observer writes it; the report and the gate read
# it): one PathEvent of this kind, {"unit", "before_at", "changes", "env_changes", "unit_changes",
# "raw_diff", "count"} (console/domain/analysis/service_report.py's install_change_json).
INSTALL_DIFF = "install_diff"
# In place on one unit, the backup of the unit the last install kept on the host (`UNIT.bak-STAMP`):
# one PathEvent of this kind, {"unit", "found", "path", "stamp", "installed_at", "by", "readable",
# "truncated", "read_at"}; the observer writes it from the service source's read. With it a console
# started after the install writes the install's change from the backup (INSTALL_DIFF's "from":
# "backup"), and where the host kept none the change is unknown, never "0 changes".
UNIT_BACKUP = "unit_backup"


# -- the view of it, kept in the state -------------------------------------------------------------
@dataclass
class SwapView:
    setup: SwapSetup | None = None
    steps: dict[str, SwapStep] = field(default_factory=lambda: {k: SwapStep(k, t) for k, t in PLAN_STEPS})
    gate: tuple[GateCheck, ...] = ()
    gate_at_s: float | None = None
    downtime: DowntimeChanged | None = None
    approvals: dict[str, ApprovalChanged] = field(default_factory=dict)
    audit: deque[AuditEntry] = field(default_factory=lambda: deque(maxlen=AUDIT_KEEP))
    paths: dict[str, PathEvent] = field(default_factory=dict)  # issue 24: the path plan, pre-warm, outcome
    version: int = 0

    def apply(self, event: object) -> None:
        if isinstance(event, SwapStepChanged):
            self.steps[event.step.key] = event.step
        elif isinstance(event, GateChanged):
            self.gate, self.gate_at_s = event.checks, event.at_s
        elif isinstance(event, DowntimeChanged):
            self.downtime = event
        elif isinstance(event, ApprovalChanged):
            self.approvals[event.request_id] = event
        elif isinstance(event, AuditAppended):
            self.audit.append(event.entry)
        elif isinstance(event, SwapSetup):
            self.setup = event
        elif isinstance(event, PathEvent):
            self.paths[event.kind] = event
        self.version += 1

    def to_data(self) -> SwapData:
        return SwapData(self.setup, tuple(self.steps.values()), self.gate, self.gate_at_s, self.downtime,
                        tuple(self.approvals.values()), tuple(self.audit), tuple(self.paths.values()))

    def restore(self, data: SwapData) -> None:
        self.setup, self.gate, self.gate_at_s, self.downtime = data.setup, data.gate, data.gate_at_s, data.downtime
        self.steps = {k: SwapStep(k, t) for k, t in PLAN_STEPS}
        self.steps.update((step.key, step) for step in data.steps)
        self.approvals = {a.request_id: a for a in data.approvals}
        self.audit = deque(data.audit, maxlen=AUDIT_KEEP)
        self.paths = {p.kind: p for p in data.paths}
        self.version += 1

    @property
    def pending_approvals(self) -> list[ApprovalChanged]:
        return [a for a in self.approvals.values() if a.status == "pending"]

    def memory(self) -> dict[str, Any]:
        """The swap's GPU memory facts as the observer wrote them ({} when none were: a recording
        made before they were written, or no GPU reading around the swap)."""
        event = self.paths.get(MEMORY)
        return event.data() if event is not None else {}

    def install_diff(self) -> dict[str, Any]:
        """The install's change of a unit that is both old and new (in place on one unit), as the
        observer wrote it ({} when none was: two units, no reading before the install)."""
        event = self.paths.get(INSTALL_DIFF)
        fact = event.data() if event is not None else {}
        setup = self.setup
        if setup is not None and not (setup.old_unit == setup.new_unit == fact.get("unit")):
            return {}  # another swap's (this one has two units)
        return fact

    def unit_backup(self) -> dict[str, Any]:
        """The backup the last install kept of a unit both old and new, as the observer read it ({}:
        not read: two units, a recording made before it)."""
        event = self.paths.get(UNIT_BACKUP)
        fact = event.data() if event is not None else {}
        setup = self.setup
        if setup is not None and not (setup.old_unit == setup.new_unit == fact.get("unit")):
            return {}
        return fact

    def install_change_unknown(self) -> str | None:
        """In place on one unit, why the install's change is unknown (the host kept no backup of the
        unit before it, and this console did not see it), else None."""
        if self.install_diff():
            return None
        backup = self.unit_backup()
        if not backup:
            return None
        unit = backup.get("unit")
        if not backup.get("found"):
            return f"unknown: the host keeps no backup of {unit} from before an install ({unit}.bak-*)"
        if not backup.get("readable"):
            return f"unknown: the backup {backup.get('path')} could not be read"
        return None

    def downtime_s(self, now_s: float) -> float | None:
        d = self.downtime
        if d is None or d.started_at_s is None:
            return None
        return max(0.0, (d.ended_at_s if d.ended_at_s is not None else now_s) - d.started_at_s)

    def path(self) -> str | None:
        """The path this swap takes or took: the plan's choice (the console's or the one seen on
        the host), else a restart once the old service was stopped; None: no swap yet."""
        plan = self.paths.get("plan")
        chosen = ((plan.data().get("plan") or {}).get("chosen") if plan is not None else None)
        if isinstance(chosen, str):
            return chosen
        stop = self.steps.get("stop_old")
        return "restart" if stop is not None and stop.state not in ("pending", "skipped") else None

    def began_at_s(self) -> float | None:
        """When the host began to change for the new model: the old service's stop, the in-place
        update, or the new server's start beside the old one (the last run before it is the old
        model's)."""
        marks = [s.started_at_s for k in ("stop_old", "in_place", "beside")
                 if (s := self.steps.get(k)) is not None and s.state not in ("pending", "skipped", "refused")
                 and s.started_at_s is not None]
        d = self.downtime
        if d is not None and d.started_at_s is not None and not d.start_source.startswith("beside"):
            marks.append(d.started_at_s)
        return min(marks) if marks else None

    def time_to_ready(self) -> tuple[float, str, str] | None:
        """(seconds, from what, to what): the new server's own boot on every path. In place the
        running server is ready with the new weights when the update ends: the pause is its time
        to ready. None: not ready (yet), or its start is not known."""
        d = self.downtime
        path = self.path()
        if path == "in-place":
            step = self.steps.get("in_place")
            if d is not None and d.start_source.startswith("in place") and d.started_at_s is not None \
                    and d.ended_at_s is not None:
                return max(0.0, d.ended_at_s - d.started_at_s), "the update's begin (the server's log)", \
                    "the update's end: serving the new weights"
            if step is not None and step.state == "done" and step.duration_s is not None:
                return step.duration_s, "the update's request", "its reply: serving the new weights"
            return None
        key, verb = ("beside", "beside") if path == "beside" else ("start_new", "start_new")
        step = self.steps.get(key)
        if step is None or step.state != "done":
            return None
        starts = [e.at_s - (e.duration_s or 0.0) for e in self.audit
                  if e.action == verb and " start -- " in e.command and e.exit_status == 0]
        start_at = starts[-1] if starts else step.started_at_s
        if key == "start_new" and d is not None and d.ended_at_s is not None and d.end_source.endswith(" ready"):
            ready_at: float | None = d.ended_at_s
        else:
            ready_at = step.ended_at_s
        if start_at is None or ready_at is None or ready_at < start_at:
            return None
        docker = bool(starts) and any(" docker " in f" {e.command} " for e in self.audit
                                      if e.action == verb and " start -- " in e.command and e.exit_status == 0)
        started = ("the new container's start (docker start)" if docker else "the new unit's start (systemctl start)"
                   if starts else "the new server's start (seen on the host)")
        return ready_at - start_at, started, "the new server ready"

    def failed_start_rolled_back(self) -> bool:
        """The new server failed as it started and the rollback brought the old one back: the
        downtime ended at the old server's ready again (the observer's "… ready again (rollback)")."""
        start, rollback, d = self.steps.get("start_new"), self.steps.get("rollback"), self.downtime
        return (start is not None and start.state == "failed" and start.started_at_s is not None
                and start.ended_at_s is not None and rollback is not None and rollback.started_at_s is not None
                and d is not None and d.ended_at_s is not None and d.end_source.endswith("(rollback)"))

    def downtime_parts(self) -> list[tuple[str, float]]:
        """The downtime in named parts that add up to it: (what, seconds). The approval a start
        waited for is its own part, not hidden in the boot. In place the whole of it is the
        update's pause; beside there is none (traffic moved before the old server stopped)."""
        d = self.downtime
        if d is None or d.started_at_s is None or d.ended_at_s is None:
            return []
        if d.start_source.startswith("beside"):
            return []
        if d.start_source.startswith(ROUTER_GAP):
            return [("no worker in the router (the old one removed before the new one was added)",
                     d.ended_at_s - d.started_at_s)]
        if d.start_source.startswith("in place"):
            return [("in-place pause (requests held while the weights load)", d.ended_at_s - d.started_at_s)]
        stop, start = self.steps.get("stop_old"), self.steps.get("start_new")
        approved = [a.decided_at_s for a in self.approvals.values() if a.action == "start_new"
                    and a.status == "granted" and a.decided_at_s is not None and start is not None
                    and start.started_at_s is not None and a.decided_at_s >= start.started_at_s]
        marks: list[tuple[str, float | None]] = [
            ("last request → stop", stop.started_at_s if stop else None),
            ("drain", stop.ended_at_s if stop else None),
            ("stopped → start", start.started_at_s if start else None),
            ("approval wait", approved[-1] if approved else None)]
        if self.failed_start_rolled_back():
            # The new server never served: its boot until it failed, then the rollback's old server
            # until it was ready again (no "boot to ready" of a server that was never ready).
            marks += [("the new server's boot until it failed", start.ended_at_s),
                      ("rollback: the old server's boot to ready", d.ended_at_s)]
        else:
            marks.append(("boot to ready", d.ended_at_s))
        last = marks[-1][0]
        parts: list[tuple[str, float]] = []
        at = d.started_at_s
        for name, mark in marks:
            if mark is None or mark < at or mark > d.ended_at_s:
                continue
            if mark - at >= 0.5 or name == last:
                parts.append((name, mark - at))
                at = mark
            # a part under half a second is not named: its time goes to the next part, so that the
            # parts still add up to the downtime
        return parts

    def ordered_steps(self) -> list[SwapStep]:
        """The steps in the order the host lived them: those that ran by their start; a skipped one
        stays after the step before it in the plan (the path table's order: the plan's own, then a
        faster path's, then the rollback); those still pending come after every step that ran, in
        the plan's order (a step run out of the plan's order, a verify after the install, never
        lands below the steps still to come)."""
        keys = [k for k, _ in PLAN_STEPS] + [k for k, _ in FAST_STEPS] + [ROLLBACK[0]]
        keys += sorted((k for k in self.steps if k not in keys), key=lambda k: self.steps[k].started_at_s or 0.0)
        ranked = []
        last = float("-inf")
        for i, key in enumerate(k for k in keys if k in self.steps):
            step = self.steps[key]
            if step.started_at_s is not None and step.state not in ("pending", "skipped"):
                last = step.started_at_s
            ranked.append(((float("inf") if step.state == "pending" else last, i), step))
        return [step for _, step in sorted(ranked, key=lambda x: x[0])]


def freed_rows(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What each GPU freed: its memory in `before` minus `after` (GPU rows as the memory fact keeps
    them), for the GPUs that hold less after; never the last sample seen on the way down."""
    then = {r["gpu"]: r.get("used_mib") for r in before}
    out = []
    for row in sorted(after, key=lambda r: r["gpu"]):
        was, now = then.get(row["gpu"]), row.get("used_mib")
        if isinstance(was, int) and isinstance(now, int) and was > now:
            out.append({"gpu": row["gpu"], "mib": was - now, "from": was, "to": now})
    return out


def freed_phrase(gpu: int, was_mib: int, now_mib: int) -> str:
    """What one GPU freed, said once: "GPU 0 91,204 MiB" when it holds nothing now, "GPU 1 90,698 MiB
    (512 MiB left)" when it holds some ("91,204 MiB (91,204 → 0 MiB)" said the figure twice)."""
    left = f" ({now_mib:,} MiB left)" if now_mib else ""
    return f"GPU {gpu} {was_mib - now_mib:,} MiB{left}"


def freed_lines(memory: dict[str, Any]) -> list[str]:
    """The memory fact's "freed", one phrase per GPU (`freed_phrase`)."""
    return [freed_phrase(f["gpu"], f["from"], f["to"]) for f in memory.get("freed") or ()]


def format_duration(seconds: float | None) -> str:
    """The one rounding of a duration, for the plan, the report and the notices: whole seconds."""
    if seconds is None:
        return "–"
    total = int(round(max(0.0, seconds)))
    m, sec = divmod(total, 60)
    return f"{m}m{sec:02d}s" if m else f"{sec}s"


def whole_second_parts(parts: list[tuple[str, float]]) -> list[tuple[str, int]]:
    """The downtime's parts in whole seconds that add up to the whole's rounding (the largest
    remainders rounded up): "7s: drain 1s + boot to ready 6s", never "7s: 1s + 5s" (each part
    rounded on its own said 1.43 + 5.22 as 1 + 5 under a total of 7)."""
    total = int(round(max(0.0, sum(sec for _, sec in parts))))
    floors = [int(max(0.0, sec)) for _, sec in parts]
    order = sorted(range(len(parts)), key=lambda i: max(0.0, parts[i][1]) - floors[i], reverse=True)
    for i in order[:max(0, total - sum(floors))]:
        floors[i] += 1
    return [(name, n) for (name, _), n in zip(parts, floors, strict=True)]


def _loop_words(cmd: str) -> int | None:
    """How many names the verify's `for f in NAMES; do sha256sum …` loop reads (console/domain/swap/
    shared_steps.py writes it): a name is quoted only when the shell needs it, so quotes count nothing."""
    head, sep, rest = cmd.partition(" for f in ")
    names, sep2, _ = rest.partition("; do ")
    if not sep or not sep2:
        return None
    try:
        return len(shlex.split(names))
    except ValueError:
        return None


def _download_words(cmd: str) -> str | None:
    """The hf command the download script starts (console/domain/swap/actions.py writes it), quoted as
    the host reads it: its line `setsid nohup "$HF" ARGS >>LOG …`, not the script's first line, the
    check for a download already running (`if timeout -k …`)."""
    for line in cmd.splitlines():
        if line.startswith('setsid nohup "$HF" '):
            try:
                words = shlex.split(line)[3:]
            except ValueError:
                return None
            args = words[: next((i for i, w in enumerate(words) if w.startswith(">")), len(words))]
            if args[:1] != ["download"]:
                return None
            # the repo first, as the operator types it (`hf download REPO --local-dir DIR`): a row cut
            # at the plan's width keeps what is downloaded (the script's `--` guards a checked repo id)
            opts, repo = args[1:], []
            if "--" in opts:
                at = opts.index("--")
                opts, repo = opts[:at], opts[at + 1:]
            return shlex.join(["hf", "download", *repo, *opts])
    return None


def _stopped_download_dir(cmd: str) -> str | None:
    """The model directory whose download the stop script ends (its pid file names it)."""
    if "no download running" not in cmd:
        return None
    for line in cmd.splitlines():
        if line.startswith("if [ -f "):
            try:
                pid = shlex.split(line)[3]
            except (ValueError, IndexError):
                return None
            if pid.endswith("/.cache/gpuconsole/download.pid"):
                return shlex.quote(pid.removesuffix("/.cache/gpuconsole/download.pid") or "/")
    return None


def audit_summary(e: Any, *, with_note: bool = True) -> str:
    """One line for one audited action: what it did, not the first 100 characters of its script.
    `with_note=False`: without its note (the plan's row, whose status says it: "started" was written
    when a verification began, and read "[done] sha256 of 40 files (started)" once it had ended)."""
    cmd = e.command or ""
    words = cmd.split()
    if not with_note:
        e = SimpleNamespace(command=cmd, note="")
    note = f" ({e.note})" if e.note else ""
    if (hf := _download_words(cmd)) is not None:
        return f"{hf} (detached){note}"
    if (model_dir := _stopped_download_dir(cmd)) is not None:
        return f"stop the hf download in {model_dir}{note}"
    for verb in ("stop", "start", "daemon-reload", "restart"):
        if "systemctl" in words and verb in words:
            unit = words[-1] if verb != "daemon-reload" else ""
            return f"systemctl {verb} {unit}".strip() + (f" ({e.note})" if e.note else "")
    if cmd.startswith("sftp put"):
        return cmd.split("  (")[0]
    if "sha256sum" in cmd:
        n = _loop_words(cmd)
        what = "every finished file" if n is None else f"{n} file" + ("" if n == 1 else "s")
        return f"sha256 of {what}" + (f" ({e.note})" if e.note else "")
    if "hf download" in cmd or " hf " in cmd:
        return "hf download (detached)" + (f" ({e.note})" if e.note else "")
    first = cmd.splitlines()[0] if cmd else ""
    lines = cmd.count("\n") + 1
    return first + (f"  (+{lines - 1} lines)" if lines > 1 else "") + (f" ({e.note})" if e.note else "")


__all__ = [
    "ROUTER_GAP", "STEP_STATES", "PLAN_STEPS", "ROLLBACK", "STEP_TITLES", "AUDIT_KEEP", "MEMORY", "INSTALL_DIFF", "SwapView",
    "format_duration",
    "freed_rows", "freed_lines", "freed_phrase",
    "audit_summary",
    # declared in console/core/events.py, named here for the swap's modules
    "SWAP_EVENTS", "ApprovalChanged", "AuditAppended", "AuditEntry", "DowntimeChanged", "GateChanged", "GateCheck",
    "PathEvent", "SwapData", "SwapSetup", "SwapStep", "SwapStepChanged",
]
