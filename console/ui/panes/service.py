"""The service-diff pane: old unit → new unit, changes grouped by category with their reasons,
lints by severity, drift of the running process; `d` the raw diff, `s` swap, `u` pick units."""

from __future__ import annotations

import textwrap
import time
from dataclasses import replace
from typing import Any, ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import reactive

from console.core.freshness import STALE_AFTER_S
from console.domain.analysis.service_diff import CATEGORY_ORDER, EnvChange, FlagChange, UnitChange
from console.domain.analysis.service_report import ServiceReport, ServiceSide
from console.model import Reading
from console.ui.panes.base import ReadingPane

DIM, OK, WARN, BAD = "dim", "green", "yellow", "bold red"
# Red means an error and only that: what the new unit drops or replaces is shown grey, not red.
OLD = "grey62"
MARK = {"added": ("+", "green"), "removed": ("−", OLD), "changed": ("~", "yellow")}
SEVERITY = {"error": ("✗", BAD), "warning": ("⚠", WARN), "info": ("ℹ", "cyan")}


def _value(value: Any, width: int) -> str:
    if value is True:
        text = "on"
    elif value is None:
        text = "–"
    elif isinstance(value, tuple):
        text = " ".join(value)
    else:
        text = str(value)
    if text.startswith("/") and text.count("/") > 1:
        text = "…/" + text.rstrip("/").rsplit("/", 1)[-1]  # paths: the last part tells them apart
    return text if len(text) <= width else text[: width - 1] + "…"


def _not_installed(side: ServiceSide | None) -> bool:
    """The new unit before the install: the normal state before a swap, not an error (issue 35)."""
    return side is not None and bool(side.error) and str(side.error).endswith(": not installed yet")


def _side(side: ServiceSide | None, *, pid: bool = True) -> Text:
    """A unit and its state. When that state was read is on the pane's border (`ServicePane`):
    it is polled every 15 s, and a unit started since must not read as "inactive" now."""
    t = Text()
    if side is None:
        return t.append("–", style=DIM)
    t.append(side.name, style="bold")
    if _not_installed(side):
        return t.append(" (not installed yet)", style=DIM)
    if side.error:
        return t.append(" (error)", style=BAD)
    if side.active_state is None:
        return t.append(" (file)", style=DIM)
    state = side.active_state
    t.append(f" {state}", style=OK if state == "active" else DIM)
    if side.main_pid and pid:
        t.append(f" pid {side.main_pid}", style=DIM)
    return t


def hang(line: Text, width: int, indent: int) -> Text:
    """`line` broken at spaces to `width`, continuation lines indented by `indent` (Rich would fold
    it at column 0, mid-word: "…active / pid 13995" at 80x24), its styles kept."""
    plain = line.plain
    if len(plain) <= width:
        return line
    out = Text()
    start, room = 0, width
    while len(plain) - start > room:
        cut = plain.rfind(" ", start, start + room + 1)
        if cut <= start:  # one word longer than the room: cut it
            cut = start + room
        out.append_text(line[start:cut])
        out.append("\n" + " " * indent)
        start = cut + 1 if cut < len(plain) and plain[cut] == " " else cut
        room = max(8, width - indent)
    out.append_text(line[start:])
    return out


def units_read_at(at_s: float) -> str:
    """The clock time a service reading was taken (the recording's time in a replay)."""
    return time.strftime("%H:%M:%S", time.localtime(at_s))


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def hanging(message: str, indent: int, width: int) -> str:
    """`message` wrapped to `width`, continuation lines under its first character (not column 1)."""
    room = max(12, width - indent)
    lines = textwrap.wrap(message, room, break_on_hyphens=False, break_long_words=True) or [""]
    return ("\n" + " " * indent).join(lines)


def _lint_lines(text: Text, lints: list[Any], width: int = 10_000) -> None:
    for x in lints:
        icon, style = SEVERITY.get(x.severity, ("·", DIM))
        text.append(f" {icon} ", style=style)
        text.append(hanging(x.message, 3, width) + "\n", style=style if x.severity != "info" else "")


