"""A deployment session recorded and replayed (issue 37), with the host recordings' codec: a Recorder
per node, the probes and the swaps' reports beside; the replay derives the same deployment view (status,
nodes, faults, checks, timeline) and its screen shows it with the last swap report, as it was."""

from __future__ import annotations

import asyncio
import stat
from dataclasses import replace
from pathlib import Path

from textual.app import App
from textual.widgets import Static

from console.core.state import LogAppended
from console.domain.deploy.probe import NodeProbe
from console.domain.deploy.recording import DeploymentRecorder, ReplayWatch, is_deployment_recording
from console.domain.deploy.swap import DeploymentSwap, format_report
from console.domain.deploy.text import format_deployment
from console.host.parsers.sglang_log import parse_line
from console.ui.deploy_screen import DeploymentScreen
from tests.kit.deploy import NOW, FakeWatch, deployment, init_ends, launch, multinode_args, node_state


def live() -> FakeWatch:
    d = deployment()
    d = replace(d, nodes=tuple(replace(n, profile=replace(n.profile, unit="new.service", compare_unit="old.service"))
                               for n in d.nodes))
    states = {"node0": node_state("gpu-0", args=multinode_args(0), server="starting", gpus=(8, 143_771),
                                  lines=tuple(launch("2026-12-03 08:00:00", range(8)))),
              "node1": node_state("gpu-1", args=multinode_args(1), last_line_at_s=NOW - 40, gpus=(8, 143_771))}
    watch = FakeWatch(d, ready=False, states=states)
    watch.probes = {"node0": NodeProbe(NOW, clock_skew_s=0.1, utc_offset_s=0, sglang_version="0.5.23"),
                    "node1": NodeProbe(NOW, clock_skew_s=3.2, utc_offset_s=0, sglang_version="0.5.23")}
    return watch


def test_a_recorded_deployment_replays_to_the_same_view_and_its_screen_shows_the_last_report(tmp_path: Path) -> None:
    watch = live()
    directory = tmp_path / "deploy-big"
    recorder = DeploymentRecorder(watch, directory).start()
    swap = DeploymentSwap(watch, who="ana", ready_timeout_s=1, drain_timeout_s=5)
    swap.on_end.append(lambda run: recorder.swap_ended(run.outcome, format_report(run, watch.deployment)))

    async def session() -> str:
        await watch.probe_all()
        node1 = watch.states["node1"]
        node1.apply(LogAppended(node1.host, tuple(parse_line(line) for line in
                                                  launch("2026-12-03 08:00:05", range(8, 16))
                                                  + init_ends("2026-12-03 08:00:06", range(8, 16)))))
        run = await swap.run(confirmed=True)
        return run.outcome

    outcome = asyncio.run(session())
    recorder.close()
    assert outcome.startswith("failed: not ready within 1 s")  # the fake nodes never boot: said as it was
    assert is_deployment_recording(directory)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((directory / "probes.jsonl").stat().st_mode) == 0o600

    replay = ReplayWatch(directory)
    replay.apply_until(0.0)
    ours = format_deployment(watch.view(NOW), watch.checks(), width=400, timeline_lines=100)
    theirs = format_deployment(replay.view(NOW), replay.checks(), width=400, timeline_lines=100)
    assert theirs == ours
    assert "node 1 TP8" in theirs and "clock +3.2 s" in theirs and "SGLang 0.5.23" in theirs
    assert [e.action for e in replay.states["node1"].swap.audit] == ["stop old.service (big)",
                                                                      "start new.service (big)"]
    report = replay.report()
    assert report is not None and report.startswith("# swap of big: failed: not ready within 1 s")

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(DeploymentScreen(replay, None, report=replay.report))

    async def screen() -> None:
        async with Host().run_test(size=(200, 50)) as pilot:
            await pilot.pause()
            s = pilot.app.screen
            assert str(s.query_one("#deploy-swap", Static).render()).startswith("# swap of big: failed")
            assert "TP8" in str(s.query_one("#deploy-timeline-text", Static).render())

    asyncio.run(screen())


def test_a_directory_that_is_not_a_deployment_recording_is_one_error(tmp_path: Path) -> None:
    from console.core.recording import RecordingError

    (tmp_path / "deployment.json").write_text('{"format": "something else"}')
    try:
        ReplayWatch(tmp_path)
    except RecordingError as exc:
        assert "not a gpuconsole deployment manifest" in str(exc)
    else:
        raise AssertionError("a foreign manifest was replayed")
