"""How bytes reach a host: `SshTransport` (asyncssh) and `LocalTransport` (this machine).

Import `SshTransport` from `console.host.transport.ssh`: importing this package does not load asyncssh.
"""

from console.host.transport.base import (
    CommandResult,
    ConnectionState,
    FileStat,
    LineStream,
    Transport,
    join,
    quote,
)
from console.host.transport.errors import (
    AuthError,
    CommandError,
    CommandTimeout,
    ConnectError,
    HostKeyChanged,
    HostKeyError,
    HostKeyRevoked,
    HostKeyUnknown,
    TransportError,
)
from console.host.transport.local import LocalTransport

__all__ = [
    "AuthError", "CommandError", "CommandResult", "CommandTimeout", "ConnectError", "ConnectionState",
    "FileStat", "HostKeyChanged", "HostKeyError", "HostKeyRevoked", "HostKeyUnknown", "LineStream", "LocalTransport",
    "Transport", "TransportError", "join", "quote",
]