def format_service(reading: Reading[ServiceReport] | None, width: int = 56, *, raw: bool = False,
                   unknown: str | None = None) -> Text:
    """`unknown`: why the change is not known (in place on one unit with no backup of the unit from
    before the install): said instead of a count, never "0 changes" or "no differences"."""
    text = Text(no_wrap=False, overflow="fold")
    if reading is None:
        return Text("reading the units…", style=DIM)
    r = reading.data
    if r is None:
        return Text(reading.error or "no data yet", style=BAD if reading.error else DIM)
    width = max(width, 30)
    wide = width >= 100
    old_side = Text("old ", style=DIM) + _side(r.old)
    new_side = Text("new ", style=DIM) + _side(r.new)
    if wide and len(old_side) + 3 + len(new_side) <= width:
        text.append_text(old_side + Text("   ") + new_side)
    else:
        # a narrow pane (80x24): a side that does not fit on its row leaves its pid out before it
        # wraps (the header took a row more: "new sglang-qwen122b.service active / pid 18903")
        if len(old_side) > width or len(new_side) > width:
            old_side = Text("old ", style=DIM) + _side(r.old, pid=False)
            new_side = Text("new ", style=DIM) + _side(r.new, pid=False)
        text.append_text(hang(old_side, width, 4))
        text.append("\n")
        text.append_text(hang(new_side, width, 4))
    text.append("\n")
    errors = [x for x in r.lints if x.severity == "error"]
    warnings = [x for x in r.lints if x.severity == "warning"]
    notes = [x for x in r.lints if x.severity not in ("error", "warning")]
    missing = [side.name for side in (r.old, r.new) if _not_installed(side)]  # type: ignore[union-attr]
    # the same file on both sides: its error once; a unit not installed yet is no error
    side_errors = [e for e in dict.fromkeys(r.errors) if not any(e == f"{m}: not installed yet" for m in missing)]
    n_errors = len(errors) + len(side_errors)
    compared = r.old is not None and r.old.command is not None and r.new.command is not None
    summary = Text()
    if compared and unknown is not None:
        summary.append("changes unknown", style=WARN)
    elif compared:
        summary.append(plural(r.change_count, "change"), style="bold")
    elif missing and not n_errors:
        summary.append(f"nothing to compare yet: {missing[0]} is not installed (the swap plan's i installs it)",
                       style=DIM)
    else:
        summary.append("nothing compared", style="bold")
    summary.append(f" · {plural(n_errors, 'error')}", style=BAD if n_errors else OK)
    summary.append(f" · {plural(len(warnings), 'warning')}", style=WARN if warnings else OK)
    counted = len(summary)
    summary.append(f" · {plural(len(notes), 'note')}", style=DIM)
    if len(summary) > width:  # the notes are listed below: their count gives way before the line wraps
        summary = summary[:counted]
    if r.drift:
        summary.append(" · DRIFT", style="bold black on yellow")
    text.append_text(hang(summary, width, 2))
    text.append("\n")
    for error in side_errors:
        text.append(f" ✗ {hanging(error, 3, width)}\n", style=BAD)
    if r.drift:
        text.append(f" ⚠ {r.drift_of} runs with other flags than its unit file: unit changed, not restarted\n",
                    style="bold yellow")
        for c in r.drift:
            text.append(f"   {c.flag}: running {_value(c.old, 24)}, unit {_value(c.new, 24)}\n", style=WARN)
    if unknown is not None:
        text.append(f"the install's change: {hanging(unknown, 3, width)}\n", style=WARN)
    if raw:
        for line in () if unknown is not None else r.raw_diff or ("(no differences)",):
            style = ("green" if line.startswith("+") else OLD if line.startswith("-")
                     else "cyan" if line.startswith("@@") else DIM)
            text.append(line + "\n", style=style)
        return text
    _lint_lines(text, errors + warnings, width)
    if r.old is not None and r.old.command is not None and r.new.command is not None and not r.change_count \
            and unknown is None:
        text.append("no differences\n", style=OK)
    flag_w = min(max((len(c.flag) for c in r.changes), default=10), 34 if wide else 24)
    by_cat: dict[str, list[FlagChange]] = {}
    for c in r.changes:
        by_cat.setdefault(c.category, []).append(c)
    for cat in CATEGORY_ORDER:
        items = by_cat.get(cat)
        if not items:
            continue
        reasons = {c.reason for c in items}
        shared = reasons.pop() if len(reasons) == 1 and len(items) > 1 else None
        text.append(cat, style="bold underline")
        if shared:  # beside the category when it fits there, else under it
            inline = wide and len(cat) + 2 + len(shared) <= width
            text.append(("  " + shared) if inline else ("\n  " + hanging(shared, 2, width)), style="italic dim")
        text.append("\n")
        for c in items:
            mark, style = MARK[c.change]
            text.append(f" {mark} ", style=style + " bold")
            text.append(f"{c.flag:<{flag_w}} ", style=style)
            room = width - flag_w - 4
            if c.change == "changed":
                old_v, new_v = _value(c.old, 40), _value(c.new, 40)
                if len(old_v) + len(new_v) + 3 > room:
                    half = (width - 9) // 2
                    text.append("\n     ")
                    old_v, new_v = _value(c.old, half), _value(c.new, half)
                text.append(old_v, style=OLD)
                text.append(" → ")
                text.append(new_v, style="green")
            else:
                text.append(_value(c.new if c.change == "added" else c.old, max(8, room)))
            if c.reason and not shared and not c.reason.startswith("new model:"):
                if wide and flag_w + 4 + len(c.reason) + 40 <= width:
                    text.append("  " + c.reason, style="italic dim")
                else:  # under the flag, and wrapped there
                    text.append("\n     " + hanging(c.reason, 5, width), style="italic dim")
            text.append("\n")
    if r.env_changes:
        text.append("environment\n", style="bold underline")
        for e in r.env_changes:
            mark, style = MARK[e.change]
            text.append(f" {mark} {e.name}", style=style)
            text.append(f" {e.old or ''}{' → ' if e.change == 'changed' else ''}{e.new or ''}\n", style=DIM)
    if r.unit_changes:
        text.append("unit\n", style="bold underline")
        for u in r.unit_changes:
            mark, style = MARK[u.change]
            text.append(f" {mark} {u.directive}=", style=style)
            if u.change == "changed":
                text.append(f" {_value(u.old, 40)}", style="red")
                text.append(" → ")
                text.append(_value(u.new, 40), style="green")
            else:
                text.append(f" {_value(u.new if u.change == 'added' else u.old, max(8, width - len(u.directive) - 5))}")
            if u.reason:
                text.append("\n     " + hanging(u.reason, 5, width), style="italic dim")
            text.append("\n")
    if notes:
        text.append("notes", style="bold underline")
        # its own line, not in parentheses: the source may hold parentheses of its own
        source = r.flags_source + (f"; ran {r.flags_binary}" if r.flags_binary else "")
        text.append("\n  " + hanging(source, 2, width) + "\n", style=DIM)
        _lint_lines(text, notes, width)
    if reading.error:
        text.append(f"✗ {reading.error}\n", style=BAD)
    text.rstrip()
    return text


