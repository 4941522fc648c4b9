"""The host summary source (hostname, uptime, load, free disk of the watched paths)."""

from __future__ import annotations

from collections.abc import Sequence

from console.model import HostSummary
from console.host.parsers.host import host_summary_script, parse_host_summary
from console.host.sources.base import PolledSource
from console.host.transport.base import Transport


def host_summary_source(transport: Transport, paths: Sequence[str], interval_s: float = 5.0
                        ) -> PolledSource[HostSummary]:
    paths = tuple(paths)
    script = host_summary_script(paths)

    async def poll() -> HostSummary:
        result = await transport.run(script, timeout=10)
        return parse_host_summary(result.text, paths)

    return PolledSource("host", poll, interval_s)
