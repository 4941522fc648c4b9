"""A simulated GPU host: a real SSH server (asyncssh, in-process, 127.0.0.1) in front of a sandbox.

Commands run with the real `/bin/sh`; only what this machine lacks is simulated, by executables
on the sandbox PATH (`nvidia-smi`, `systemctl`, `journalctl`, ...), driven by a scenario clock.
`gpuconsole --demo` and the tests connect to it through the normal SSH transport.

The simulated tools import `console.demo.hostsim.story` with the host's own python3, which may lack
asyncssh: so the server is imported lazily.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "HostSimulator":
        from console.demo.hostsim.server import HostSimulator

        return HostSimulator
    raise AttributeError(name)


__all__ = ["HostSimulator"]
