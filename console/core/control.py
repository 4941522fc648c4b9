"""`HostControl`: everything a view may ask of a host, in one Protocol (no Textual).

Three implementations, each complete: the runner (`console.core.runner.HostRunner`, this
process drives the host), the local seat of a shared console (`console.share.server.LocalSeat`,
the same role checks as a remote participant) and the remote client
(`console.share.client.RemoteControl`, each request goes to the core). A replay, or any view
that may ask nothing, gets `NoControl`, which answers every request with why not.

So a view never probes (`hasattr`/`getattr`) what its control can do: it asks, and shows the
answer. Requests return why not (a sentence for the operator), or None when done or started;
an attached view's answer arrives later as a notice in its own state.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

BenchPlan = list[tuple[int, int, int, int]]  # (concurrency, prompts, input tokens, output tokens)
NOT_SHARED = "not a shared session: start the console with --share (or gpuconsole serve) to pair"


@runtime_checkable
class HostControl(Protocol):
    """What a view may ask of one host."""

    @property
    def client_id(self) -> int | None:
        """This view's participant id in a shared session; None when not shared."""
        ...

    @property
    def who(self) -> str | None:
        """The person acting (audit and approvals); None when unknown."""
        ...

    # -- reading and acting on the host --------------------------------------------------
    def verify(self) -> str | None: ...
    def pick_units(self, new: str, old: str | None) -> None: ...
    def start_bench(self, kind: str, plan: BenchPlan | None = None) -> str | None: ...
    def stop_bench(self) -> str | None: ...

    # -- the swap: a preview with the exact commands, then a confirmation ------------------
    async def swap_preview_async(self, key: str) -> tuple[str | None, Any]: ...
    def swap_confirm(self, preview_id: str, who: str | None = None) -> str | None: ...
    def swap_override(self, check: str, typed: str, who: str | None = None) -> str | None: ...
    def swap_approve(self, request_id: str, who: str) -> str | None: ...
    def swap_withdraw(self, request_id: str, who: str) -> str | None: ...

    # -- pairing: the note, driving, which pane this view shows ------------------------------
    def set_note(self, text: str) -> str | None: ...
    def hand_over(self, to: int) -> str | None: ...
    def ask_drive(self) -> str | None: ...
    def accept(self, client: int) -> str | None: ...
    def set_view(self, pane: str | None) -> None: ...


def protocol_methods() -> list[str]:
    """The names every implementation must have (the conformance test reads this)."""
    return sorted(name for name in vars(HostControl)
                  if not name.startswith("_") and name not in ("protocol_methods",))


class NoControl:
    """A view that can ask nothing (a replay): every request says why not."""

    def __init__(self, why: str = "a replay: nothing can be asked of the host") -> None:
        self.why = why

    @property
    def client_id(self) -> int | None:
        return None

    @property
    def who(self) -> str | None:
        return None

    def verify(self) -> str | None:
        return self.why

    def pick_units(self, new: str, old: str | None) -> None:
        return None

    def start_bench(self, kind: str, plan: BenchPlan | None = None) -> str | None:
        return self.why

    def stop_bench(self) -> str | None:
        return self.why

    async def swap_preview_async(self, key: str) -> tuple[str | None, Any]:
        return self.why, None

    def swap_confirm(self, preview_id: str, who: str | None = None) -> str | None:
        return self.why

    def swap_override(self, check: str, typed: str, who: str | None = None) -> str | None:
        return self.why

    def swap_approve(self, request_id: str, who: str) -> str | None:
        return self.why

    def swap_withdraw(self, request_id: str, who: str) -> str | None:
        return self.why

    def set_note(self, text: str) -> str | None:
        return self.why

    def hand_over(self, to: int) -> str | None:
        return self.why

    def ask_drive(self) -> str | None:
        return self.why

    def accept(self, client: int) -> str | None:
        return self.why

    def set_view(self, pane: str | None) -> None:
        return None
