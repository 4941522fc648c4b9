"""The swap plan screen: the steps with their state and timings, the downtime clock, the preflight
gate, approvals waiting and the last commands run. It renders from the state and asks the host
only through the control (the runner's SwapController): the confirmation shows the exact commands,
an override needs the check's name typed. `format_plan` is pure and tested without an app."""

from __future__ import annotations

import asyncio
import textwrap
import time
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, OptionList, Static

from console.core.derive.swap_view import (
    PLAN_STEPS,
    STEP_TITLES,
    SwapView,
    audit_summary,
    format_duration,
    whole_second_parts,
)
from console.core.state import same_person, who_can_approve
from console.domain.paths import host_named

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


def cut_words(text: str, width: int) -> str:
    """`text` in `width` cells: whole, else cut at its last space (or `/`) in the room, with "…"."""
    if len(text) <= width:
        return text
    room = text[: max(1, width - 1)]
    at = max(room.rfind(" "), room.rfind("/"))
    return (room[:at] if at > width // 2 else room).rstrip() + "…"


def step_words(key: str) -> str:
    """A step as the plan's keys name it ("gate", "stop old"), else by its title: never its raw key
    (the plan said "busy: preflight", and "in_place" would be worse)."""
    label = next((label for _, k, label in KEYS if k == key), None)
    if label is not None:
        return label
    title = STEP_TITLES.get(key)
    return title[:1].lower() + title[1:] if title else key.replace("_", " ")


def plan_strip_width(screen_width: int) -> int:
    """The docked plan's width: 46 columns at 80, 56 at 120, 40 % of a wide screen (80 at 200)."""
    if screen_width >= 160:
        return max(64, int(screen_width * 0.4))
    return max(46, min(56, screen_width - 34))


def _dur(s: float | None) -> str:
    return "" if s is None else format_duration(s)


def _clock(at: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at)) if at else "?"


def audit_status(e: Any, view: SwapView) -> str:
    """A final status for every row: an exit status, or for what runs on (the benchmark, a
    verification) the state of its step now."""
    if e.exit_status is not None:
        return "ok" if e.exit_status == 0 else f"exit {e.exit_status}"
    if e.note == "started":
        step = view.steps.get(e.action)
        return {"done": "done", "failed": "failed", "running": "started"}.get(step.state if step else "", "started")
    if e.note in ("timed out", "connection lost", "write failed"):
        return e.note
    return "noted"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _cut_at_word(text: str, width: int) -> str:
    """`text` within `width` cells: whole, or cut at the end of a word with an ellipsis ("Stop the old
    service…", never "Stop the old service, dra"); a first word longer than the width is cut in it."""
    if len(text) <= width:
        return text
    room = text[: max(0, width - 1)]
    if not text[len(room)].isspace():  # the cut falls inside a word: back to the space before it
        at = room.rfind(" ")
        room = room[:at] if at > 0 else room
    return (room.rstrip(" ,;:") or room) + "…"


