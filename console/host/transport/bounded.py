"""The one builder of a remote command's bound on the host: `timeout -k GRACE N argv…`.

coreutils' `timeout` sends TERM after N s and KILL GRACE s later, and (run from a script) puts the
command in its own process group, so a hung `systemctl`, `curl` or `docker` never outlives the bound
on the host, even when the console that asked is gone. Every module that wraps a remote command
builds the wrapper here (tests/core/test_a_remote_commands_timeout_has_one_builder.py scans for
another): each word is `shlex.quote`d, the bound is a whole positive number of seconds (rounded up:
never shorter than asked), and a first word `timeout` would read as its own option is refused.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence

KILL_AFTER_S = 5  # the grace between TERM and KILL of a swap's or a source's command


class BoundError(ValueError):
    """A command or a bound that `timeout` would not run as written (one line, for the operator)."""


def _whole_seconds(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise BoundError(f"{what} must be a positive number of seconds: {value!r}")
    return math.ceil(value)


def bounded(argv: Sequence[str], seconds: float, *, kill_after_s: float = KILL_AFTER_S) -> str:
    """`timeout -k KILL_AFTER_S SECONDS argv…`, every word quoted for the host's shell."""
    words = list(argv)
    if not words or not all(isinstance(w, str) for w in words):
        raise BoundError(f"no command to bound: {argv!r}")
    if not words[0] or words[0].startswith("-"):
        raise BoundError(f"a command cannot begin with {words[0]!r}: timeout would read it as its own option")
    limit = _whole_seconds(seconds, "a command's bound")
    grace = _whole_seconds(kill_after_s, "the grace before KILL")
    return shlex.join(["timeout", "-k", str(grace), str(limit), *words])
