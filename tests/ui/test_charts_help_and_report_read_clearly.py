"""Issue 22, the rest of "the operator's eyes" (session 4): charts that name their axes and keep
their labels apart, ticks where their values are, the GPU history filling its width, the log view
without a dead row, the help that says where the main acts are, a notice when a peer asks to
drive, the report's audit table, colours by meaning, the attached plan's first line."""

from __future__ import annotations

import re

import pytest

from console.domain.analysis.bench_view import BenchView


def _swap_view(now: float) -> BenchView:
    view = BenchView()
    for i in range(120):
        view.add_gpu(now - 120 + i, 20.0 + (i % 30))
    view.add_server_points([(now - 120 + i, 400.0 + 10 * (i % 20), None) for i in range(120)])
    view.mark(now - 118, "old server stopped")  # at the left edge: its label must not cover "600"
    view.mark(now - 62, "old server stopped")
    view.mark(now - 58, "new server launching")
    view.mark(now - 2, "new server ready")  # at the right edge: nor the right axis' "100%"
    return view


SIZES = [(46, 5), (46, 6), (46, 7), (60, 8), (76, 10), (110, 14), (116, 17)]  # 80x24 … 200x60 panes


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_the_time_chart_names_each_axis_by_its_series(width: int, height: int) -> None:
    """Item 17: no plotext "L"/"⅃" side glyphs; a legend row says which series reads on which axis."""
    from console.ui.panes.bench import chart

    now = 10_000.0
    text = chart(_swap_view(now), width, height, now).plain
    lines = text.split("\n")
    assert "⅃" not in text and not any(re.match(r"\s*(\d\S*\s+)?L\s", line) for line in lines), text
    assert lines[0].startswith("← ⣿ server gen tok/s") and lines[0].rstrip().endswith("⣿ GPU util % →"), text
    assert len(lines) == height and all(len(line) <= width for line in lines), text


def _axis_labels(lines: list[str]) -> tuple[dict[int, str], dict[int, str]]:
    """Row -> left label, row -> right label, of the plot rows (no legend, no x ticks)."""
    left, right = {}, {}
    for r, line in enumerate(lines):
        m = re.match(r"\s*(\d[\d.]*k?)(?=\s|[\u2800-\u28ff│])", line)
        if m:
            left[r] = m.group(1)
        m = re.search(r"\s(\d+)%\s*$", line)
        if m:
            right[r] = m.group(1)
    return left, right


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_mark_labels_stay_inside_the_plot_and_ticks_sit_where_their_values_are(width: int, height: int) -> None:
    """Item 17: mark labels never overwrite the y-axis labels ("400r stopped", "GPU utilold server
    stopped"), and each tick label is on the row of its value (the 80x24 chart put 100/50/25/0 %
    on evenly spaced rows)."""
    from console.ui.panes.bench import chart

    now = 10_000.0
    view = _swap_view(now)
    marked = chart(view, width, height, now).plain.split("\n")[1:-1]
    view.marks.clear()
    bare = chart(view, width, height, now).plain.split("\n")[1:-1]
    assert _axis_labels(marked) == _axis_labels(bare), "\n".join(marked)  # labels untouched by the marks
    left, right = _axis_labels(bare)
    plot_rows = [r for r, line in enumerate(bare) if line.strip()]
    first, last = min(plot_rows), max(plot_rows)
    assert right and right[first] == "100" and right[last] == "0", "\n".join(bare)
    for r, label in right.items():  # each label where its value is, on a linear 0-100 % axis
        assert abs((100 - int(label)) / 100 * (last - first) + first - r) < 0.01, ("\n".join(bare), r, label)
    values = {r: float(v[:-1]) * 1000 if v.endswith("k") else float(v) for r, v in left.items()}
    top = values[first]
    assert values[last] == 0 and top >= 590, "\n".join(bare)  # the data's peak is under the top tick
    for r, v in values.items():
        assert abs((top - v) / top * (last - first) + first - r) < 0.01, ("\n".join(bare), r, v)
    for words in ("old server", "new server"):  # every label there, whole or cut with "…"
        assert any(words in line for line in marked), "\n".join(marked)


