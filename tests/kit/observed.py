"""A host as the swap's observer sees it, for tests that feed its facts by hand: a HostState and
its SwapObserver (every event through both, as the live core does), the host's facts (unit
readings, the SGLang log, systemd's lines, GPU readings, the server's readiness), the executor's
own record (its intent through the controller's `_set`, its audited commands) on a clock the
test moves, and the events the recorder would have written (the host's and the observer's)."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from console.core.derive.swap_observer import SwapObserver
from console.core.derive.swap_view import AuditAppended, AuditEntry, SwapSetup
from console.core.state import HostState, LogAppended, ReadingChanged
from console.domain.analysis.service_report import HostFacts, build_report, side_from_text
from console.domain.swap.controller import SwapController
from console.domain.swap.report import ReportBuilder
from console.host.parsers.router import RouterMove, RouterReading
from console.host.parsers.sglang_log import LogEvent, parse_line
from console.model import GpuDevice, GpuStatus, Reading

T0 = dt.datetime(2026, 12, 1, 10, 0, 0).timestamp()
OLD, NEW = "old.service", "new.service"
UNIT = ("[Service]\nExecStart=/opt/sglang/.venv/bin/python -m sglang.launch_server --model-path /m/{model} "
        "--tp 2 --port 30000\n")


def stamp(at: float) -> str:
    """A log line's stamp as the host writes it (local time, milliseconds)."""
    return dt.datetime.fromtimestamp(at).isoformat(sep=" ", timespec="milliseconds")


