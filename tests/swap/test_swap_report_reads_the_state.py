"""The swap report says what the host did, from the one swap state: a stopped sweep is never a
result, a recording still being written is "in progress" (not "damaged"), the Markdown reads as
text (no `&gt;`), the HTML's short columns never break inside a word, "freed" is before minus
after, and the restart's page-cache rate is never below the disk's (issue 33)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from console.core.derive import swap_plan as swap_plan
from console.core.derive.swap_view import DowntimeChanged, SwapSetup, SwapStep, SwapStepChanged, SwapView
from console.core.recording import Recorder
from console.core.state import BenchChanged, HostState
from console.domain.swap import prediction as pred
from console.domain.swap.report import render, report_from_recording
from console.model import GpuDevice, GpuStatus

HOST = "gpu-01"


def _run(t: float, model: str, tput: float, *, c: int = 4, stopped: bool = False, completed: int = 8) -> dict:
    return {"timestamp": t, "model": model, "max_concurrency": c, "random_input_len": 256, "random_output_len": 128,
            "dataset_name": "random", "num_prompts": 8, "completed": completed, "output_throughput": tput,
            "stopped": stopped}


def _restart_swap(state: HostState, t0: float) -> None:
    state.apply(SwapSetup(HOST, "old.service", "new.service", "Qwen/X", "/shared/m", False, False, False, None))
    state.apply(SwapStepChanged(HOST, SwapStep("stop_old", "Stop", "done", t0, t0 + 5, "stopped", who="ana")))
    state.apply(DowntimeChanged(HOST, t0, "the stop command", t0 + 40, "new.service ready"))
    state.apply(SwapStepChanged(HOST, SwapStep("start_new", "Start", "done", t0 + 6, t0 + 40, "ready", who="ana")))


def _recorded(tmp_path: Path, fill) -> Path:  # noqa: ANN001 - a callable that writes events into the state
    state = HostState(HOST, label=HOST)
    rec = Recorder(state, tmp_path).start()
    fill(state)
    rec.close()
    assert rec.path is not None
    return rec.path


def test_a_stopped_partial_sweep_is_never_headlined_over_the_comparable_run(tmp_path: Path) -> None:
    t0 = time.time()

    def fill(state: HostState) -> None:
        state.apply(BenchChanged(HOST, "result", record=_run(t0 - 100, "old-model", 300.0)))
        _restart_swap(state, t0)
        state.apply(BenchChanged(HOST, "result", record=_run(t0 + 50, "new-model", 290.0)))
        # then a sweep the operator stopped part way (x): 152 tok/s of a half-run
        state.apply(BenchChanged(HOST, "result", record=_run(t0 + 60, "new-model", 152.0, stopped=True,
                                                             completed=3)))

    r = report_from_recording(_recorded(tmp_path, fill))
    md = render(r, "md")
    assert "300 before → 290 after" in md and "152" not in md.split("## Host")[0]
    assert [row["output_throughput"] for row in r["bench"]["after"]] == [290.0]
    # never a result, and never gone without a word (before, a stopped run vanished from the report)
    assert "left out, stopped part way: new-model c=4 · 256/128 (3 of 8 finished)" in r["bench"]["note"]


def test_the_headline_compares_only_runs_of_one_workload(tmp_path: Path) -> None:
    t0 = time.time()

    def fill(state: HostState) -> None:
        state.apply(BenchChanged(HOST, "result", record=_run(t0 - 100, "old-model", 312.0, c=16)))
        _restart_swap(state, t0)
        state.apply(BenchChanged(HOST, "result", record=_run(t0 + 50, "new-model", 152.0, c=4)))

    r = report_from_recording(_recorded(tmp_path, fill))
    head = render(r, "md").split("## Host")[0]
    assert "312 before → 152 after" not in head and "not comparable" in head


def test_a_recording_still_being_written_is_in_progress_not_damaged(tmp_path: Path) -> None:
    state = HostState(HOST, label=HOST)
    rec = Recorder(state, tmp_path).start()
    _restart_swap(state, time.time())
    rec.flush()  # the palette's report: the session is recording on
    try:
        r = report_from_recording(rec.path, in_progress=True)
    finally:
        rec.close()
    md = render(r, "md")
    assert "in progress" in md and "damaged" not in md and "cut short" not in md
    assert r["host"]["in_progress"] is True and "recording_damage" not in r["host"]


def test_the_markdown_reads_as_text_without_html_entities(tmp_path: Path) -> None:
    from markdown_it import MarkdownIt

    def fill(state: HostState) -> None:
        _restart_swap(state, time.time())
        state.apply(SwapStepChanged(HOST, SwapStep("preflight", "Preflight gate", "done", 1.0, 2.0,
                                                   "TP 4 > 2 KV heads & <b>x</b>")))

    md = render(report_from_recording(_recorded(tmp_path, fill)), "md")
    assert "&gt;" not in md and "&lt;" not in md and "&amp;" not in md
    html = MarkdownIt("commonmark").enable("table").render(md)
    assert "TP 4 &gt; 2 KV heads &amp; &lt;b&gt;x&lt;/b&gt;" in html and "<b>" not in html


def test_the_html_never_breaks_a_state_or_a_word_of_a_short_column(tmp_path: Path) -> None:
    def fill(state: HostState) -> None:
        _restart_swap(state, time.time())

    doc = render(report_from_recording(_recorded(tmp_path, fill)), "html")
    style = re.search(r"<style>(.*?)</style>", doc).group(1)
    # no rule lets every cell break anywhere ("ro/ot", "pendi/ng" at the plan's narrow columns)
    assert not re.search(r"(^|})td\{[^}]*(word-break:break-(word|all)|overflow-wrap:anywhere)", style)
    assert re.search(r"td\.short\{[^}]*white-space:nowrap", style)
    for state_word in ("done", "pending"):
        cells = re.findall(rf"<td([^>]*)>{state_word}</td>", doc)
        assert cells and all('class="short"' in c for c in cells)


def _gpus(*used: int) -> GpuStatus:
    return GpuStatus("nvidia-smi", tuple(GpuDevice(i, "RTX", None, m, 97887, None, None, None, None)
                                for i, m in enumerate(used)), sampled_at_s=1.0)


def test_freed_is_the_reading_before_the_stop_minus_the_reading_after() -> None:
    from console.core.derive.swap_observer import freed_between

    before, after = _gpus(91204, 91210), _gpus(0, 512)
    assert freed_between(before, after) == ["GPU 0 91,204 MiB", "GPU 1 90,698 MiB (512 MiB left)"]
    assert freed_between(None, after) == []


def test_the_page_cache_rate_is_never_below_the_disk_rate_it_was_measured_beside() -> None:
    sample = pred.BootSample(weights_bytes=249e9, weights_s=249 / 16.8, kv_s=0.3, graphs_s=5.0, init_s=1.0,
                             ready_s=0.5, tp=4, cached_fraction=None, at="2026-12-01 10:00:00")
    p = pred.predict_restart([sample], 249e9, pred.Residency(int(249e9), int(249e9), 39))
    assert p.cache_gbps >= p.disk_gbps
    said = " ".join(p.assumptions)
    assert "12 GB/s assumed" not in said and f"{p.disk_gbps:.1f} GB/s" in said
    # pre-warmed (all of it cached) is never predicted slower than the cold read
    cold = pred.predict_restart([sample], 249e9, pred.Residency(0, int(249e9), 39))
    assert p.phases["weights"] <= cold.phases["weights"]


def test_the_plan_table_says_for_every_path_and_runtime_what_is_skipped_and_why() -> None:
    for path, runtime in swap_plan.TABLE:
        skipped = dict(swap_plan.skips(path, runtime, verify_sha=False))
        assert "verify" in skipped and "not asked for" in skipped["verify"]
        assert not set(skipped) & set(swap_plan.steps_of(path, runtime, verify_sha=False))
        if path == "restart":
            assert set(skipped) == {"verify"}
        else:
            assert {"stop_old", "start_new"} <= set(skipped) and all(
                skipped[k].startswith(path.replace("-", " ")) for k in ("stop_old", "start_new"))
        assert "verify" in swap_plan.steps_of(path, runtime, verify_sha=True)


def test_the_gate_counts_the_changes_the_diff_pane_counts() -> None:
    from console.core.state import Reading, ReadingChanged
    from console.domain.analysis.service_diff import EnvChange, UnitChange
    from console.domain.analysis.service_report import ServiceReport, ServiceSide
    from console.domain.swap.preflight import check_diff
    from console.host.parsers.sglang_argv import normalize

    argv = ["python", "-m", "sglang.launch_server", "--model-path", "{}", "--tp", "4"]
    old = ServiceSide("old.service", None, None, normalize([a.format("/m/old") for a in argv]))
    new = ServiceSide("new.service", None, None, normalize([a.format("/m/new") for a in argv]))
    env = (EnvChange("NCCL_P2P_LEVEL", "added", None, "NVL"),)
    unit = (UnitChange("LimitNOFILE", "changed", "1024", "65536"),)
    report = ServiceReport(old, new, (), env, (), (), None, (), (), "test", (), unit_changes=unit)
    state = HostState(HOST)
    state.apply(ReadingChanged(HOST, "service", Reading("service", report, time.time())))
    check = check_diff(state)
    assert check.ok is True and check.reason.startswith(f"{report.change_count} change")
    assert report.change_count == 2


def test_the_steps_are_listed_in_the_order_the_host_lived_them() -> None:
    view = SwapView()
    t0 = 1000.0
    for key, start, state in (("download", t0, "done"), ("paths", t0 + 10, "done"), ("install", t0 + 11, "done"),
                              ("preflight", t0 + 12, "done"), ("stop_old", None, "skipped"),
                              ("in_place", t0 + 14, "done"), ("benchmark", t0 + 40, "done")):
        view.apply(SwapStepChanged(HOST, SwapStep(key, key, state, start, None if start is None else start + 1)))
    order = [s.key for s in view.ordered_steps()]
    # the path's choice before the install it decided, the update before the benchmark of its weights
    assert order.index("paths") < order.index("install") and order.index("in_place") < order.index("benchmark")
    assert order.index("preflight") < order.index("stop_old") < order.index("in_place")


def test_a_step_run_after_a_later_one_is_listed_above_the_steps_still_to_come() -> None:
    """The demo's operator verified after the install: the running verify was listed at the foot
    of the plan, below the gate, the stop and the start still pending."""
    view = SwapView()
    t0 = 1000.0
    for key, start, state in (("download", t0, "done"), ("install", t0 + 50, "done"), ("verify", t0 + 51, "running"),
                              ("preflight", None, "pending"), ("stop_old", None, "pending"),
                              ("start_new", None, "pending"), ("benchmark", None, "pending")):
        view.apply(SwapStepChanged(HOST, SwapStep(key, key, state, start, None)))
    order = [s.key for s in view.ordered_steps()]
    assert order == ["download", "install", "verify", "preflight", "stop_old", "start_new", "benchmark"]


def test_the_downtime_parts_add_up_to_the_downtime_with_a_part_under_half_a_second() -> None:
    view = SwapView()
    view.apply(SwapStepChanged(HOST, SwapStep("stop_old", "Stop", "done", 100.0, 101.0, who="ana")))
    view.apply(SwapStepChanged(HOST, SwapStep("start_new", "Start", "done", 101.2, 110.0, who="ana")))
    view.apply(DowntimeChanged(HOST, 100.0, "the stop command", 109.5, "new.service ready"))
    parts = view.downtime_parts()
    assert sum(s for _, s in parts) == view.downtime_s(0.0) == 9.5  # the 0.2 s before the start is in a part


def test_report_file_of_a_recording_another_console_is_writing_says_in_progress(tmp_path: Path) -> None:
    """`gpuconsole report FILE` while a console still records into FILE: in progress, not damaged;
    the same file left unfinished long ago (a killed session) is damaged where it ends."""
    state = HostState(HOST, label=HOST)
    rec = Recorder(state, tmp_path).start()
    _restart_swap(state, time.time())
    rec.flush()
    try:
        md = render(report_from_recording(rec.path), "md")
        assert "in progress" in md and "damaged" not in md
        os.utime(rec.path, (time.time() - 600, time.time() - 600))
        r = report_from_recording(rec.path)
        assert "in_progress" not in r["host"] and r["host"]["recording_damage"]
    finally:
        rec.close()


def test_a_partial_run_with_failed_requests_is_named_never_compared(tmp_path: Path) -> None:
    t0 = time.time()

    def fill(state: HostState) -> None:
        state.apply(BenchChanged(HOST, "result", record=_run(t0 - 100, "old-model", 300.0)))
        _restart_swap(state, t0)
        state.apply(BenchChanged(HOST, "result", record=_run(t0 + 50, "new-model", 290.0)))
        state.apply(BenchChanged(HOST, "result", record=_run(t0 + 60, "new-model", 500.0, completed=5)))

    r = report_from_recording(_recorded(tmp_path, fill))
    head = render(r, "md").split("## Host")[0]
    assert "300 before → 290 after" in head and "500" not in head.split(";")[0]
    assert [row["output_throughput"] for row in r["bench"]["after"]] == [290.0]
    # a record without a failed count is not said to have failed requests (before: "requests failed")
    assert "not every request finished: new-model c=4 · 256/128 (5 of 8 finished)" in r["bench"]["note"]
    assert "failed" not in r["bench"]["note"]


def test_a_run_that_counts_its_failed_requests_says_how_many(tmp_path: Path) -> None:
    t0 = time.time()

    def fill(state: HostState) -> None:
        state.apply(BenchChanged(HOST, "result", record=_run(t0 - 100, "old-model", 300.0)))
        _restart_swap(state, t0)
        state.apply(BenchChanged(HOST, "result", record=_run(t0 + 50, "new-model", 290.0)))
        state.apply(BenchChanged(HOST, "result", record={**_run(t0 + 60, "new-model", 500.0, completed=5),
                                                         "failed": 3}))

    r = report_from_recording(_recorded(tmp_path, fill))
    assert "(5 of 8 finished, 3 failed)" in r["bench"]["note"], r["bench"]["note"]