def test_the_sweep_chart_names_its_axes_too() -> None:
    from console.ui.panes.bench import sweep_chart

    view = BenchView()
    for c, tok, p99 in ((1, 100.0, 40.0), (4, 380.0, 55.0), (16, 1200.0, 90.0), (64, 2100.0, 400.0)):
        view.finish({"max_concurrency": c, "output_throughput": tok, "p99_ttft_ms": p99})
    for width, height in ((46, 6), (76, 10)):
        text = sweep_chart(view, width, height).plain
        assert "⅃" not in text and "(left)" not in text, text
        assert text.startswith("← ⣿ output tok/s") and "⣿ p99 TTFT →" in text.split("\n")[0], text


async def test_the_chart_draws_its_first_points_at_once_not_five_seconds_later() -> None:
    """A fresh console at 80x24 said "no throughput yet" beside the log's 232 tok/s: the pane drew
    the empty chart at mount and its 5-s throttle held the first points back."""
    from textual.app import App, ComposeResult
    from textual.widgets import Static

    from console.ui.panes.bench import BenchPane

    view = BenchView()

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield BenchPane(view, id="bench")

    app = One()
    async with app.run_test(size=(80, 12)) as pilot:
        pane = app.query_one(BenchPane)
        chart_widget = pane.query_one("#bench-chart", Static)
        assert "no throughput yet" in str(chart_widget.render())
        now = view.now()
        for i in range(10):
            view.add_gpu(now - 10 + i, 40.0)
        view.add_server_points([(now - 10 + i, 232.0, None) for i in range(10)])
        pane.redraw()  # what the pane's 0.5-s tick does
        await pilot.pause()
        drawn = str(chart_widget.render())
        assert "no throughput yet" not in drawn and "server gen tok/s" in drawn, drawn


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_log_view_has_no_dead_row_under_its_last_line(size: tuple[int, int]) -> None:
    """The virtual log view drew an empty dark row and a scrollbar stub under the last line (its
    horizontal scrollbar, for lines wider than the pane): every row of the view shows a line, and
    a line cut at the edge says so with "…"."""
    from console.core.state import HostInfo, HostState, LogAppended
    from console.host.parsers.sglang_log import parse_line
    from console.ui.app import ConsoleApp
    from console.ui.panes.log import LogPane
    from tests.kit.hosts import wait_for

    state = HostState("gpu-01", label="gpu-01")
    state.apply(HostInfo("gpu-01", "gpu-01", log_label="journal: sglang.service"))
    long = ("[2026-04-08 14:05:{s:02d} TP0] Decode batch, #running-req: 48, #full token: 412000, full token "
            "usage: 0.11, gen throughput (token/s): {n}.00, #queue-req: 3, line {n}")
    app = ConsoleApp(state, None)
    async with app.run_test(size=size) as pilot:
        pane = app.query_one(LogPane)
        view = pane.log_widget
        state.apply(LogAppended(state.host, tuple(parse_line(long.format(s=i % 60, n=i)) for i in range(200))))
        await wait_for(lambda: view.line_count == 200, 10)
        await pilot.pause(0.3)
        assert view.scrollable_content_region.height == view.size.height, "a row taken by a scrollbar"
        visible = [view.render_line(y).text for y in range(view.size.height)]
        assert all(row.strip() for row in visible), visible  # no blank row under the last line
        assert visible[-1].rstrip().endswith("…") and "Decode batch" in visible[-1], visible
        # the "…" in the last column left of the scrollbar, not under it
        assert len(visible[-1]) == view.scrollable_content_region.width, (len(visible[-1]), view.size)


