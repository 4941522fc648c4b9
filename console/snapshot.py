"""`gpuconsole snapshot --json`: one poll of every source that exists, as JSON."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from console.session import HostSession


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


async def take_snapshot(session: HostSession) -> dict[str, Any]:
    out: dict[str, Any] = {
        "host": session.transport.label,
        "taken_at": time.time(),
        "connection": to_jsonable(session.transport.state),
        "errors": {},
    }
    for source in session.polled_sources(one_shot=True):
        reading = await source.poll_once()
        if reading.error:
            out["errors"][source.name] = reading.error
        out.update(session.snapshot_fields(source.name, reading))
    out.update(await session.stream_snapshot_fields())
    return out
