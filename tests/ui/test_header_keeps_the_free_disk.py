"""The header keeps the free disk on screen (issue 35 item 9: at 80 columns it was cut off): a line
too long drops the uptime and the 5- and 15-minute loads first, then names the host by its own name
alone (not the address it was reached by). At 80x24, 120x40 and 200x60, against the simulated host
over SSH."""

from __future__ import annotations

import pytest

from console.ui.app import ConsoleApp
from tests.kit.hosts import wait_for
from tests.kit.screens import app, header_text  # noqa: F401 - the fixture

SIZES = [(80, 24), (120, 40), (200, 60)]


@pytest.mark.parametrize("size", SIZES)
async def test_the_free_disk_stays_in_the_header(app: ConsoleApp, size: tuple[int, int]) -> None:  # noqa: F811
    async with app.run_test(size=size):
        await wait_for(lambda: "GB free" in header_text(app) and "load" in header_text(app), 20, 0.1)
        line = header_text(app)
        assert "…/shared: 895 GB free" in line or "…/shared: 896 GB free" in line, line
        assert len(line.rstrip()) <= size[0], line
        assert "gpu-sim-01" in line, line  # which host this is: never the first thing dropped
        if size[0] >= 120:  # room for everything
            assert "up " in line, line


def test_at_80_columns_every_disk_keeps_its_whole_free_figure() -> None:
    """The demo's header at 80 columns ended '/shared: 841 GB free  /: 740': the last disk cut mid-field.
    Short of room the line drops the CPU count and says 'free' once: each disk is still whole."""
    from console.host.transport.base import ConnectionState
    from console.model import DiskUsage, HostSummary, Reading
    from console.ui.panes.header import format_header

    gb = 1_000_000_000
    disks = (DiskUsage("/shared", "/shared", 1000 * gb, 159 * gb, 841 * gb), DiskUsage("/", "/", 900 * gb, 160 * gb, 740 * gb))
    summary = Reading("host", HostSummary("gpu-sim-01", None, 9000.0, 2.86, 2.1, 1.9, 2, disks), ok_at_s=100.0)
    state = ConnectionState("127.0.0.1", "connected", 90.0)
    line = format_header("127.0.0.1:46219", True, state, summary, 100.0, width=80).plain
    assert len(line) <= 80, line
    assert "/shared 841 GB" in line and "/ 740 GB" in line, line
    assert "gpu-sim-01" in line and "load 2.86" in line, line
    wide = format_header("127.0.0.1:46219", True, state, summary, 100.0, width=200).plain
    assert "/shared: 841 GB free  /: 740 GB free" in wide and "/2 cpu" in wide, wide