def format_plan(view: SwapView, now_s: float, *, read_only: bool = False, width: int = 100,
                approvers: str | None = None, host_root: str | None = None) -> Text:
    """`approvers`: who can approve this person's requests under the two-person rule, said up front
    (core/state.who_can_approve). `host_root`: the demo's sandbox (HostInfo.host_root): the last
    commands name a file as the host names it ("sftp put /etc/systemd/system/…", not "/tmp/gpusim-…")."""
    t = Text()
    setup = view.setup
    if setup is not None:
        units = f"{setup.old_unit or '?'} → {setup.new_unit or '?'}"
        if len(units) > width:  # the plan docked beside the panes is narrow: the new unit below the old
            units = f"{_cut(setup.old_unit or '?', width - 2)} →\n  {_cut(setup.new_unit or '?', width - 2)}"
        t.append(units, style="bold")
        rules = [r for r, on in (("read-only", setup.read_only), ("two-person rule", setup.require_approval),
                                 ("sha256 required", setup.verify_sha)) if on]
        if rules:
            t.append("   [" + ", ".join(rules) + "]", style="yellow")
        t.append("\n")
        if setup.require_approval and approvers:
            t.append(f"approvals: {approvers}\n", style="yellow")
    d = view.downtime
    secs = view.downtime_s(now_s)
    if d is not None and secs is not None:
        running = d.ended_at_s is None
        t.append("downtime ", style="bold")
        t.append(_dur(secs), style="bold red" if running else "bold green")
        ended = " (running)" if running else f" (ended {_clock(d.ended_at_s)}: {d.end_source})"
        since = f"from {_clock(d.started_at_s)}: {d.start_source}"
        head = len("downtime ") + len(_dur(secs))
        # A narrow plan puts "from …" on its own indented line and cuts with …, never wraps at column 0.
        fits = head + len(ended) + 2 + len(since) <= width
        t.append(ended if fits else _cut(ended, width - head), style="yellow" if running else "dim")
        t.append(("  " + since) if fits else ("\n   " + _cut(since, width - 3)), style="dim")
        t.append("\n")
        parts = view.downtime_parts()
        if parts:
            said = " + ".join(f"{name} {_dur(sec)}" for name, sec in whole_second_parts(parts))
            t.append("".join(f"   {row}\n" for row in textwrap.wrap(said, max(20, width - 3))), style="dim")
    else:
        said = "downtime: not started (the clock starts at the old server's last served request)"
        t.append("".join(f"{row}\n" for row in textwrap.wrap(said, max(20, width), subsequent_indent="   ")),
                 style="dim")
    busy = setup.busy if setup is not None else None
    if busy:
        step = view.steps.get(busy)
        t.append(f"busy: {step_words(busy)}" + (f" ({step.detail})" if step and step.detail else "")
                 + " — keys for the next step are queued, others refused\n", style="yellow")
    t.append("\n")
    for step in view.ordered_steps():
        style = STATE_STYLE.get(step.state, "")
        took = step.duration_s if step.ended_at_s is not None else (
            now_s - step.started_at_s if step.started_at_s is not None and step.state == "running" else None)
        who = f"  {step.who}" if step.who else ("  seen on the host" if step.observed else "")
        if step.observed and not step.who and width - 3 - 16 - 9 - 7 < len(who):
            who = "  on host"  # the plan docked at 120 columns (56 wide): said short where it fits
        # The title gives way in a narrow plan (80x24), so a step stays one line (never wrapped at column 0).
        title_w = max(16, min(44, width - 3 - 9 - 7 - len(who)))
        t.append(f" {STATE_MARK.get(step.state, '?')} ", style=style)
        t.append(f"{_cut_at_word(step.title, title_w):<{title_w}}", style=style)
        t.append(f" {step.state:<8}", style=style)
        t.append(f" {_dur(took):>6}", style="dim")
        if who and len(who) <= width - 3 - title_w - 9 - 7:  # whole, or not at all ("roo")
            t.append(who, style="dim")
        t.append("\n")
        detail = step.detail
        if not detail and step.key == "install" and step.state == "pending":
            detail = "not installed yet"
        if detail:
            # wrapped under the step (indented, at most 3 lines), never cut mid-word nor at column 0
            rows = textwrap.wrap(detail, max(20, width - 5), max_lines=3 if width >= 60 else 5,
                                 placeholder=" …") or [""]
            t.append("".join(f"     {row}\n" for row in rows), style="red" if step.state == "failed" else "dim")
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
            t.append(f" {mark} {c.name:<9} ", style=style)  # a space after the name, 9 letters or more
            reason = c.reason + (f"  (overridden by {c.overridden_by})" if c.overridden_by else "")
            t.append(f"{_cut_at_word(reason, max(20, width - 15))}\n", style="" if verdict == "passed" else style)
    pending = view.pending_approvals
    if pending:
        t.append("\nwaiting for approval\n", style="bold yellow")
        for a in pending:
            t.append(f" {a.action} asked by {a.requested_by} ({a.request_id}): another attached person approves "
                     "with a (c withdraws it)\n", style="yellow")
            for line in a.commands[:4]:
                t.append(f"   {line[: width - 4]}\n", style="dim")
    if view.audit:
        t.append("\nlast commands (A: every command in full)\n", style="bold")
        for e in list(view.audit)[-5:]:
            status = audit_status(e, view)
            head = f" {time.strftime('%H:%M:%S', time.localtime(e.at_s))} {e.who} [{status}] "
            t.append(head, style="dim" if status in ("ok", "started", "done", "noted") else "red")
            # the room the row has, the command cut at a word behind "…" ("systemctl stop sglan" was)
            # the note "started" is the status's own word (audit_status): said there, once
            summary = audit_summary(e, with_note=e.note != "started")
            t.append(cut_words(host_named(summary, host_root), max(20, width - len(head))) + "\n")
    t.append("\n")
    if read_only:
        t.append("read-only: no action can be run from this session", style="bold yellow")
    else:
        groups = [f"{k} {label}" for k, _, label in KEYS] + ["o override", "a approve", "c withdraw", "A audit",
                                                              "esc close"]
        rows: list[str] = []
        for g in groups:  # broken between keys, never inside one (a narrow plan: 80x24)
            if rows and len(rows[-1]) + 2 + len(g) <= width:
                rows[-1] += "  " + g
            else:
                rows.append(g)
        t.append("\n".join(rows), style="dim")
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

    def on_mount(self) -> None:
        """Over the docked plan, the commands come up in the plan's strip: the panes stay seen."""
        stack = self.app.screen_stack
        if len(stack) > 1 and isinstance(stack[-2], SwapScreen):
            self.styles.align = ("right", "middle")
            self.styles.background = "transparent"
            self.query_one(VerticalScroll).styles.width = plan_strip_width(self.app.size.width)

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
        t.append("\nenter: ask anyway (the gate is checked again: while it fails, nothing runs)   escape: cancel"
                 if bad else "\nenter: run once   escape: cancel", style="bold")
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

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        # Enter on the list picks the check; typing then goes into the name field (issue 22 item 4).
        self.query_one("#override-typed", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        options = self.query_one(OptionList)
        index = options.highlighted if options.highlighted is not None else 0
        if self.failing:
            self.dismiss((self.failing[index].name, event.value))


class AuditScreen(ModalScreen[None]):
    """Every audited command in full, with its exit status and output tail."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape,q,A", "dismiss(None)", "Close")]
    DEFAULT_CSS = """
    AuditScreen { align: center middle; }
    AuditScreen > VerticalScroll { width: 120; max-width: 98%; height: 90%; border: round $accent;
        background: $surface; padding: 0 1; }
    """

    def __init__(self, view: SwapView) -> None:
        super().__init__()
        self.view = view

    def compose(self) -> ComposeResult:
        t = Text()
        t.append("Every command run on the host, in full\n\n", style="bold")
        for e in self.view.audit:
            t.append(f"{time.strftime('%H:%M:%S', time.localtime(e.at_s))} {e.who} {e.action} "
                     f"[{audit_status(e, self.view)}]\n", style="bold")
            for line in (e.command or "").splitlines():
                t.append(f"  {line}\n", style="cyan")
            if e.output_tail:
                t.append(f"  → {e.output_tail.strip()[-400:]}\n", style="dim")
        if not self.view.audit:
            t.append("nothing has run yet\n", style="dim")
        with VerticalScroll():
            yield Static(t, id="audit-text")


class ApproveScreen(ModalScreen[bool]):
    """A request waiting for another person: who asks, what, the exact commands; enter approves."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape,n", "dismiss(False)", "Not now"),
                                             ("enter,y", "confirm", "Approve")]
    DEFAULT_CSS = """
    ApproveScreen { align: center middle; }
    ApproveScreen > VerticalScroll { width: 110; max-width: 98%; height: auto; max-height: 90%;
        border: thick $warning; background: $surface; padding: 0 1; }
    """

    def __init__(self, request: Any) -> None:
        super().__init__()
        self.request = request
        self._done = False

    def compose(self) -> ComposeResult:
        r = self.request
        t = Text()
        t.append(f"{r.requested_by} asks for your approval (the two-person rule)\n\n", style="bold yellow")
        t.append(f"{r.action.replace('_', ' ')}, asked {time.strftime('%H:%M:%S', time.localtime(r.requested_at_s))}"
                 f" (request {r.request_id}); these commands will run on the host:\n\n")
        for line in r.commands:
            t.append(line + "\n", style="bold" if line.startswith("#") else "cyan")
        t.append("\nenter: approve (it runs at once)   escape: not now", style="bold")
        with VerticalScroll():
            yield Static(t, id="approve-text")

    def action_confirm(self) -> None:
        if not self._done:
            self._done = True
            self.dismiss(True)


