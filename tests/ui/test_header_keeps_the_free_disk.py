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
