"""How bytes reach a host: `SshTransport` (asyncssh) and `LocalTransport` (this machine).

Import `SshTransport` from `console.transport.ssh`: importing this package does not load asyncssh.
"""

from console.transport.base import (
    CommandResult,
    ConnectionState,
    FileStat,
    LineStream,
    Transport,
    join,
    quote,
)
from console.transport.errors import (
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
from console.transport.local import LocalTransport

__all__ = [
    "AuthError", "CommandError", "CommandResult", "CommandTimeout", "ConnectError", "ConnectionState",
    "FileStat", "HostKeyChanged", "HostKeyError", "HostKeyRevoked", "HostKeyUnknown", "LineStream", "LocalTransport",
    "Transport", "TransportError", "join", "quote",
]