class SwapScreen(ModalScreen[None]):
    """The swap plan, live; its keys ask the control for a preview, then a confirmation."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # q leaves the console here as on the panes beside (the docked plan looks part of that
        # screen: a first q that only closed it surprised the operator); esc closes the plan.
        ("escape", "dismiss(None)", "Close"), ("q", "app.quit", "Quit"),
        ("o", "override", "Override"), ("a", "approve", "Approve"),
        ("c", "withdraw", "Withdraw"), ("A", "audit", "Audit in full"),
        *[(k, f"act('{key}')", label) for k, key, label in KEYS],
        # Under --read-only the keys above are neither shown nor run (check_action): these take
        # them, unseen, to say why nothing runs (the footer listed every action key beside the
        # plan's own "read-only: no action can be run from this session").
        *[Binding(k, "refused_read_only", show=False) for k in ("o", "a", "c", *(k for k, _, _ in KEYS))]]
    ACTING: ClassVar[frozenset[str]] = frozenset({"act", "override", "approve", "withdraw"})
    # Beside the panes, never over them (issue 35 item 1): the plan is a strip docked on the right,
    # the screen below shows through (no dimming) and its grid makes room for it (HostScreen.dock_plan),
    # so the drain, the boot and the log are seen while they happen. Its own footer: the plan's keys.
    DEFAULT_CSS = """
    SwapScreen { background: $background 0%; }
    SwapScreen > VerticalScroll { dock: right; width: 56; height: 1fr; border: round $accent;
        background: $surface; padding: 0 1; }
    """

    def __init__(self, state: Any, control: Any, who: str) -> None:
        super().__init__()
        self.state = state
        self.control = control
        self.who = who
        self._shown: tuple[Any, ...] | None = None
        self.queued: str | None = None  # a key pressed while an action ran, safe to run next
        self._asked: set[str] = set()  # approval requests already put in front of this person
        self.plan_draws = 0  # how many times the plan was drawn (tests read it)

    @property
    def read_only(self) -> bool:
        setup = self.state.swap.setup
        return self.control is None or bool(self.state.info.read_only or (setup and setup.read_only))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A read-only session's footer lists no action key (False: neither shown nor run)."""
        if action in self.ACTING:
            return not self.read_only
        if action == "refused_read_only":
            return self.read_only
        return True

    def action_refused_read_only(self) -> None:
        self._say("read-only: no action can be run from this session")

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="swap-strip"):
            yield Static(id="swap-plan")
        yield Footer()

    def on_mount(self) -> None:
        self._dock()
        self.refresh_plan()
        # Beside a host screen the plan is refreshed by that screen's one refresh path (its flush
        # when the swap's state moved, its age timer while a clock runs: issue 33/36), never by a
        # timer of its own. Alone (a test's app, nothing below to drive it) it looks twice a second.
        if self._host_below() is None:
            self.set_interval(0.5, self.refresh_plan)

    def on_resize(self) -> None:
        self._dock()
        self.call_after_refresh(self.refresh_plan)  # its width is part of what it draws

    def on_unmount(self) -> None:
        host = self._host_below()
        if host is not None:
            host.undock_plan()

    def _host_below(self) -> Any:
        """The screen whose panes the plan sits beside (None: the plan alone, as in a test)."""
        dock = getattr(self.app, "screen_stack", [])
        for screen in reversed(dock[:-1] if dock and dock[-1] is self else dock):
            if hasattr(screen, "dock_plan"):
                return screen
        return None

    def _dock(self) -> None:
        width = plan_strip_width(self.app.size.width)
        strip = self.query_one("#swap-strip", VerticalScroll)
        strip.styles.width = width
        host = self._host_below()
        if host is not None:
            top = host.dock_plan(width)
            strip.styles.margin = (top, 0, 0, 0)

    def refresh_plan(self) -> None:
        """Draw the plan if what it shows changed (the swap's version, its running clock's
        second, the width), and run a key queued while the last action ran."""
        if not self.is_attached or not self.query("#swap-plan"):  # pushed, not composed yet: the flush came first
            return
        view: SwapView = self.state.swap
        self._pending_requests(view)
        setup = view.setup
        if self.queued is not None and (setup is None or setup.busy is None):
            key, self.queued = self.queued, None
            self.action_act(key)
        clock_running = view.downtime is not None and view.downtime.ended_at_s is None
        running = any(s.state == "running" for s in view.steps.values())
        width = self._plan_width()
        approvers = (who_can_approve(self.state.presence, self.who)
                     if setup is not None and setup.require_approval else None)
        if approvers and approvers.startswith("nobody") and getattr(self.app, "share_address", None):
            # already shared (`--share`): the way in is on the header, the invites' files said beside
            approvers = approvers.split("; a second person", 1)[0] + " yet: another person attaches " \
                "with the header's command (an invited one with their invite's file)"
        key = (view.version, int(self.state.now()) if clock_running or running else 0, width, approvers)
        if key == self._shown:
            return
        self._shown = key
        self.plan_draws += 1
        self.query_one("#swap-plan", Static).update(format_plan(view, self.state.now(), read_only=self.read_only,
                                                                width=width, approvers=approvers,
                                                                host_root=getattr(self.state.info, "host_root", None)))

    def _plan_width(self) -> int:
        """The plan's own width: inside the border, the padding and the scrollbar (at 80x24 the
        screen's width less 4 was 4 columns too wide, and a step's detail wrapped at column 0)."""
        width = self.query_one("#swap-plan", Static).content_region.width
        if width <= 0:
            # before the first layout: the docked strip's width less its border, padding and a
            # scrollbar (the screen's 98 % drew 72 columns into a strip 40 wide at 80x24: every
            # step broke at column 0 until the next redraw)
            width = plan_strip_width(self.app.size.width) - 6
        return max(40, width)

    def _say(self, why: str | None) -> None:
        if why:
            self.notify(why, title="swap", severity="warning", markup=False)

    def _pending_requests(self, view: SwapView) -> None:
        """A request someone else made: a bell and the request itself, once (issue 22 item 6)."""
        for req in view.pending_approvals:
            if req.request_id in self._asked:
                continue
            if self._mine(req.requested_by):  # never a dialog the core will refuse: say who can (issue 35 item 2)
                self._asked.add(req.request_id)
                self._say(f"waiting for another person: {who_can_approve(self.state.presence, req.requested_by)}")
                continue
            self._asked.add(req.request_id)
            self.app.bell()
            if self.control is not None and not self.read_only:
                self._ask_approval(req)

    def _ask_approval(self, req: Any) -> None:
        def decided(ok: bool | None) -> None:
            if ok:
                self._say(self.control.swap_approve(req.request_id, self.who))

        self.app.push_screen(ApproveScreen(req), decided)

    def action_audit(self) -> None:
        self.app.push_screen(AuditScreen(self.state.swap))

    def action_act(self, key: str) -> None:
        if self.read_only:
            self._say("read-only: no action can be run from this session")
            return
        setup = self.state.swap.setup
        busy = setup.busy if setup is not None else None
        if busy is not None and key != "stop_download":
            order = [k for k, _ in PLAN_STEPS]
            if busy in order and key in order and order.index(key) == order.index(busy) + 1:
                self.queued = key  # the next step: its confirmation comes up when this one ends
                self.notify(f"queued: {step_words(key)} (its commands are shown when "
                            f"{step_words(busy)} is done)", title="swap", markup=False)
                return
            step = self.state.swap.steps.get(busy)
            self.notify(f"busy: {step_words(busy)}" + (f" ({step.detail})" if step and step.detail else "")
                        + f"; {step_words(key)} refused", title="swap", severity="warning",
                        markup=False)
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

    def _mine(self, requester: str) -> bool:
        """Whether `requester` is this person (by identity: another connection of theirs too)."""
        presence = getattr(self.state, "presence", None)
        if presence is None or not presence.clients:
            return requester == self.who
        return same_person(presence, requester, getattr(self.control, "client_id", None)) or requester == self.who

    def action_approve(self) -> None:
        all_pending = self.state.swap.pending_approvals
        pending = [a for a in all_pending if not self._mine(a.requested_by)]
        if not pending or self.control is None:
            mine = [a for a in all_pending if self._mine(a.requested_by)]
            who = who_can_approve(self.state.presence, mine[0].requested_by) if mine else ""
            self._say(f"your request waits for another person: {who}" if mine else "nothing waits for your approval")
            return
        self._ask_approval(pending[0])  # who, what and the exact commands first; enter approves

    def action_withdraw(self) -> None:
        pending = [a for a in self.state.swap.pending_approvals if a.requested_by == self.who]
        if not pending or self.control is None:
            self._say("no request of yours waits for approval")
            return
        self._say(self.control.swap_withdraw(pending[0].request_id, self.who))


