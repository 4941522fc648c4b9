"""Layout and header: what the operator sees stays readable at every size (issue 17)."""

from __future__ import annotations

import time

from textual.widgets import HelpPanel, OptionList

from console.domain.analysis.download import DownloadProgress
from console.ui.app import ConsoleApp, HelpScreen, help_text
from console.model import DiskUsage, GpuDevice, GpuProcess, GpuStatus, HostSummary, Reading
from console.ui.panes.download import format_download
from console.ui.panes.gpu import format_gpu_status
from console.ui.panes.header import HostHeader, format_header
from console.ui.panes.unit_picker import UnitPicker
from console.units import fit_name
from tests.kit.hosts import wait_for
from tests.kit.screens import (
    header_text,  # noqa: F401 - the fixture
)


def test_the_root_disk_reads_as_a_mount_not_a_fraction() -> None:
    summary = Reading("host", HostSummary("h", "6.1", 10.0, 0.1, 0.1, 0.1, 8,
                                          (DiskUsage("/", "/", 100 * 10**9, 31 * 10**9, 69 * 10**9),)), time.time())
    text = format_header("h", False, None, summary).plain
    assert "/: 69 GB free" in text and " /69 GB" not in text


def test_names_are_whole_where_there_is_room_and_marked_where_cut() -> None:
    assert fit_name("Qwen/Qwen3.5-122B-A10B", 40) == "Qwen/Qwen3.5-122B-A10B"
    cut = fit_name("Qwen/Qwen3.5-122B-A10B-Instruct-FP8-Dynamic", 20)
    assert len(cut) == 20 and cut.startswith("Qwen/") and cut.endswith("Dynamic") and "…" in cut
    name = "sglang::scheduler_DP0_TP0_EP0_PP0_xx"  # 36 characters: room enough in a 56-column pane
    assert len(name) == 36
    gpu = GpuDevice(0, "NVIDIA H200", "GPU-1", 1000, 143771, 5, 30, 100.0, 700.0,
                    processes=(GpuProcess(4242, name, 900),))
    shown = format_gpu_status(Reading("gpu", GpuStatus("nvml", (gpu,)), time.time()), 56, 20).plain
    assert name in shown


def test_the_download_pane_shows_the_whole_repo_id() -> None:
    from console.domain.analysis.download import DownloadProgress
    from console.ui.panes.download import format_download

    repo = "Qwen/Qwen3.5-122B-A10B-Instruct"
    p = DownloadProgress("/m", repo, "listing", 100, 100, 39, 39, 50, 50, (), None, None, None, None, None, True, (), 0)
    text = format_download(Reading("download", p, time.time()), 56, 12).plain
    assert repo in text


async def test_maximize_keeps_the_header_visible(app: ConsoleApp) -> None:  # noqa: F811
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(lambda: "gpu-sim-01" in header_text(app), 10)
        await pilot.press("4")
        await pilot.pause(0.1)
        header = app.query_one(HostHeader)
        pane = app.pane("log")
        assert app.screen.maximized is pane
        assert header.region.height == 1 and header.region.y == 0 and pane.region.y >= 1
        assert "connected" in app.export_screenshot()


async def test_help_and_keys_panels_say_how_to_close_and_escape_closes_both(app: ConsoleApp) -> None:  # noqa: F811
    assert "closes this help" in help_text()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        app.action_show_help_panel()
        await pilot.pause(0.2)
        panel = app.screen.query_one(HelpPanel)
        assert "escape" in str(panel.query_one(".close-hint").render())
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert not app.screen.query(HelpPanel)


async def test_the_unit_picker_highlights_its_first_entry(app: ConsoleApp) -> None:  # noqa: F811
    async with app.run_test(size=(120, 40)) as pilot:
        picked: list[object] = []
        app.push_screen(UnitPicker(("sglang-a.service", "sglang-b.service")), picked.append)
        await pilot.pause(0.1)
        assert app.screen.query_one(OptionList).highlighted == 0
        await pilot.press("enter")  # the highlighted one: the first
        await pilot.pause(0.1)
        assert app.screen.query_one(OptionList).highlighted == 0
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert picked == [("sglang-a.service", "sglang-b.service")]


async def test_the_palette_has_one_screenshot_command(app: ConsoleApp) -> None:  # noqa: F811
    async with app.run_test(size=(120, 40)):
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert [t for t in titles if "creenshot" in t] == ["Screenshot"]


def test_the_readme_links_only_to_files_in_the_repository_and_its_pngs_are_faithful() -> None:
    """Links resolve inside the repo; every embedded PNG was drawn by headless Chromium from the SVG
    beside it as it is now (rsvg-convert dropped the spaces between styled spans)."""
    import hashlib
    import re
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent.parent
    sys.path.insert(0, str(root / "scripts"))
    from screenshots import png_text  # type: ignore[import-not-found]

    readme = (root / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)", readme) + re.findall(r"`(\.\./[^`]+)`", readme)
    for target in targets:
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path = (root / target).resolve()
        assert path.is_relative_to(root) and path.exists(), target
    pngs = [t for t in targets if t.endswith(".png")]
    assert pngs
    for target in pngs:
        png = (root / target).read_bytes()
        meta = png_text(png)
        assert "Chromium" in meta.get("Software", ""), target
        # Drawn from the SVG (a terminal screenshot) or the HTML (a report) beside it, as it is now;
        # a PNG with neither beside it is a picture of a live page (the web view) taken by Chromium.
        source = next((p for p in ((root / target).with_suffix(".svg"), (root / target).with_suffix(".html"))
                       if p.exists()), None)
        if source is not None:
            assert meta.get("Source-SHA256") == hashlib.sha256(source.read_bytes()).hexdigest(), f"{target} is stale"


def test_the_demos_disks_and_model_directory_are_named_as_the_simulated_host_names_them() -> None:
    """The demo's simulated host keeps its files under a sandbox directory of this machine
    (HostInfo.host_root): the header named its disks "…/shared" and "…/gpusim-oyy71is8" (the
    sandbox itself for the host's /), the Download pane the sandbox's model directory."""
    root = "/tmp/gpusim-oyy71is8"
    disks = (DiskUsage(f"{root}/shared", f"{root}/shared", 10**12, 10**11, 646 * 10**9),
             DiskUsage(root, root, 10**12, 10**11, 740 * 10**9))
    summary = Reading("host", HostSummary("h", "6.1", 10.0, 0.1, 0.1, 0.1, 8, disks), time.time())
    text = format_header("h", True, None, summary, host_root=root).plain
    assert "/shared: 646 GB free" in text and "  /: 740 GB free" in text and "gpusim" not in text, text
    assert "…/gpusim-oyy71is8: 740 GB free" in format_header("h", True, None, summary).plain  # no root: as it is
    p = DownloadProgress(f"{root}/shared/models/Qwen3.5-122B-A10B", "Qwen/Qwen3.5-122B-A10B", "listing", 10, 10, 1, 1,
                         1, 1, (), None, None, None, 10**12, True, True, (), 0.0,
                         expected_note="the commit's file listing kept by hf download")
    shown = format_download(Reading("download", p, 0.0), 120, 12, 0, host_root=root).plain
    assert "hf download · /shared/models/Qwen3.5-122B-A10B" in shown and root not in shown, shown