@pytest.mark.parametrize("width", [96, 116, 196])
def test_the_gpu_history_fills_its_width(width: int) -> None:
    """Item 19: the history kept 60 samples and drew 15-20 even at 200 columns, the memory bar
    taking half the row: the tracker keeps 300 (bounded) and the pane draws as many as fit."""
    from dataclasses import replace

    from console.core.state import GpuTracker
    from console.host.parsers.nvidia_smi import parse_gpu_csv
    from console.model import GpuStatus, Reading
    from console.ui.panes.gpu import format_gpu_status

    tracker = GpuTracker()
    base = GpuStatus("nvml", tuple(parse_gpu_csv("\n".join(
        f"{i}, NVIDIA H200, GPU-{i}, 40000, 143771, 50, 40, 300.00, 700.00" for i in range(4))).gpus))
    reading = None
    for t in range(400):
        gpus = tuple(replace(g, utilization_pct=(t * 7 + g.index) % 100) for g in base.gpus)
        reading = tracker.track(Reading("gpu", replace(base, gpus=gpus, sampled_at_s=float(t)), float(t)))
    assert reading is not None and reading.data is not None
    assert len(reading.data.util_history[0]) == 300  # bounded, and more than a wide pane draws
    lines = format_gpu_status(reading, width, 14).plain.splitlines()
    row = lines[1]
    assert len(row) <= width
    sparks = [run for run in re.findall(r"[▁▂▃▄▅▆▇█ ]{8,}", row[3:]) if run.strip()]
    drawn = sum(len(run.strip()) for run in sparks)
    assert drawn >= (width - 40) * 0.7, (drawn, row)  # the row's room goes to the histories


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_help_says_where_the_swap_plan_the_report_and_pairing_are(size: tuple[int, int]) -> None:
    """Item 8: `?` mentions the Swap plan (and its keys), the report and pairing, with the keys
    that open them."""
    from console.core.state import HostState
    from console.ui.app import ConsoleApp
    from console.ui.host_screen import HelpScreen, help_text

    text = " ".join(help_text(shared=True).split())
    for words in ("**The swap plan** (`p`)", "`s` stop the old server", "`a` approves",
                  "**The swap report** (`ctrl+p`, \"Swap report\")", "**Pairing**", "`gpuconsole attach`",
                  "ask to drive", "hand over"):
        assert words in text, words
    app = ConsoleApp(HostState("gpu-01"), None)
    async with app.run_test(size=size) as pilot:
        await pilot.press("question_mark")
        await pilot.pause(0.3)
        assert isinstance(app.screen, HelpScreen)


class _Shared:
    """A control with a participant id (a shared session); asks nothing of a host."""

    client_id = 1
    who = "ana"

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return lambda *a, **k: None


async def test_asks_to_drive_is_a_notice_to_the_driver() -> None:
    """Item 8: a peer asking to drive rings the driver's bell, puts up a toast and a header notice
    (before: only the words "(asks to drive)" in the header's second line); once per request."""
    from console.core.state import Client, HostState, Presence
    from console.ui.app import ConsoleApp
    from console.ui.panes.header import format_presence
    from tests.kit.screens import screen_text

    state = HostState("gpu-01")
    app = ConsoleApp(state, _Shared())  # type: ignore[arg-type]
    bells: list[int] = []
    async with app.run_test(size=(120, 40)) as pilot:
        app.bell = lambda: bells.append(1)  # type: ignore[method-assign]
        state.apply(Presence("gpu-01", (Client(1, "ana", "driver"), Client(2, "ben"))))
        await pilot.pause(0.3)
        assert not bells and not app._notifications
        state.apply(Presence("gpu-01", (Client(1, "ana", "driver"), Client(2, "ben")), asking=(2,)))
        await pilot.pause(0.3)
        assert bells == [1]
        toasts = [n.message for n in app._notifications]
        assert any("ben asks to drive" in m for m in toasts), toasts
        assert "asks to drive: ctrl+p" in screen_text(app)
        state.apply(Presence("gpu-01", (Client(1, "ana", "driver"), Client(2, "ben", view="gpu")), asking=(2,)))
        await pilot.pause(0.3)
        assert bells == [1]  # the same request: said once
    line = format_presence(Presence("h", (Client(1, "ana", "driver"), Client(2, "ben")), asking=(2,)), me=1)
    assert any("on yellow" in str(span.style) for span in line.spans), line.spans  # a notice, not a dim tag
    observer = format_presence(Presence("h", (Client(1, "ana", "driver"), Client(2, "ben")), asking=(2,)), me=2)
    assert "(you, asks to drive)" in observer.plain  # to the others it is a tag