# -- the demo's operator (issue 22 item 8): the swap driven through this screen, visibly ----------
DEMO_PLAN = ("download", "install", "verify", "preflight", "stop_old", "start_new", "benchmark")
DEMO_BENCH = [(4, 8, 256, 128)]
FINISHED = ("done", "failed", "skipped", "refused")  # the old model's run and the new one's: like workloads, comparable


async def drive_plan_as_operator(app: Any, *, read_s: float = 2.5, timeout_s: float = 900.0,
                                 plan: tuple[str, ...] = DEMO_PLAN) -> str:
    """`gpuconsole --demo --demo-scenario operator`: an operator at the keys of the Swap plan. The
    old model is benchmarked first (the report's "before"); then each step's key is pressed on the
    plan screen, its confirmation (the exact commands) stays up `read_s` to be read, enter runs
    it, and the next waits for it to end. Returns how it ended (one line)."""
    state = app.state
    runner = getattr(app, "runner", None)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s

    async def until(ready: Any) -> bool:
        while loop.time() < deadline:
            if ready():
                return True
            await asyncio.sleep(0.2)
        return False

    if runner is None or not await until(lambda: state.data("service") is not None
                                          and state.data("gpu") is not None):
        return "the demo host did not answer"
    # The old model's run waits for its server to read ready: on a loaded machine the simulated
    # server was still booting at t≈16 s and the "before" run failed at once (HTTP 503, "server is
    # starting"), the report then without a before.
    if not await until(lambda: getattr(state.data("server"), "status", None) == "ready"):
        return "the old server never read ready"
    runner.swap.bench_plan = list(DEMO_BENCH)
    if runner.start_bench("sweep", list(DEMO_BENCH)) is None:  # the old model's run: the "before"
        await until(lambda: runner.bench is None or not runner.bench.running)
    opened = False
    for key in plan:
        if state.swap.steps[key].state in ("done", "skipped"):
            continue
        if not isinstance(app.screen, (SwapScreen, ConfirmScreen)):
            if opened:  # the watcher closed it (esc): not opened again over them; p brings it back
                app.notify("the demo's operator waits for the Swap plan: p shows it", title="the demo's operator")
                if not await until(lambda: isinstance(app.screen, SwapScreen)):
                    return f"{key}: the plan was not opened again"
            else:
                app.action_swap_plan()
                opened = True
                await asyncio.sleep(0.5)
        screen = app.screen
        if not isinstance(screen, SwapScreen):
            return f"{key}: the plan screen is not up"
        screen.action_act(key)
        if not await until(lambda: isinstance(app.screen, ConfirmScreen)):
            return f"{key}: no confirmation came up"
        await asyncio.sleep(read_s)  # the commands, on screen long enough to read
        confirm = app.screen
        if isinstance(confirm, ConfirmScreen):
            confirm.action_confirm()
        await until(lambda k=key: state.swap.steps[k].state in FINISHED)
        step = state.swap.steps[key]
        if step.state in ("failed", "refused"):
            return f"{key}: {step.state}: {step.detail}"
        await asyncio.sleep(read_s / 2)
    return "the swap is done"
