"""A simulated GPU host: a real SSH server (asyncssh, in-process, 127.0.0.1) in front of a sandbox.

Commands run with the real `/bin/sh`; only what this machine lacks is simulated, by executables
on the sandbox PATH (`nvidia-smi`, `systemctl`, `journalctl`, ...), driven by a scenario clock.
`gpuconsole --demo` and the tests connect to it through the normal SSH transport.
"""

from console.hostsim.server import HostSimulator

__all__ = ["HostSimulator"]
