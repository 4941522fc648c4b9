"""The wait for a new server started beside the old one (a unit or a container): its /health on its
own port until 200, while the old server keeps serving. One loop for both kinds of service; what
tells that the new one died is each kind's own (`died`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from console.domain.swap import actions as act
from console.domain.swap.errors import StepFailed
from console.domain.swap.executor_api import Executor
from console.host.transport.errors import TransportError


def health_command(port: int) -> str:
    return act.bounded(["curl", "-s", "-o", "/dev/null", "--max-time", "3", "-w", "%{http_code}", "--",
                        f"http://127.0.0.1:{int(port)}/health"], 8)


async def wait_beside_ready(ctl: Executor, port: int, *, stops: str,
                            died: Callable[[], Awaitable[str | None]],
                            on_tick: Callable[[], None] | None = None) -> None:
    """Return once the new server answers /health with 200. `died()`: why the new server is gone
    (its unit failed, its container exited or restarted), or None; `stops`: what the offered
    rollback stops ("the new unit"); `on_tick`: after each unanswered probe (a progress detail).
    Raises the controller's StepFailed when it died or the profile's ready timeout passed."""
    health = health_command(port)
    deadline = time.monotonic() + float(getattr(ctl.profile, "ready_timeout_s", 600.0))
    while True:
        await asyncio.sleep(ctl.poll_s)
        why = await died()
        if why is not None:
            cause = await ctl.death_cause(why)
            raise StepFailed(f"{cause} — the old server keeps serving (downtime 0); nothing after this step runs; "
                             f"rollback (stop {stops}) is offered")
        try:
            r = await ctl.session.transport.run(health, timeout=15)
            if r.text.strip() == "200":
                return
        except TransportError:
            pass
        if on_tick is not None:
            on_tick()
        if time.monotonic() > deadline:
            raise StepFailed(f"not ready within the ready timeout on port {port}")
