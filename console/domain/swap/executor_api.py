"""What a swap step needs from the executor that runs it: the host's session and state, the
profile, the audited command runner, the step's own line in the plan, the approval and the gate.

The steps (console/domain/swap/steps.py and the modules of their bodies: shared_steps, unit_steps,
fastpath, container_plan, container_fastpath, ready_wait) are typed against this Protocol, never against the executor's
class (console/domain/swap/controller.py): the executor imports the steps, the steps import only
this module below them, so the swap engine has no import circle, type-only imports included
(tests/core/test_architecture.py). Pure typing: nothing here runs.
"""

from __future__ import annotations

from typing import Any, Protocol

from console.domain.swap import actions as act


class Executor(Protocol):
    """The executor as a step sees it. Its rules (read-only, one action at a time, confirmation,
    audit, a failed step stops the plan) are the executor's; a step runs commands through `_run`
    (audited), writes its progress through `_set` (intent and words only: the step's times are the
    observer's), and waits for another person through `_approval`. Two waits every runtime's steps
    share are the executor's public seam, so a stand-in executor (the real-daemon tests' on a machine
    without GPUs) answers them its own way: `drain` (the GPUs released after a stop) and `death_cause`
    (why a dead server died, from its log); the controller's are console/domain/swap/shared_steps.py's."""

    runner: Any  # the host's runner: repoll, notice, start_bench, verify, _spawn
    state: Any  # the HostState the runner writes
    host: str
    session: Any  # the host session: its transport, service watcher, profile
    profile: Any
    poll_s: float
    busy: str | None
    fast: Any  # console.domain.swap.fastpath.FastPaths: the path plan (issue 24)
    containers: Any  # console.domain.swap.container_plan.ContainerPlan (issue 26)
    bench_plan: list[tuple[int, int, int, int]] | None  # the benchmark step's sweep (None: the story's)

    @property
    def old_unit(self) -> str | None: ...

    @property
    def new_unit(self) -> str | None: ...

    def _clock(self) -> float: ...

    def build(self, key: str) -> list[act.Action]: ...

    def evaluate_gate(self) -> tuple[Any, ...]: ...

    def _set(self, key: str, **changes: Any) -> Any: ...

    async def _run(self, who: str, action: str, cmd: act.RemoteCommand) -> Any: ...

    def _audit(self, who: str, action: str, command: str, status: int | None, output: str,
               duration_s: float | None = None, note: str = "") -> None: ...

    async def _approval(self, key: str, who: str) -> None: ...

    async def gate_then_approval(self, who: str, serving: str | None) -> None: ...

    async def _reconnected(self, key: str, why: str, timeout_s: float = 600) -> None: ...

    async def drain(self, key: str, since: float) -> str:
        """Wait until the GPUs are released after a stop issued at `since`; the step's words."""
        ...

    async def death_cause(self, reason: str, wait_s: float = 15.0) -> str:
        """`reason` with the cause the server's log gives (an OOM in a traceback), waited for a while."""
        ...

    async def _unit_state(self, unit: str) -> dict[str, str]: ...

    def _draft_text_raw(self) -> str: ...


__all__ = ["Executor"]
