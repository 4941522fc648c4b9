"""One freshness rule per source, shared by the panes, the header and the fleet rows (issue 20):
a reading is stale when its last good data is older than its source's limit, or when its last
poll failed. No Textual; every caller passes the state's `now()` (a replay's clock in a replay).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Seconds after which a source's last good reading is stale, from how often it is read: the GPUs
# every second (a stream), the host summary and the server every 5 s (with a backoff to 15 s), the
# download every 2 s and every 10 s once complete (so 25 s: a limit equal to the poll's interval
# flagged every on-time poll stale for a moment), the unit files once a minute. The log has none:
# a quiet log is not a stale one (its stream's own errors say when it broke).
STALE_AFTER_S: dict[str, float] = {"gpu": 5.0, "host": 15.0, "download": 25.0, "server": 30.0, "service": 60.0,
                                   "router": 30.0}


def stale_after_s(source: str) -> float | None:
    return STALE_AFTER_S.get(source)


def failing(reading: Any) -> bool:
    """The last poll failed (after, or without, a good one)."""
    return reading.error is not None and (reading.ok_at_s is None or (reading.error_at_s or 0) >= reading.ok_at_s)


@dataclass(frozen=True, slots=True)
class Freshness:
    state: str  # "live", "stale", "error" (the last poll failed) or "waiting" (nothing read yet)
    age_s: float | None  # since the last good data

    @property
    def stale(self) -> bool:
        return self.state in ("stale", "error")


def freshness(source: str, reading: Any, now_s: float) -> Freshness:
    if reading is None:
        return Freshness("waiting", None)
    age = None if reading.ok_at_s is None else max(0.0, now_s - reading.ok_at_s)
    if failing(reading):
        return Freshness("error", age)
    limit = stale_after_s(source)
    if reading.data is None:
        return Freshness("waiting", age)
    if limit is not None and (age is None or age > limit):
        return Freshness("stale", age)
    return Freshness("live", age)


def is_stale(source: str, reading: Any, now_s: float) -> bool:
    return freshness(source, reading, now_s).stale
