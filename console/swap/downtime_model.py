"""The faster paths' data in the state (issue 24): one event, its kinds, and the steps' titles.
No I/O, no Textual. `PathEvent.data_json` is JSON text so the codec moves it as a plain string."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

PATH_EVENT_KINDS = ("plan", "prewarm", "outcome")
FAST_STEPS: tuple[tuple[str, str], ...] = (
    ("paths", "Choose the path with the least downtime"),
    ("prewarm", "Pre-warm the new shards into the page cache"),
    ("in_place", "Update the weights in place (POST /update_weights_from_disk)"),
    ("beside", "Start the new server beside the old one, wait for ready"),
    ("switch_traffic", "Move traffic to the new server, then stop the old one"),
)


@dataclass(frozen=True, slots=True)
class PathEvent:
    """kind "plan": the PathPlan and the restart prediction; "prewarm": its progress; "outcome":
    what the chosen path measured (downtime per phase, paused requests)."""

    host: str
    kind: str
    data_json: str
    at_s: float = 0.0

    def data(self) -> dict[str, Any]:
        try:
            value = json.loads(self.data_json)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}
