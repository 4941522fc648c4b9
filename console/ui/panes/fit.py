"""The fit view: will the model fit, per GPU, with the binding constraint and predicted against
actual. `format_fit` is shared by the app's modal and `gpuconsole fit`."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from console.domain.analysis.fit import FitResult
from console.ui.panes.wrap import hang
from console.units import bar


def format_fit(r: FitResult, calibration: list[tuple[str, str, str]] | None = None, width: int = 76) -> Text:
    """The card, its rows wrapped at `width` under their own text (never at column 0: `gpuconsole fit`
    in an 80-column terminal); the bars as wide as in a 76-column card at most."""
    t = Text()
    badge, badge_style = {True: (" FITS ", "bold black on green"), False: (" DOES NOT FIT ", "bold white on red"),
                          None: (" CANNOT TELL ", "bold black on yellow")}[r.fits]
    t.append(badge, style=badge_style)
    t.append(f"  {r.model}", style="bold")
    t.append(f"  ({r.architecture})\n", style="dim")
    params = f"{r.params_total / 1e9:.1f} B params, " if r.params_total else ""
    size = f"{r.weight_bytes_total / 1e9:.1f} GB of weights" if r.weight_bytes_total else "weight size unknown"
    t.append(f"{params}{size}; --mem-fraction-static {r.mem_fraction_static:.3f}"
             f"{' (auto)' if r.mem_fraction_auto else ''}\n\n", style="dim")
    card = r.figures.get("gpu_mem_gib")
    usable = r.figures.get("pre_load_gib")
    parts = r.weights_gib + r.reserved_gib + r.kv_cache_gib + r.mamba_state_gib + r.spec_state_gib + r.free_gib
    total = max(usable or 0.0, parts)
    t.append("per GPU", style="bold underline")
    if card is not None and usable is not None:
        t.append(f"  ({card:.1f} GiB card, {usable:.1f} GiB usable after the CUDA context)\n")
        allowed = r.figures.get("allowed_gib")
        if allowed is not None and r.weights_gib > allowed:
            t.append(f"  weights exceed what --mem-fraction-static allows ({allowed:.1f} GiB) by "
                     f"{r.weights_gib - allowed:.1f} GiB\n", style="bold red")
    else:
        t.append(f"  ({parts:.1f} GiB)\n")
    rows = [("weights", r.weights_gib, "cyan"), ("held back: activations, CUDA graphs", r.reserved_gib, "grey50"),
            # Memory parts, not verdicts: blues (red and magenta say error, yellow a warning); 256-colour
            # blues, since a theme's ANSI "blue" is violet, next to magenta.
            ("GDN state (mamba pool)", r.mamba_state_gib, "dodger_blue2"),
            ("speculative verification state", r.spec_state_gib, "steel_blue"), ("KV cache", r.kv_cache_gib, "green"),
            ("unused", r.free_gib, "dim")]
    bar_w = max(10, min(width, 76) - 50)
    known = r.capacity_known
    for label, gib, style in rows:
        if gib <= 0 and label not in ("weights", "KV cache"):
            continue
        t.append(f"  {label:<36}", style="dim" if style == "dim" else "")
        # Weights counted as 0: nothing to say of them nor of the pools sized from what they leave
        if not known and label in ("weights", "KV cache", "unused", "GDN state (mamba pool)",
                                   "speculative verification state"):
            t.append("unknown (the weights' size is unknown)\n", style="yellow")
            continue
        t.append(f"{gib:7.2f} GiB ")
        t.append(bar(gib / total if total else 0, bar_w) + "\n", style=style)
    t.append("\ncapacity", style="bold underline")
    t.append("\n")
    t.append(f"  KV bytes per token per GPU           {r.kv_bytes_per_token:,}\n")
    if r.mamba_bytes_per_request:
        t.append(f"  GDN state per request per GPU        {r.mamba_bytes_per_request / 2**20:.1f} MiB\n")
        slots = "–" if r.mamba_slots is None else f"{r.mamba_slots:,}" if known else "unknown"
        t.append(f"  GDN state slots                      {slots}\n")
    if known:
        t.append(f"  max total tokens                     {r.max_total_tokens:,}\n")
        t.append(f"  max running requests                 {r.max_running_requests}\n")
    else:
        t.append("  max total tokens                     unknown (the weights' size is unknown)\n", style="yellow")
        t.append("  max running requests                 unknown\n", style="yellow")
    t.append("  binding constraint                   ", style="")
    t.append(f"{r.binding_constraint}\n", style="bold" if r.fits else "bold red" if r.fits is False else "bold yellow")
    if calibration:
        t.append("\npredicted vs the server's log", style="bold underline")
        t.append("\n")
        t.append(f"  {'figure':<24} {'predicted':>14}  {'server log':>14}\n", style="bold")
        for label, predicted, actual in calibration:
            t.append(f"  {label:<24} {predicted:>14}  {actual:>14}\n")
    for w in r.warnings:
        t.append(f"\n⚠ {w}", style="yellow")
    if r.assumptions:
        t.append("\n\nassumed:", style="dim")
        for a in r.assumptions:
            t.append(f"\n  · {a}", style="dim")
    return hang(t, width)


class FitScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [("escape,q,f", "app.pop_screen", "Close")]
    DEFAULT_CSS = """
    FitScreen { align: center middle; }
    FitScreen > VerticalScroll { width: 84; max-width: 98%; height: auto; max-height: 95%;
        border: round $accent; background: $surface; padding: 0 1; }
    """

    def __init__(self, text: Text) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self.text, id="fit-text")

    def on_resize(self) -> None:
        """Long warnings and assumptions wrap under their own text, not at column 0."""
        body = self.query_one("#fit-text", Static)
        width = body.content_size.width or 80
        body.update(hang(self.text, width))
