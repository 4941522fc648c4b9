"""The log's parser process (`console.host.sources.log.ParserProcess`): a flood's batches come in
on stdin, each a length and the pickled (decoder state, lines joined by newlines); each answer goes
out on stdout the same way: (this process's id, the advanced state, the events as tuples). It ends
when its stdin closes.

It runs at a lower priority than the console (`NICE`, added to the console's own, in the console's
session so that the two are weighed in one scheduling group): on a machine whose cores are all
taken (a flood with another process keeping a core busy), the console's UI thread wins the core
when it wakes for a frame or a key, and the parse waits, not the screen. A batch parsed late costs
nothing: the next one waits for it (backpressure, nothing dropped). Ctrl-C (SIGINT to the
terminal's foreground group) is the console's: ignored here."""

from __future__ import annotations

import os
import signal
import sys

from console.host.sources.log import parse_in_process, recv_frame, send_frame


NICE = 10


def lower_priority() -> None:
    """This process NICE steps below the console (where the system lets it: never an error)."""
    try:
        os.nice(NICE)
    except OSError:
        pass


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    lower_priority()
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            state, blob = recv_frame(inp)  # type: ignore[misc]
        except EOFError:
            return 0
        send_frame(out, parse_in_process(state, blob))


if __name__ == "__main__":
    sys.exit(main())