class ObservedHost:
    def __init__(self, old: str = OLD, new: str = NEW) -> None:
        self.now = T0
        self.state = HostState("h", clock=lambda: self.now)
        self.observer: SwapObserver = self.state.observe_host().observer  # the live core's writer
        self.old, self.new = old, new
        self.recorded: list[Any] = []  # every event applied, the observer's too, in order: the recorder's
        self.state.subscribe(self.recorded.append)
        self.timed: list[tuple[float, Any]] = []  # the same, each with the state's time of it (a recording)
        self.state.subscribe(lambda event: self.timed.append((self.now, event)))
        self.feed(SwapSetup("h", old, new, "o/new", "/m/new"))

    def feed(self, event: Any) -> None:
        self.state.apply(event)

    def at(self, t: float) -> ObservedHost:
        """The state's clock (when an event reaches the state) moves to `t`."""
        self.now = t
        return self

    # -- the host's facts ----------------------------------------------------------------------------
    def units(self, at: float, old: str, new: str, *, old_started: float | None = None,
              old_finished: float | None = None, new_port: int = 30000) -> None:
        """The service reading at `at`: each side's state; a container's own times of the old one
        (`docker inspect`'s State.StartedAt/FinishedAt) when given; the new server's port (beside:
        another one)."""
        sides = [replace(side_from_text(name, UNIT.format(model=name).replace(
                    "--port 30000", f"--port {new_port if name == self.new else 30000}")), active_state=active)
                 for name, active in ((self.old, old), (self.new, new))]
        sides[0] = replace(sides[0], started_at_s=old_started, finished_at_s=old_finished)
        report = build_report(sides[0], sides[1], HostFacts())  # as the service source reads it
        self.feed(ReadingChanged("h", "service", Reading("service", report, ok_at_s=at)))

    def router(self, at: float, moves: list[tuple[float, str, str]], workers: list[str] | None) -> None:
        """The router reading at `at`: its log's add/remove-worker lines (the router's time, "added"
        or "removed", the worker's URL) and its worker list."""
        reading = RouterReading("http://127.0.0.1:30100", None if workers is None else tuple(workers),
                                tuple(RouterMove(t, verb, url) for t, verb, url in moves), "/var/log/router.log")
        self.feed(ReadingChanged("h", "router", Reading("router", reading, ok_at_s=at)))

    def log(self, at: float, text: str) -> None:
        self.feed(LogAppended("h", (replace(parse_line(text), ts=stamp(at)),)))

    def journal_line(self, at: float, message: str) -> None:
        """One of the server's lines as journald (or Docker) brings it: the server stamped it in whole
        seconds (SGLang's default), the host's time of the line is journald's, `at` (to the µs)."""
        whole = dt.datetime.fromtimestamp(at).replace(microsecond=0).isoformat(sep=" ")
        self.feed(LogAppended("h", (replace(parse_line(f"[{whole}] {message}"), at_s=at),)))

    def ready_line(self, at: float) -> None:
        self.log(at, f"[{stamp(at)}] The server is fired up and ready to roll!")

    def unit_line(self, at: float, unit: str, transition: str) -> None:
        verb = {"stopping": "Stopping", "stopped": "Stopped", "starting": "Starting", "started": "Started"}[transition]
        self.feed(LogAppended("h", (LogEvent("unit", f"{verb} {unit} - SGLang.", ts=stamp(at), fields={
            "kind": f"unit {transition}", "transition": transition, "unit": unit}),)))

    def gpu(self, at: float, *used: int) -> None:
        status = GpuStatus("nvidia-smi", tuple(GpuDevice(i, "RTX", None, m, 97887, None, None, None, None)
                                               for i, m in enumerate(used)), sampled_at_s=at)
        self.feed(ReadingChanged("h", "gpu", Reading("gpu", status, ok_at_s=at + 0.1)))

    def server(self, at: float, unit: str | None, status: str, unit_state: str | None = "active") -> None:
        s = SimpleNamespace(unit=unit, unit_state=unit_state, status=status, reason=f"{status}: /health 200")
        self.feed(ReadingChanged("h", "server", Reading("server", s, ok_at_s=at)))

    # -- the executor's record -------------------------------------------------------------------------
    def intent(self, key: str, **changes: Any) -> None:
        """The controller's own record of a step (its state, words and who; never a time), as it
        reaches the state at the clock's time."""
        SwapController._set(SimpleNamespace(state=self.state, host="h"), key, **changes)  # type: ignore[arg-type]

    def audit(self, action: str, command: str, *, at: float, took: float, status: int | None = 0,
              output: str = "") -> None:
        """A command the console ran, audited when its reply came back (`at`), `took` seconds after
        it was sent."""
        self.feed(AuditAppended("h", AuditEntry("ana", at, action, command, status, output, took)))

    # -- the views -------------------------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        """The swap report built from the recorded events (console/domain/swap/report.py)."""
        builder = ReportBuilder("h", "h")
        for t, event in self.timed:
            builder.feed(t, event)
        return builder.build()

    def views(self) -> list[Any]:
        """The live swap, a late attach (the live state's snapshot) and a replay (the recorded
        events applied to a fresh state, nothing derived again)."""
        attach = HostState.from_snapshot(self.state.snapshot())
        replay = HostState("h")
        for event in self.recorded:
            replay.apply(event)
        return [s.swap.to_data() for s in (self.state, attach, replay)]


def console_on(h: ObservedHost, audit_file: Any, *, who: str = "ana") -> Any:
    """A console's swap controller on the observed host's state (its clock the state's), its audit log
    at `audit_file`: the notices it gives are in `.notices` (title, text)."""
    notices: list[tuple[str, str]] = []
    profile = SimpleNamespace(require_approval=False, read_only=False, model_dir="/m/new", repo_id="o/new",
                              compare_unit=h.old, unit=h.new, server_port=30000, swap_path=None, router_url=None,
                              forbidden_prefixes=(), verify_sha=False, ready_timeout_s=30.0, drain_timeout_s=30.0,
                              container=None, compare_container=None, compose=None)
    runner = SimpleNamespace(state=h.state, host="h", session=SimpleNamespace(profile=profile, transport=None),
                             notice=lambda title, text, severity="information": notices.append((title, text)),
                             repoll=lambda name: None)
    ctl = SwapController(runner, who=who)
    ctl.audit_file = audit_file
    ctl._clock = lambda: h.now
    ctl.notices = notices  # type: ignore[attr-defined]
    return ctl