def with_install_change(reading: Reading[ServiceReport] | None, fact: dict[str, Any]
                        ) -> Reading[ServiceReport] | None:
    """In place on one unit, after the install: the unit is read against itself (its file rewritten),
    so the diff shown is the install's change, the swap's fact (the unit as the last reading before
    the install saw it against the first after: console/core/derive/swap_observer.py), as the gate
    and the report read it. Any other reading, or no such fact for this unit: the reading as it is."""
    r = reading.data if reading is not None else None
    if r is None or not fact or r.old is None or not (r.old.name == r.new.name == fact.get("unit")):
        return reading
    changed = replace(
        r, changes=tuple(FlagChange(**c) for c in fact.get("changes", ())),
        env_changes=tuple(EnvChange(**e) for e in fact.get("env_changes", ())),
        unit_changes=tuple(UnitChange(**u) for u in fact.get("unit_changes", ())),
        raw_diff=tuple(fact.get("raw_diff", ())), other_way=None)
    return replace(reading, data=changed)  # type: ignore[arg-type]


def install_change_words(fact: dict[str, Any]) -> str:
    """What the pane compares in place on one unit: the unit before the install (as a reading saw it,
    or as the install's backup on the host keeps it) against the unit as installed, when and by whom."""
    at, installed_at, who = fact.get("before_at"), fact.get("installed_at"), fact.get("by")
    when = f" {units_read_at(installed_at)}" if isinstance(installed_at, (int, float)) else ""
    by = f" by {who}" if who else " by an unknown author"
    if fact.get("from") == "backup":
        return (f"in place: the install's change (installed{when}{by}), the unit from the backup "
                f"{fact.get('backup')} → as installed")
    read = f" (read {units_read_at(at)})" if isinstance(at, (int, float)) else ""
    return f"in place: the install's change, the unit before it{read} → as installed"


