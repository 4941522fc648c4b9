"""The swap as the host lived it (issue 20 item 3): the plan and the downtime clock follow what
happens on the host, whoever did it: the default demo's story, or a shell over plain SSH."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from console.demo.hostsim.scenario import NEW_UNIT, OLD_UNIT, draft_unit_path
from console.host.session import make_transport
from console.domain.swap.report import SECTIONS, render_html, render_markdown, report_from_recording
from tests.kit.swap import Driven as Host
from tests.kit.swap import demo_app, demo_env, story_host
from tests.kit.swap import driven_host as _driven_host
from tests.kit.swap import step as _step
from tests.kit.swap import until as _until


def _host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scenario: str,
          speed: float) -> contextlib.AbstractAsyncContextManager[Host]:
    """The story's host as the console watches it (the controller's own poll and benchmark plan)."""
    return _driven_host(tmp_path, monkeypatch, scenario=scenario, speed=speed, swap_poll_s=None, bench_plan=None)


async def _bench(h: Host, plan: list[tuple[int, int, int, int]]) -> None:
    assert h.runner.start_bench("sweep", plan) is None
    await _until(lambda: h.runner.bench is None or not h.runner.bench.running, 60, "the benchmark")


def check_full_report(r: dict[str, object], *, old_model: str = "qwen3.5-397b") -> None:
    on = r["old_new"]
    assert on["old_unit"] == OLD_UNIT and on["new_unit"] == NEW_UNIT
    steps = {s["key"]: s for s in r["steps"]}
    for key in ("download", "install", "stop_old", "start_new"):
        assert steps[key]["state"] == "done", steps[key]
        assert steps[key]["started"] is not None
    stop = steps["stop_old"]["detail"]
    # Drained, or (the next unit started at once, as on a fast host) honestly not seen drained.
    assert "(outside the console)" in stop and ("drained" in stop or "before the drain was seen" in stop), stop
    t = r["timing"]
    assert t["downtime_s"] is not None and t["downtime_s"] > 0 and not t["downtime_running"]
    assert "last served request" in t["downtime_from_source"] and NEW_UNIT in t["downtime_to_source"]
    assert t["time_to_ready_s"] is not None and 0 < t["time_to_ready_s"] <= t["downtime_s"]
    phases = [b["phase"] for b in r["boot"]]
    assert phases[0] == "launch" and phases[-1] == "ready"
    assert all(g["used_mib"] > 90_000 for g in r["gpu"]["before"]), r["gpu"]["before"]
    assert all(80_000 < g["used_mib"] < 90_000 for g in r["gpu"]["after"])
    assert r["fit"]["predicted"]["fits"] is True
    b = r["bench"]
    assert b["before"] is not None and b["before"]["model"] == old_model, b
    assert b["after"] and all(x["model"] == "qwen3.5-122b" for x in b["after"]), b
    assert b["note"] is None, b["note"]
    md, page = render_markdown(r), render_html(r)
    for section in SECTIONS:
        assert f"## {section}" in md and f"<h2>{section}</h2>" in page
    # The headline facts come first, with the one downtime figure.
    head = md.split("## Host")[0]
    assert "downtime " in head and "time to ready " in head and "before →" in head
    assert "fits: yes" in md and "True" not in md.split("## Download")[1].split("##")[0]


async def test_the_default_demos_story_swap_is_observed_in_the_plan_and_its_report_is_full(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`gpuconsole --demo`: the story stops the old unit and starts the new one by itself; the plan
    shows both as observed, with their times; the downtime clock runs from the old server's last
    served request to the new one's ready; the recording's report has every section."""
    async with _host(tmp_path, monkeypatch, "swap", 2.0) as h:
        await _until(lambda: h.state.data("gpu") is not None and h.state.data("server") is not None, 30, "readings")
        await _bench(h, [(2, 4, 64, 32)])  # the old model's run, before the story's stop
        await _until(lambda: h.state.swap.steps["stop_old"].state != "pending", 60, "the story's stop, observed")
        stop = h.state.swap.steps["stop_old"]
        assert stop.observed and stop.who is None and stop.started_at_s is not None
        assert "(outside the console)" in stop.detail
        d = h.state.swap.downtime
        assert d is not None and d.started_at_s is not None and d.started_at_s <= stop.started_at_s
        assert "last served request" in d.start_source
        await _until(lambda: h.state.swap.steps["start_new"].state == "done", 90, "the new server's ready")
        start = h.state.swap.steps["start_new"]
        assert start.observed and h.state.swap.downtime.ended_at_s == start.ended_at_s
        assert h.state.data("server").status == "ready"
        assert _step(h, "stop_old")[0] == "done"
        await _bench(h, [(2, 4, 64, 32)])
        await _until(lambda: h.state.swap.steps["benchmark"].state == "done", 10, "the benchmark, observed")
        await asyncio.sleep(0.3)
        h.recorder.close()
        assert h.recorder.path is not None
        check_full_report(report_from_recording(h.recorder.path))


