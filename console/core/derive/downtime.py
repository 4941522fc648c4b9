"""The faster paths' data in the state (issue 24): its event's kinds and the steps' titles (the
event, PathEvent, is declared with every event in console/core/events.py). No I/O, no Textual."""

from __future__ import annotations

from console.core.events import PathEvent  # declared once, with every event

PATH_EVENT_KINDS = ("plan", "prewarm", "outcome")
FAST_STEPS: tuple[tuple[str, str], ...] = (
    ("paths", "Choose the path with the least downtime"),
    ("prewarm", "Pre-warm the new shards into the page cache"),
    ("in_place", "Update the weights in place (POST /update_weights_from_disk)"),
    ("beside", "Start the new server beside the old one, wait for ready"),
    ("switch_traffic", "Move traffic to the new server, then stop the old one"),
)

__all__ = ["PATH_EVENT_KINDS", "FAST_STEPS", "PathEvent"]
