"""The swap plan screen: the steps with their state and timings, the downtime clock, the preflight
gate, approvals waiting and the last commands run. It renders from the state and asks the host
only through the control (the runner's SwapController): the confirmation shows the exact commands,
an override needs the check's name typed. `format_plan` is pure and tested without an app."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static

from console.swap.model import SwapView, format_duration

STATE_STYLE = {"pending": "dim", "running": "bold yellow", "done": "green", "failed": "bold red", "skipped": "dim",
               "refused": "bold yellow"}
STATE_MARK = {"pending": "·", "running": "▶", "done": "✓", "failed": "✗", "skipped": "–", "refused": "⊘"}
# A gate check's verdict: only a check that passed is a green ✓; one nobody checked is grey.
VERDICT_MARK = {"passed": ("✓", "green"), "failed": ("✗", "red"), "unknown": ("?", "yellow"),
                "not checked": ("–", "dim"), "overridden": ("!", "yellow")}
KEYS = (("d", "download", "download"), ("x", "stop_download", "stop download"), ("v", "verify", "verify"),
        ("i", "install", "install unit"), ("g", "preflight", "gate"), ("s", "stop_old", "stop old"),
        ("n", "start_new", "start new"), ("b", "benchmark", "benchmark"), ("r", "rollback", "roll back"),
        ("p", "swap", "run the rest of the plan"))


def _dur(s: float | None) -> str:
    return "" if s is None else format_duration(s)


def _clock(at: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at)) if at else "?"


def format_plan(view: SwapView, now_s: float, *, read_only: bool = False, width: int = 100) -> Text:
    t = Text()
    setup = view.setup
    if setup is not None:
        t.append(f"{setup.old_unit or '?'} → {setup.new_unit or '?'}", style="bold")
        rules = [r for r, on in (("read-only", setup.read_only), ("two-person rule", setup.require_approval),
                                 ("sha256 required", setup.verify_sha)) if on]
        if rules:
            t.append("   [" + ", ".join(rules) + "]", style="yellow")
        t.append("\n")
    d = view.downtime
    secs = view.downtime_s(now_s)
    if d is not None and secs is not None:
        running = d.ended_at_s is None
        t.append("downtime ", style="bold")
        t.append(_dur(secs), style="bold red" if running else "bold green")
        t.append(" (running)" if running else f" (ended {_clock(d.ended_at_s)}: {d.end_source})",
                 style="yellow" if running else "dim")
        t.append(f"  from {_clock(d.started_at_s)}: {d.start_source}\n", style="dim")
        parts = view.downtime_parts()
        if parts:
            t.append("   " + " + ".join(f"{name} {_dur(sec)}" for name, sec in parts) + "\n", style="dim")
    else:
        t.append("downtime: not started (the clock starts at the old server's last served request)\n", style="dim")
    t.append("\n")
    for step in view.ordered_steps():
        style = STATE_STYLE.get(step.state, "")
        took = step.duration_s if step.ended_at_s is not None else (
            now_s - step.started_at_s if step.started_at_s is not None and step.state == "running" else None)
        t.append(f" {STATE_MARK.get(step.state, '?')} ", style=style)
        t.append(f"{step.title:<44.44}", style=style)
        t.append(f" {step.state:<8}", style=style)
        t.append(f" {_dur(took):>6}", style="dim")
        if step.who:
            t.append(f"  {step.who}", style="dim")
        elif step.observed:
            t.append("  seen on the host", style="dim")
        t.append("\n")
        if step.detail:
            t.append(f"     {step.detail[: max(20, width - 6)]}\n", style="red" if step.state == "failed" else "dim")
    failed = [s for s in view.ordered_steps() if s.state == "failed"]
    if failed and failed[-1].key in ("start_new", "stop_old"):
        t.append("\n the plan stopped there: r rolls back to the old service\n", style="bold red")
    refused = [s for s in view.ordered_steps() if s.state == "refused"]
    if refused and not failed:
        t.append("\n refused: nothing ran; the old service still serves\n", style="bold yellow")
    if view.gate:
        t.append("\npreflight gate\n", style="bold")
        for c in view.gate:
            verdict = getattr(c, "verdict", "passed" if c.ok is True else "failed")
            mark, style = VERDICT_MARK.get(verdict, ("?", "yellow"))
            t.append(f" {mark} {c.name:<9}", style=style)
            reason = c.reason + (f"  (overridden by {c.overridden_by})" if c.overridden_by else "")
            t.append(f"{reason[: max(20, width - 14)]}\n", style="" if verdict == "passed" else style)
    pending = view.pending_approvals
    if pending:
        t.append("\nwaiting for approval\n", style="bold yellow")
        for a in pending:
            t.append(f" {a.action} asked by {a.requested_by} ({a.request_id}): another attached person approves "
                     "with a (c withdraws it)\n", style="yellow")
            for line in a.commands[:4]:
                t.append(f"   {line[: width - 4]}\n", style="dim")
    if view.audit:
        t.append("\nlast commands\n", style="bold")
        for e in list(view.audit)[-5:]:
            status = "–" if e.exit_status is None else str(e.exit_status)
            t.append(f" {time.strftime('%H:%M:%S', time.localtime(e.at_s))} {e.who} [{status}] ",
                     style="dim" if e.exit_status in (0, None) else "red")
            t.append(f"{e.command.splitlines()[0][: max(20, width - 30)] if e.command else ''}\n")
    t.append("\n")
    if read_only:
        t.append("read-only: no action can be run from this session", style="bold yellow")
    else:
        t.append("  ".join(f"{k} {label}" for k, _, label in KEYS) + "  o override  a approve  c withdraw  esc close",
                 style="dim")
    return t


class ConfirmScreen(ModalScreen[bool]):
    """The exact commands an action will run; enter runs it once, escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape,n", "dismiss(False)", "Cancel"),
                                             ("enter,y", "confirm", "Run")]
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > VerticalScroll { width: 110; max-width: 98%; height: auto; max-height: 90%;
        border: round $warning; background: $surface; padding: 0 1; }
    """

    def __init__(self, preview: Any) -> None:
        super().__init__()
        self.preview = preview
        self._done = False

    def compose(self) -> ComposeResult:
        t = Text()
        t.append(f"{self.preview.title}\n\n", style="bold")
        t.append("These commands will run on the host, in this order:\n\n")
        for line in self.preview.lines:
            t.append(line + "\n", style="bold" if line.startswith("#") else "cyan")
        bad = [c for c in self.preview.gate if not c.passes]
        if bad:
            t.append("\nThe preflight gate refuses now:\n", style="bold red")
            for c in bad:
                t.append(f"  ✗ {c.name}: {c.reason}\n", style="red")
            t.append("(override a check by typing its name with o on the plan screen)\n", style="dim")
        if self.preview.needs_approval:
            t.append("\nAnother attached person must approve before it runs.\n", style="yellow")
        t.append("\nenter: run once   escape: cancel", style="bold")
        with VerticalScroll():
            yield Static(t, id="confirm-text")

    def action_confirm(self) -> None:
        if not self._done:  # a second press does nothing; the core refuses a second run too
            self._done = True
            self.dismiss(True)


class OverrideScreen(ModalScreen[tuple[str, str] | None]):
    """Pick a failing check and type its name to override it."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape", "dismiss(None)", "Cancel")]
    DEFAULT_CSS = """
    OverrideScreen { align: center middle; }
    OverrideScreen > Vertical { width: 90; max-width: 95%; height: auto; border: round $error;
        background: $surface; padding: 0 1; }
    OverrideScreen OptionList { height: auto; max-height: 10; }
    """

    def __init__(self, failing: list[Any]) -> None:
        super().__init__()
        self.failing = failing

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Override one failing check: pick it, then type its name exactly.")
            yield OptionList(*[f"{c.name}: {c.reason}" for c in self.failing], id="override-checks")
            yield Input(placeholder="type the check's name", id="override-typed")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        options = self.query_one(OptionList)
        index = options.highlighted if options.highlighted is not None else 0
        if self.failing:
            self.dismiss((self.failing[index].name, event.value))