async def test_a_swap_done_entirely_outside_the_console_over_plain_ssh_is_observed_with_times(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Carl, in his own shell: hf download, the unit written, systemctl stop and start, over SSH.
    Nothing goes through the console's plan; the plan and the report have the swap all the same."""
    async with _host(tmp_path, monkeypatch, "drive", 8.0) as h:
        await _until(lambda: h.state.data("gpu") is not None and h.state.data("service") is not None, 30,
                     "readings")
        assert _step(h, "install")[0] == "pending"  # not on the host yet
        await _bench(h, [(2, 4, 64, 32)])
        profile = h.runner.session.profile
        carl = make_transport(profile)
        await carl.connect()
        try:
            r = await carl.run(f"hf download Qwen/Qwen3.5-122B-A10B --local-dir {profile.model_dir}", timeout=120)
            assert r.exit_status == 0, r.error_text
            unit = f"/etc/systemd/system/{NEW_UNIT}"
            await carl.write_file(h.sim.host_path(unit), draft_unit_path(h.sim).read_bytes())
            assert (await carl.run("systemctl daemon-reload", timeout=20)).exit_status == 0
            await _until(lambda: _step(h, "download")[0] == "done", 30, "the download, observed")
            assert (await carl.run(f"systemctl stop {OLD_UNIT}", timeout=60)).exit_status == 0
            await _until(lambda: _step(h, "stop_old")[0] == "done", 60, "the stop, observed")
            assert (await carl.run(f"systemctl start {NEW_UNIT}", timeout=60)).exit_status == 0
            await _until(lambda: _step(h, "start_new")[0] == "done", 120, "the new server's ready")
        finally:
            await carl.close()
        swap = h.state.swap
        assert not swap.audit, "the console ran nothing"
        for key in ("download", "install", "stop_old", "start_new"):
            assert swap.steps[key].observed and swap.steps[key].started_at_s is not None, swap.steps[key]
        assert _step(h, "preflight") == ("skipped", "not run: the old service was stopped outside the console")
        assert swap.downtime is not None and swap.downtime.ended_at_s is not None
        await _bench(h, [(2, 4, 64, 32)])
        await asyncio.sleep(0.3)
        h.recorder.close()
        assert h.recorder.path is not None
        check_full_report(report_from_recording(h.recorder.path))


async def test_the_palettes_report_and_gpuconsole_report_agree_on_the_story_swaps_downtime(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from console.cli.main import main

    demo_env(tmp_path, monkeypatch)
    async with story_host(tmp_path, scenario="swap", speed=4.0) as sim:
        app = demo_app(sim, tmp_path, gpu_interval_s=0.5)
        async with app.run_test(size=(120, 40)):
            state = app.state
            await _until(lambda: state.swap.steps["start_new"].state == "done", 120, "the story's swap, observed")
            assert state.swap.downtime is not None and state.swap.downtime.ended_at_s is not None
            app.action_swap_plan()
            def drawn() -> str:
                plans = app.screen.query("#swap-plan")  # none until the plan screen has composed
                return str(plans.first().render()) if plans else ""

            # Drawn at the docked plan's own width (56 columns at 120): the first draw may come before
            # the layout, at the screen's width; the one that counts is at the strip's.
            await _until(lambda: "on host" in drawn() and max(map(len, drawn().splitlines())) <= 56,
                         30, "the plan drawn at its docked width with the observed steps")
            plan = str(app.screen.query_one("#swap-plan").render())
            assert "(outside the console)" in " ".join(plan.split()) and "on host" in plan, plan
            assert "downtime: not started" not in plan
            app.action_swap_report()
            await _until(lambda: list((tmp_path / "rec").glob("*.report.md")), 30, "the palette's report")
            palette = next((tmp_path / "rec").glob("*.report.md")).read_text()
            recording = next((tmp_path / "rec").glob("*.jsonl.gz"))
    assert await asyncio.to_thread(main, ["report", str(recording)]) == 0
    cli = capsys.readouterr().out

    def downtime(md: str) -> str:
        return next(line for line in md.splitlines() if line.startswith("- **downtime "))

    assert "not measured" not in downtime(palette)
    assert downtime(palette) == downtime(cli)


async def test_the_demos_operator_drives_the_swap_through_the_plan_screens_keys(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`./scripts/demo.sh` (--demo-scenario operator): the swap is the console's own plan, driven at
    its keys with each confirmation on screen; the old model's run is the report's "before"."""
    from console.ui.panes.swap import ConfirmScreen, drive_plan_as_operator

    demo_env(tmp_path, monkeypatch)
    confirmations: list[str] = []
    async with story_host(tmp_path, scenario="drive", speed=8.0) as sim:
        app = demo_app(sim, tmp_path, gpu_interval_s=0.5)
        async with app.run_test(size=(130, 45)) as pilot:
            state = app.state

            async def watch() -> None:
                while True:
                    if isinstance(app.screen, ConfirmScreen) and app.screen.preview.key not in confirmations:
                        confirmations.append(app.screen.preview.key)
                    await asyncio.sleep(0.05)

            watcher = asyncio.ensure_future(watch())
            # Verify left out here: sha256 of 40 files is slow on a loaded test machine (test_swap.py runs it).
            plan = ("download", "install", "preflight", "stop_old", "start_new", "benchmark")
            said = await drive_plan_as_operator(app, read_s=0.3, timeout_s=300, plan=plan)
            watcher.cancel()
            await pilot.pause(0.5)
            assert said == "the swap is done", said
            assert tuple(confirmations) == plan
            steps = state.swap.steps
            assert all(steps[k].state == "done" and not steps[k].observed for k in confirmations), [
                (k, steps[k].state, steps[k].observed) for k in confirmations]
            # The plan draws the benchmark's end at the screen's next flush (a loaded machine: not at once).
            await _until(lambda: "✓ Benchmark" in str(app.screen.query_one("#swap-plan").render()), 30,
                         "the plan's Benchmark step drawn done")
            plan = str(app.screen.query_one("#swap-plan").render())
            assert "✓ Benchmark" in plan and "downtime " in plan
            recorder = app.recorder
            recorder.flush()
            r = report_from_recording(recorder.path)
            # The host's events stop before the app does (app.py's header is queried while the
            # app tears down otherwise: noted for the screen's owner).
            await app.runner.close()
            await pilot.pause(0.5)
    b = r["bench"]
    assert b["before"]["model"] == "qwen3.5-397b" and b["after"][-1]["model"] == "qwen3.5-122b", b
    assert b["note"] is None and b["before"]["concurrency"] == b["after"][-1]["concurrency"]


def test_the_two_person_rule_can_be_tried_in_the_demo() -> None:
    from console.cli.main import build_parser

    args = build_parser().parse_args(["--demo", "--require-approval", "--demo-scenario", "operator"])
    assert args.require_approval is True and args.demo_scenario == "operator"
    text = build_parser().format_help()
    assert "--demo-scenario" in text and "--require-approval" in text


# -- the downtime clock's ends, as the host stamped them (pure: the observer over a few readings) ---
_OLD, _NEW = "sglang-old.service", "sglang-new.service"
_SERVED_LOG = (
    "[2026-12-01 15:04:01 TP0] Decode batch. #running-req: 8, #token: 1, token usage: 0.12, "
    "gen throughput (token/s): 186.64, #queue-req: 0",
    '[2026-12-01 15:04:03] INFO:     127.0.0.1:41416 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    # after the last served request, more lines of the same kinds that serve nobody:
    '[2026-12-01 15:04:08] INFO:     127.0.0.1:41417 - "GET /health HTTP/1.1" 200 OK',
    '[2026-12-01 15:04:09] INFO:     127.0.0.1:41418 - "POST /flush_cache HTTP/1.1" 200 OK',
    '[2026-12-01 15:04:10] INFO:     127.0.0.1:41419 - "GET /v1/models HTTP/1.1" 200 OK',
)


def _lived_downtime(log: tuple[str, ...], stopped_at: float, ready_at: float) -> object:
    """The swap's downtime after: the log above, the old unit seen inactive at `stopped_at`, the
    new one ready at `ready_at` (each reading's time is the host's)."""
    from types import SimpleNamespace

    from console.domain.analysis.service_report import ServiceReport, ServiceSide
    from console.core.state import HostState, LogAppended, ReadingChanged
    from console.model import Reading
    from console.host.parsers.sglang_log import parse_line
    from console.core.derive.swap_observer import SwapObserver

    state = HostState("h", clock=lambda: 0.0)  # the console's own clock is nowhere in the answer
    observer = SwapObserver(state)

    def see(event: object) -> None:
        state.apply(event)
        for derived in observer.see(event):
            state.apply(derived)

    def units(old: str, new: str, at: float) -> ReadingChanged:
        side = lambda name, active: ServiceSide(name, None, None, None, active_state=active)  # noqa: E731
        report = ServiceReport(side(_OLD, old), side(_NEW, new), (), (), (), (), None, (), (), "x", ())
        return ReadingChanged("h", "service", Reading("service", report, at))

    see(units("active", "inactive", stopped_at - 30))
    see(LogAppended("h", tuple(parse_line(line) for line in log)))
    see(units("inactive", "inactive", stopped_at))
    server = SimpleNamespace(unit=_NEW, unit_state="active", status="ready", reason="ready: /health 200")
    see(ReadingChanged("h", "server", Reading("server", server, ready_at)))
    return state.swap.downtime


def test_the_downtime_runs_from_the_last_served_request_to_the_new_servers_ready_on_the_hosts_stamps() -> None:
    from console.core.derive.swap_observer import log_time

    stop, ready = log_time("2026-12-01 15:04:12"), log_time("2026-12-01 15:05:40")
    assert stop is not None and ready is not None
    d = _lived_downtime(_SERVED_LOG, stop, ready)
    # the POST to /v1 at 15:04:03, not the health check, the cache flush or the model list after it
    assert d.started_at_s == log_time("2026-12-01 15:04:03")  # type: ignore[attr-defined]
    assert d.start_source == "the old server's last served request, in its log"  # type: ignore[attr-defined]
    assert (d.ended_at_s, d.end_source) == (ready, f"{_NEW} ready")  # type: ignore[attr-defined]


def test_a_batch_line_alone_dates_the_start_and_a_log_that_served_nothing_starts_at_the_stop() -> None:
    from console.core.derive.swap_observer import log_time

    stop, ready = log_time("2026-12-01 15:04:12"), log_time("2026-12-01 15:05:40")
    assert stop is not None and ready is not None
    d = _lived_downtime((_SERVED_LOG[0], *_SERVED_LOG[2:]), stop, ready)
    assert d.started_at_s == log_time("2026-12-01 15:04:01")  # type: ignore[attr-defined]
    idle = _lived_downtime(_SERVED_LOG[2:], stop, ready)
    assert idle.started_at_s == stop  # type: ignore[attr-defined]
    assert "no request in the log" in idle.start_source  # type: ignore[attr-defined]
