"""The simulated SGLang's and routers' HTTP server: one class for the three of them."""

from __future__ import annotations

import socket
from http.server import ThreadingHTTPServer


class SimHttpd(ThreadingHTTPServer):
    # uvicorn's backlog is 2048; Python's default of 5 drops SYNs under a burst, and the client's SYN
    # retries (1, 3, 7, 15 s) look like a stalled server.
    request_queue_size = 2048
    daemon_threads = True

    def server_bind(self) -> None:
        # The simulator holds its hosts' server ports with SO_REUSEPORT until a server binds them
        # (console/demo/hostsim/ports.py); a real SGLang or router binds a port nothing holds.
        if hasattr(socket, "SO_REUSEPORT"):
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        super().server_bind()


__all__ = ["SimHttpd"]