def test_the_fit_views_memory_parts_are_coloured_by_meaning() -> None:
    """Item 16 (the rest): the GDN bar was magenta and the speculative state's yellow; a memory
    part is no error and no warning: red, magenta and yellow stay for verdicts."""
    from console.demo.hostsim.downloader import qwen122b_config
    from console.domain.analysis.fit import FitInputs, plan_fit
    from console.ui.panes.fit import format_fit

    r = plan_fit(FitInputs(qwen122b_config(), 248_837_128_000, 8, 139.8, tp=4, speculative_algorithm="NEXTN"))
    assert r.fits and r.mamba_state_gib > 0 and r.spec_state_gib > 0
    text = format_fit(r)
    lines = text.plain.split("\n")
    starts = [sum(len(line) + 1 for line in lines[:i]) for i in range(len(lines))]
    for label in ("GDN state (mamba pool)", "speculative verification state", "weights", "KV cache"):
        i = next(i for i, line in enumerate(lines) if line.strip().startswith(label))
        lo, hi = starts[i], starts[i] + len(lines[i])
        styles = [str(s.style) for s in text.spans if s.start < hi and s.end > lo]
        assert styles and not any(c in st for st in styles for c in ("red", "magenta", "yellow")), (label, styles)


def test_the_reports_audit_table_has_one_line_per_action_a_final_status_and_scripts_in_an_appendix(
        tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Item 11: the report put whole 20-line scripts in one cell and left the benchmark's row
    "started": one line per action with a final status; every script whole, in an appendix."""
    from console.core.derive.swap_view import AuditAppended, AuditEntry
    from console.core.recording import Recorder
    from console.core.state import HostState
    from console.domain.swap.report import render, report_from_recording
    from tests.kit.swap import EVENTS

    script = "\n".join(f"echo step {i} of the install && true  # line {i}" for i in range(1, 21))
    extra = [AuditAppended("gpu-01", AuditEntry("ana", 5.0, "install", script, 0, "installed", 1.0)),
             AuditAppended("gpu-01", AuditEntry("ana", 6.0, "benchmark", "bench quick c=4 16 prompts", None, "",
                                                note="started"))]
    state = HostState("gpu-01", label="gpu-01")
    rec = Recorder(state, tmp_path).start()
    for e in [EVENTS[-1], EVENTS[0], EVENTS[2], EVENTS[4], EVENTS[1], *extra]:
        state.apply(e)
    rec.close()
    report = report_from_recording(rec.path)
    md = render(report, "md")
    table = md.split("## Audit log", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows and "status" in table.splitlines()[2]
    assert all("line 20" not in row for row in rows), table  # one line per action in the table
    install = next(row for row in rows if "install" in row)
    assert "echo step 1 of the install" in install and "+19 lines" in install and "A" in install.split("|")[-2]
    bench = next(row for row in rows if "benchmark" in row)
    cells = [c.strip() for c in bench.strip("|").split("|")]
    assert cells[4] not in ("", "–", "started"), cells  # a final status for every row
    appendix = md.split("## Appendix: audited scripts", 1)[1]
    assert script in appendix  # the whole script, once, in the appendix
    html = render(report, "html")
    assert "Appendix: audited scripts" in html and "# line 20</pre>" in html


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
async def test_the_plans_first_line_shows_under_the_two_line_header(size: tuple[int, int]) -> None:
    """Item 15 (a guard: not reproduced): a console in a shared session has a two-line header; the
    swap plan opened there still shows its first line, old → new, and the header's both lines."""
    from console.core.state import Client, HostState, Presence
    from console.ui.app import ConsoleApp
    from console.ui.panes.swap import SwapScreen
    from tests.kit.screens import screen_text
    from tests.kit.swap import EVENTS

    state = HostState("gpu-01")
    for event in EVENTS:
        state.apply(event)
    app = ConsoleApp(state, _Shared())  # type: ignore[arg-type]
    async with app.run_test(size=size) as pilot:
        state.apply(Presence("gpu-01", (Client(1, "ana", "driver"), Client(2, "ben"))))
        await pilot.pause(0.3)
        await pilot.press("p")
        await pilot.pause(0.5)
        assert isinstance(app.screen, SwapScreen)
        text = screen_text(app)
        rows = text.splitlines()
        if size[1] >= 40:  # at 80x24 the plan (90 % high) covers the header's second line: a modal
            assert "2 attached: ana (driver, you), ben" in rows[1], rows[:3]
        first = next(i for i, row in enumerate(rows) if "old.service → new.service" in row)
        assert first >= 1 and "╭" in rows[first - 1], rows[: first + 1]  # right under the plan's top border


def test_mode_badges_and_series_blues_are_not_the_themes_violet_ansi_blue() -> None:
    """Seen in the walk's PNGs: the ATTACH badge, the GPU utilization series and the fit view's GDN
    bar in ANSI "blue", which the theme draws violet, next to magenta (the error colour)."""
    from console.ui.panes.header import format_header

    for mode in ("attach", "replay"):
        styles = [str(s.style) for s in format_header("gpu-01", False, None, None, mode=mode).spans]
        assert styles and not any(st.split()[-1] in ("blue", "magenta") for st in styles), styles


def test_a_short_gpu_history_ends_at_now_on_the_right() -> None:
    """Seen at 200x60 maximized: a history still filling up hung at the left of its column with the
    newest sample mid-row and blanks before the utilization figure; it ends at the right, at now."""
    from console.host.parsers.nvidia_smi import parse_gpu_csv
    from console.model import GpuStatus, Reading
    from console.ui.panes.gpu import format_gpu_status

    gpus = tuple(parse_gpu_csv("0, NVIDIA H200, GPU-0, 40000, 143771, 50, 40, 300.00, 700.00").gpus)
    reading = Reading("gpu", GpuStatus("nvml", gpus, memory_history=((0.3,) * 10,),
                                       util_history=((50.0,) * 10,)), 1.0)
    row = format_gpu_status(reading, 196, 10).plain.splitlines()[1]
    assert re.search(r"[▁▂▃▄▅▆▇█] {0,4}\d+%", row), row  # the memory history right before the util figure
    assert re.search(r"[▁▂▃▄▅▆▇█] {0,4}\d+°", row), row  # the util history right before the temperature


@pytest.mark.parametrize("width", [34, 36, 38, 56])
def test_the_download_panes_counts_stay_on_one_row(width: int) -> None:
    """Seen at 80x24: "shards 12/39  files 17/45  in flight" and its "3" wrapped onto a row of its
    own; the row narrows its gaps, then drops the files count, and never runs past the pane."""
    from console.domain.analysis.download import DownloadProgress
    from console.model import Reading
    from console.ui.panes.download import format_download

    p = DownloadProgress("/m", "Qwen/Qwen3.5-122B-A10B", "hub", 95_600_000_000, 248_900_000_000, 12, 39, 17, 45,
                         (), None, None, None, 801_600_000_000, True, False, (), 0.0)
    lines = format_download(Reading("download", p, 0.0), width, 12, now_s=1.0).plain.splitlines()
    row = next(line for line in lines if line.startswith("shards"))
    assert len(row) <= width and row.endswith("in flight 0"), (row, width)
    assert ("files 17/45" in row) == (width >= 36), row  # 38 with two-space gaps, 36 with one


@pytest.mark.parametrize("width", [30, 40, 56])
def test_a_gpu_process_in_a_container_keeps_the_containers_name_whole_where_it_fits(width: int) -> None:
    """Seen in the Docker demo at 120 columns: one ellipsis across `container: name` cut both
    ("sglang-qwen…duler_TP0"). The container stays whole and the process name is shortened."""
    from console.ui.panes.gpu import process_label

    label = process_label("sglang-qwen397b", "sglang::scheduler_TP0", width)
    assert len(label) <= width, label
    if width >= len("sglang-qwen397b: ") + 12:
        assert label.startswith("sglang-qwen397b: sglang") and label.endswith("TP0"), label
    else:
        assert label.count("…") <= 2 and ": " in label, label
    assert process_label(None, "python3", width) == "python3"