class SwapScreen(ModalScreen[None]):
    """The swap plan, live; its keys ask the control for a preview, then a confirmation."""

    BINDINGS: ClassVar[list[BindingType]] = [
        ("escape,q", "dismiss(None)", "Close"), ("o", "override", "Override"), ("a", "approve", "Approve"),
        ("c", "withdraw", "Withdraw"),
        *[(k, f"act('{key}')", label) for k, key, label in KEYS]]
    DEFAULT_CSS = """
    SwapScreen { align: center middle; }
    SwapScreen > VerticalScroll { width: 120; max-width: 98%; height: 90%; border: round $accent;
        background: $surface; padding: 0 1; }
    """

    def __init__(self, state: Any, control: Any, who: str) -> None:
        super().__init__()
        self.state = state
        self.control = control
        self.who = who
        self._shown: tuple[int, int] | None = None

    @property
    def read_only(self) -> bool:
        setup = self.state.swap.setup
        return self.control is None or bool(self.state.info.read_only or (setup and setup.read_only))

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(id="swap-plan")

    def on_mount(self) -> None:
        self.refresh_plan()
        self.set_interval(0.5, self.refresh_plan)

    def refresh_plan(self) -> None:
        view: SwapView = self.state.swap
        clock_running = view.downtime is not None and view.downtime.ended_at_s is None
        running = any(s.state == "running" for s in view.steps.values())
        key = (view.version, int(self.state.now()) if clock_running or running else 0)
        if key == self._shown:
            return
        self._shown = key
        width = max(40, self.size.width - 4)
        self.query_one("#swap-plan", Static).update(format_plan(view, self.state.now(), read_only=self.read_only,
                                                                width=width))

    def _say(self, why: str | None) -> None:
        if why:
            self.notify(why, title="swap", severity="warning")

    def action_act(self, key: str) -> None:
        if self.read_only:
            self._say("read-only: no action can be run from this session")
            return
        asking = getattr(self.control, "swap_preview_async", None)
        if asking is not None:  # an attached console: the core answers with the exact commands
            self.run_worker(self._preview_remote(asking, key), group="swap-preview", exclusive=True)
            return
        self._confirm(*self.control.swap_preview(key))

    async def _preview_remote(self, asking: Any, key: str) -> None:
        self._confirm(*await asking(key))

    def _confirm(self, why: str | None, preview: Any) -> None:
        if preview is None:
            self._say(why)
            return

        def confirmed(ok: bool | None) -> None:
            if ok:
                self._say(self.control.swap_confirm(preview.id, self.who))

        self.app.push_screen(ConfirmScreen(preview), confirmed)

    def action_override(self) -> None:
        if self.read_only:
            self._say("read-only: no action can be run from this session")
            return
        failing = [c for c in self.state.swap.gate if not c.passes]
        if not failing:
            self._say("no failing gate check (run the gate with g)")
            return

        def chosen(choice: tuple[str, str] | None) -> None:
            if choice:
                self._say(self.control.swap_override(choice[0], choice[1], self.who))

        self.app.push_screen(OverrideScreen(failing), chosen)

    def action_approve(self) -> None:
        pending = self.state.swap.pending_approvals
        if not pending or self.control is None:
            self._say("nothing waits for approval")
            return
        self._say(self.control.swap_approve(pending[0].request_id, self.who))

    def action_withdraw(self) -> None:
        pending = [a for a in self.state.swap.pending_approvals if a.requested_by == self.who]
        if not pending or self.control is None:
            self._say("no request of yours waits for approval")
            return
        self._say(self.control.swap_withdraw(pending[0].request_id, self.who))
