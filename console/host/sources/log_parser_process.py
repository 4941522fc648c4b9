"""The log's parser process (`console.host.sources.log.ParserProcess`): a flood's batches come in
on stdin, each a length and the pickled (decoder state, lines joined by newlines); each answer goes
out on stdout the same way: (this process's id, the advanced state, the events as tuples). It ends
when its stdin closes."""

from __future__ import annotations

import sys

from console.host.sources.log import parse_in_process, recv_frame, send_frame


def main() -> int:
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            state, blob = recv_frame(inp)  # type: ignore[misc]
        except EOFError:
            return 0
        send_frame(out, parse_in_process(state, blob))


if __name__ == "__main__":
    sys.exit(main())
