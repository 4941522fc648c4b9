"""The transport's exceptions, one small tree (as httpx does it).

    TransportError
    ├── ConnectError        host unreachable, port closed, connection lost, DNS failure
    │   ├── AuthError       the server refused every key / password we offered
    │   └── HostKeyError    the host key is not the one we trust
    │       ├── HostKeyUnknown   no known_hosts entry: refuse, show the fingerprint
    │       ├── HostKeyChanged   a known_hosts entry with another key: always refuse
    │       └── HostKeyRevoked   the key is marked @revoked in known_hosts: always refuse
    ├── CommandTimeout      a command or file operation ran past its timeout
    └── CommandError        the command could not run (channel closed, shell died, SFTP failure)

Every message is one line written for the operator; none carries a traceback.
"""

from __future__ import annotations


class TransportError(Exception):
    """Base of every error the transport raises."""


class ConnectError(TransportError):
    """The host could not be reached or the connection was lost."""


class AuthError(ConnectError):
    """The server rejected our credentials."""


class HostKeyError(ConnectError):
    """The host key could not be verified."""

    def __init__(self, message: str, *, fingerprint: str | None = None) -> None:
        super().__init__(message)
        self.fingerprint = fingerprint


class HostKeyUnknown(HostKeyError):
    """No known_hosts entry for this host: refused until the operator accepts the key."""


class HostKeyChanged(HostKeyError):
    """known_hosts has another key for this host: always refused."""


class HostKeyRevoked(HostKeyError):
    """known_hosts marks the presented key @revoked: always refused, nothing written."""


class CommandTimeout(TransportError):
    """A command or file operation ran past its timeout."""


class CommandError(TransportError):
    """A command could not be run to completion (not a non-zero exit: that is a CommandResult)."""