def oriented(reading: Reading[ServiceReport] | None, flipped: bool) -> Reading[ServiceReport] | None:
    """The reading as this view shows it: `flipped`, the report the other way round (the old unit as
    the new), as the source delivered it; the state's reading is never changed."""
    if not flipped or reading is None or reading.data is None:
        return reading
    other = reading.data.flipped()
    return reading if other is None else replace(reading, data=other)


class ServicePane(ReadingPane):
    PANE_TITLE: ClassVar[str] = "Service diff"
    PANE_KEY: ClassVar[str] = "3"
    STALE_AFTER_S: ClassVar[float] = STALE_AFTER_S["service"]  # the one rule (core/freshness.py)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "toggle_raw", "Raw diff"),
        Binding("s", "swap", "Flip old/new"),
        Binding("u", "pick_units", "Units"),
        Binding("f", "fit", "Fit"),
    ]

    raw: reactive[bool] = reactive(False)
    # `s`: show the report the other way round. This view's choice alone: the source delivers both
    # orientations, so nothing is asked of the host and no event is made (issue 20).
    flipped: reactive[bool] = reactive(False)

    class PickRequested(Message):
        pass

    class FitRequested(Message):
        pass

    def set_health(self, *, stale: bool, error: bool, subtitle: str) -> None:
        """The border says when the units were read ("units read 17:41:22 · live"): once, where it
        never wraps the body (at 80x24 an "(as of …)" after each unit went onto its own line)."""
        reading = self.reading
        if subtitle and not error and reading is not None and reading.ok_at_s is not None:
            subtitle = f"units read {units_read_at(reading.ok_at_s)} · {subtitle}"
        super().set_health(stale=stale, error=error, subtitle=subtitle)

    install_change: dict[str, Any] = {}  # the swap's fact: the install's change of a unit both old and new
    change_unknown: str | None = None  # the swap's word: why that change is unknown (no backup on the host)

    def state_changed(self, state: Any, source: str) -> None:
        fact, unknown = state.swap.install_diff(), state.swap.install_change_unknown()
        news = (fact, unknown) != (self.install_change, self.change_unknown)
        self.install_change, self.change_unknown = fact, unknown
        before = self.reading
        super().state_changed(state, source)
        if news and self.reading is before:  # the same reading, shown anew with the install's change
            self._render_now()

    def render_reading(self, reading: Reading[Any] | None) -> RenderableType:
        installed = with_install_change(reading, self.install_change)
        shown = oriented(installed, self.flipped)
        r = reading.data if reading is not None else None
        one_unit = r is not None and r.old is not None and r.old.name == r.new.name
        unknown = self.change_unknown if installed is reading and one_unit and not self.flipped else None
        text = format_service(shown, self.content_size.width or 56, raw=self.raw, unknown=unknown)
        if installed is not reading and shown is installed:
            text = Text(install_change_words(self.install_change) + "\n", style=DIM) + text
        if shown is not reading and reading is not None and reading.data is not None:
            # Said in the body too: the swap plan's new unit has not changed, only this view.
            note = Text(f"flipped in this view (s): the swap's new unit is still {reading.data.new.name}\n",
                        style=DIM)
            text = note + text
        return text

    def watch_raw(self) -> None:
        self._view_changed()

    def watch_flipped(self) -> None:
        self._view_changed()

    def _view_changed(self) -> None:
        self.show(self.render_reading(self.reading))
        self.border_title = (f"{self.PANE_KEY} {self.PANE_TITLE}" + (" (raw)" if self.raw else "")
                             + (" (flipped)" if self.flipped else ""))

    def action_toggle_raw(self) -> None:
        self.raw = not self.raw

    def action_swap(self) -> None:
        report = self.reading.data if self.reading is not None else None
        if not self.flipped and (report is None or report.flipped() is None):
            self.notify("No unit to swap with: pick one with u", title="service", severity="warning")
            return
        self.flipped = not self.flipped

    def action_pick_units(self) -> None:
        self.post_message(self.PickRequested())

    def action_fit(self) -> None:
        self.post_message(self.FitRequested())
