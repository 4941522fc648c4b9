"""Pick the new unit, then the one to compare it with, from the SGLang units found on the host."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList


class UnitPicker(ModalScreen[tuple[str, str | None] | None]):
    BINDINGS: ClassVar[list[BindingType]] = [("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    UnitPicker { align: center middle; }
    UnitPicker > Vertical { width: 64; max-width: 95%; height: auto; max-height: 80%;
        border: round $accent; background: $surface; padding: 0 1; }
    UnitPicker OptionList { height: auto; max-height: 16; }
    """
    NONE = "(compare with nothing)"

    def __init__(self, units: tuple[str, ...]) -> None:
        super().__init__()
        self.units = units
        self.new_unit: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            # Its role, true before the swap and after it (never "the one you are about to start").
            yield Label("New unit (the one the swap moves to):", id="picker-label")
            yield OptionList(*self.units, id="picker-list")
            yield Label("↑/↓ choose · enter picks · escape cancels", id="picker-hint", classes="dim")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = 0  # enter picks the first entry at once, as the highlight shows
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        choice = str(event.option.prompt)
        if self.new_unit is None:
            self.new_unit = choice
            self.query_one("#picker-label", Label).update(f"Compare {choice} with:")
            options = self.query_one(OptionList)
            options.clear_options()
            options.add_options([u for u in self.units if u != choice] + [self.NONE])
            options.highlighted = 0
            return
        self.dismiss((self.new_unit, None if choice == self.NONE else choice))

    def action_cancel(self) -> None:
        self.dismiss(None)
