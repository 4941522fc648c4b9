"""The swap driven from the console's actions, against the host simulator's driven scenario: real
SSH, a real shell, SFTP, the simulated systemctl/systemd-run/hf, the fake SGLang that boots (or
OOMs) along the story."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from console.demo.hostsim.scenario import NEW_UNIT, OLD_UNIT
from console.domain.swap.report import report_from_recording
from tests.kit.swap import Driven, demo_app, demo_env, driven_host, story_host
from tests.kit.swap import run_step as _run
from tests.kit.swap import step as _step
from tests.kit.swap import until as _until

SPEED = 8.0


@pytest.fixture(params=["sim", "sshd"])
async def driven(request: pytest.FixtureRequest, tmp_path: Path,
                 monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Driven]:
    """The driven host through the in-process simulator's SSH server, and through OpenSSH's sshd."""
    async with driven_host(tmp_path, monkeypatch, speed=SPEED, via=request.param) as d:
        yield d


@pytest.fixture(params=["sim", "sshd"])
async def driven_oom(request: pytest.FixtureRequest, tmp_path: Path,
                     monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Driven]:
    async with driven_host(tmp_path, monkeypatch, speed=SPEED, oom=True, via=request.param) as d:
        yield d


async def test_the_seeds_swap_end_to_end_from_the_consoles_actions(driven: Driven) -> None:
    d = driven
    swap = d.runner.swap
    # Before: the old model serves; the new unit is not on the host.
    await _until(lambda: d.state.data("gpu") is not None and d.state.data("service") is not None, 20,
                 "GPU and service readings")
    assert all(g.memory_used_mib > 90_000 for g in d.state.data("gpu").gpus)
    assert not d.sim.path(f"/etc/systemd/system/{NEW_UNIT}").exists()

    await _run(d, "download", 120)  # returns once started: the download is followed in the background
    assert _step(d, "download")[0] == "running", _step(d, "download")
    # As in the story, the new unit is installed while the files arrive.
    await _run(d, "install")
    assert _step(d, "install")[0] == "done", _step(d, "install")
    await swap.wait_download(120)
    assert _step(d, "download")[0] == "done", _step(d, "download")
    assert "39/39 shards" in _step(d, "download")[1]
    why, preview = swap.preview("verify")  # the preview lists the sha256 loop that will run
    assert preview is not None and any("sha256sum -- " in line for line in preview.lines), (why, preview)
    await _run(d, "verify")  # the profile does not ask for sha256, but a confirmed Verify runs (#22 item 5)
    state, detail = _step(d, "verify")
    assert state == "done" and "match" in detail, detail
    assert {c.name: c for c in swap.evaluate_gate()}["sha256"].ok is True

    installed = d.sim.path(f"/etc/systemd/system/{NEW_UNIT}").read_text()
    assert installed == Path(d.runner.session.profile.unit_draft).read_text()
    assert (d.sim.root / ".sim" / "daemon-reload").exists()

    await _run(d, "preflight", 60)
    assert _step(d, "preflight")[0] == "done", [(c.name, c.ok, c.reason) for c in d.state.swap.gate]
    assert {c.name for c in d.state.swap.gate} == {"download", "sha256", "diff", "fit", "disk", "paths", "flags",
                                                   "swap path"}  # issue 24: the path and its predicted downtime

    await _run(d, "stop_old", 60)
    assert _step(d, "stop_old")[0] == "done", _step(d, "stop_old")
    assert "drained" in _step(d, "stop_old")[1]
    assert d.state.swap.downtime is not None and d.state.swap.downtime.started_at_s is not None

    await _run(d, "start_new", 120)
    assert _step(d, "start_new")[0] == "done", _step(d, "start_new")
    downtime = d.state.swap.downtime
    assert downtime.ended_at_s is not None and downtime.ended_at_s > downtime.started_at_s
    assert d.state.data("server").status == "ready"

    await _run(d, "benchmark", 120)
    assert _step(d, "benchmark")[0] == "done", _step(d, "benchmark")

    # Every command is in the audit log, in the state and in the file, with its exit status.
    commands = [e.command for e in d.state.swap.audit]
    assert any("systemctl stop -- " + OLD_UNIT in c for c in commands)
    assert any("systemctl start -- " + NEW_UNIT in c for c in commands)
    assert all(e.exit_status == 0 for e in d.state.swap.audit if "systemctl st" in e.command)
    lines = [json.loads(x) for x in d.audit.read_text().splitlines()]
    assert len(lines) == len(d.state.swap.audit) and lines[0]["who"] == swap.who

    # The report of this swap, from its recording: every section with real values, no secret.
    d.recorder.close()
    assert d.recorder.path is not None
    check_report(report_from_recording(d.recorder.path))


def check_report(r: dict[str, object]) -> None:
    from console.domain.swap.report import SECTIONS, render_html, render_markdown

    on = r["old_new"]
    assert on["old_unit"] == OLD_UNIT and on["new_unit"] == NEW_UNIT
    assert on["old_model"] and on["new_model"] == "qwen3.5-122b"
    assert [s["state"] for s in r["steps"]][:7] == ["done", "done", "done", "done", "done", "done", "done"]
    changes = {c["flag"]: c for c in r["diff"]["changes"]}
    assert changes["--quantization"]["change"] == "removed" and changes["--quantization"]["reason"]
    assert any(lint["severity"] == "info" for lint in r["diff"]["lints"])
    fit = r["fit"]
    assert fit["predicted"]["fits"] is True
    assert {row["what"] for row in fit["rows"]} >= {"KV tokens", "max running requests"}
    assert r["download"]["complete"] is True and r["download"]["shards"] == "39/39"
    phases = [b["phase"] for b in r["boot"]]
    assert "weights loading" in phases and phases[-1] == "ready"
    t = r["timing"]
    assert t["time_to_ready_s"] > 0 and t["downtime_s"] > t["time_to_ready_s"] * 0.5
    assert "log" in t["downtime_from_source"] and NEW_UNIT in t["downtime_to_source"]
    assert all(g["used_mib"] > 90_000 for g in r["gpu"]["before"])
    assert all(80_000 < g["used_mib"] < 90_000 for g in r["gpu"]["after"])
    assert r["bench"]["after"] and r["bench"]["after"][0]["output_throughput"] > 0
    assert any("systemctl stop" in a["command"] and a["exit_status"] == 0 for a in r["audit"])
    md, page = render_markdown(r), render_html(r)
    for section in SECTIONS:
        assert f"## {section}" in md and f"<h2>{section}</h2>" in page
    assert "<svg" in page and "output tokens/s" in page
    blob = json.dumps(r) + md + page
    assert "hf_sImUlAtEdToKeN" not in blob


async def test_a_new_server_that_ooms_fails_the_step_and_rolls_back_to_the_old_model(driven_oom: Driven) -> None:
    d = driven_oom
    await _until(lambda: d.state.data("service") is not None, 20, "the service reading")
    await _run(d, "download", 120)
    await d.runner.swap.wait_download(120)
    await _run(d, "install", 120)
    for key in ("download", "install"):
        assert _step(d, key)[0] == "done", _step(d, key)
    await _run(d, "stop_old", 60)
    assert _step(d, "stop_old")[0] == "done", _step(d, "stop_old")
    await _run(d, "start_new", 120)
    state, detail = _step(d, "start_new")
    assert state == "failed" and "died" in detail and "out of memory" in detail, detail
    # Nothing after it ran; rollback is offered (and is the only way on).
    assert _step(d, "benchmark")[0] == "pending"
    await _run(d, "rollback", 120)
    state, detail = _step(d, "rollback")
    assert state == "done" and OLD_UNIT in detail, detail
    downtime = d.state.swap.downtime
    assert downtime.ended_at_s is not None and "rollback" in downtime.end_source
    r = await d.runner.session.transport.run(f"systemctl is-active {OLD_UNIT}", timeout=10)
    assert r.text.strip() == "active"


@pytest.fixture
async def driven_paired(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Driven]:
    async with driven_host(tmp_path, monkeypatch, speed=SPEED, require_approval=True) as d:
        yield d


@pytest.fixture
async def driven_read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Driven]:
    async with driven_host(tmp_path, monkeypatch, speed=SPEED, read_only=True) as d:
        yield d


def _override_all(d: Driven) -> None:
    for check in d.runner.swap.evaluate_gate():
        if not check.passes:
            assert d.runner.swap.override(check.name, check.name) is None


async def test_the_gate_refuses_a_partial_download_a_leftover_fp4_flag_and_a_data_path(driven: Driven) -> None:
    d = driven
    draft = Path(d.runner.session.profile.unit_draft)
    data_dir = d.sim.host_path("/data/models/Qwen3.5-122B-A10B")
    d.sim.path("/data/models/Qwen3.5-122B-A10B").mkdir(parents=True)
    text = draft.read_text().replace("--tp 4 \\", "--tp 4 --quantization modelopt_fp4 \\")
    draft.write_text(text.replace("--served-model-name qwen3.5-122b",
                                  f"--served-model-name qwen3.5-122b --download-dir {data_dir}"))
    await _until(lambda: d.state.data("service") is not None, 20, "the service reading")
    # A download stopped part-way.
    assert d.runner.swap.request("download") is None
    await _until(lambda: (d.state.data("download") is not None and d.state.data("download").shards_done >= 3),
                 60, "a few shards")
    assert d.runner.swap.request("download") == "the download is already running (x stops it)"
    assert d.runner.swap.request("stop_download") is None
    await d.runner.swap.wait_idle(30)
    await d.runner.swap.wait_download(30)
    assert _step(d, "download")[0] == "failed" and "stopped by" in _step(d, "download")[1]
    await _run(d, "install")
    assert _step(d, "install")[0] == "done", _step(d, "install")
    await _run(d, "preflight", 60)
    state, detail = _step(d, "preflight")
    gate = {c.name: c for c in d.state.swap.gate}
    assert state == "refused"  # nothing ran: a refusal, not a failure (#20 item 7)
    assert gate["download"].ok is False and "shards" in gate["download"].reason
    assert gate["diff"].ok is False and "--quantization modelopt_fp4" in gate["diff"].reason
    assert gate["paths"].ok is False and "/data" in gate["paths"].reason
    assert "download:" in detail and "diff:" in detail and "paths:" in detail
    # The stop is refused by the same gate, and nothing was stopped.
    await _run(d, "stop_old")
    assert _step(d, "stop_old")[0] == "refused" and "gate refuses" in _step(d, "stop_old")[1]
    assert "still serves" in _step(d, "stop_old")[1]
    r = await d.runner.session.transport.run(f"systemctl is-active {OLD_UNIT}", timeout=10)
    assert r.text.strip() == "active"
    # An override only by typing the check's name; recorded with who typed it.
    assert d.runner.swap.override("paths", "path") == "type the check's name (paths) to override it"
    assert d.runner.swap.override("paths", "paths", "ana") is None
    gate = {c.name: c for c in d.state.swap.gate}
    assert gate["paths"].overridden_by == "ana" and gate["paths"].passes and not gate["diff"].passes
    assert any(e.note == "gate override" and e.who == "ana" for e in d.state.swap.audit)


async def test_two_person_rule_waits_for_another_persons_approval(driven_paired: Driven) -> None:
    d = driven_paired
    swap = d.runner.swap
    await _until(lambda: d.state.data("service") is not None and d.state.data("gpu") is not None, 20, "readings")
    _override_all(d)
    assert swap.request("stop_old", "ana") is None
    await _until(lambda: d.state.swap.pending_approvals, 20, "the approval request")
    (req,) = d.state.swap.pending_approvals
    assert req.requested_by == "ana" and req.action == "stop_old"
    assert any(f"systemctl stop -- {OLD_UNIT}" in line for line in req.commands)
    # Nothing ran yet; the requester cannot approve their own request; a second action is refused.
    r = await d.runner.session.transport.run(f"systemctl is-active {OLD_UNIT}", timeout=10)
    assert r.text.strip() == "active"
    assert swap.approve(req.request_id, "ana") == "another person must approve (the two-person rule)"
    assert swap.request("start_new", "ana") is not None
    assert swap.approve(req.request_id, "ben") is None
    await swap.wait_idle(60)
    assert _step(d, "stop_old")[0] == "done", _step(d, "stop_old")
    decided = d.state.swap.approvals[req.request_id]
    assert decided.status == "granted" and decided.decided_by == "ben" and decided.decided_at_s is not None
    assert any(e.who == "ben" and "granted" in e.command for e in d.state.swap.audit)
    # A request taken back by the one who asked: the step fails and nothing runs.
    assert swap.request("start_new", "ana") is None
    await _until(lambda: d.state.swap.pending_approvals, 20, "the second request")
    (req,) = d.state.swap.pending_approvals
    assert swap.withdraw(req.request_id, "ben") == "only ana, who asked, can withdraw it"
    assert swap.withdraw(req.request_id, "ana") is None
    await swap.wait_idle(30)
    assert _step(d, "start_new") == ("refused", "ana withdrew the request: nothing ran")
    assert not any(f"systemctl start -- {NEW_UNIT}" in e.command for e in d.state.swap.audit)


async def test_read_only_refuses_every_action_in_the_core(driven_read_only: Driven) -> None:
    d = driven_read_only
    swap = d.runner.swap
    assert d.state.info.read_only and d.state.swap.setup is not None and d.state.swap.setup.read_only
    for key in ("download", "install", "stop_old", "start_new", "rollback", "benchmark", "swap"):
        assert swap.request(key) == "read-only: this session changes nothing on the host"
        assert swap.preview(key)[1] is None
    assert swap.override("paths", "paths") is not None
    assert not d.state.swap.audit


async def test_confirming_twice_runs_once_and_a_failed_unit_write_leaves_the_old_file(driven: Driven) -> None:
    """One host for the install's facts (a host each cost a minute of CI): a preview confirmed twice
    runs once; its words name the unit file and the backup kept as the host names them (not the
    simulator's sandbox, where its commands write); then an install whose temp file cannot be
    written fails and leaves the installed unit as it was."""
    d = driven
    swap = d.runner.swap
    await _until(lambda: d.state.data("service") is not None, 20, "the service reading")
    why, preview = swap.preview("install")
    assert preview is not None, why
    assert any(line.startswith("sftp put ") for line in preview.lines)
    assert any("systemctl daemon-reload" in line for line in preview.lines)
    assert swap.confirm(preview.id) is None
    assert swap.confirm(preview.id) == "already confirmed: it runs once"
    await swap.wait_idle(30)
    puts = [e for e in d.state.swap.audit if e.command.startswith("sftp put")]
    assert len(puts) == 1
    assert _step(d, "install")[0] == "done", _step(d, "install")
    # The words name the unit file as the host names it, never the simulator's sandbox (the commands do).
    assert _step(d, "install")[1] == f"installed /etc/systemd/system/{NEW_UNIT}; daemon-reload done", _step(d, "install")
    await _run(d, "install")  # again: the file installed first is kept as the backup
    state, detail = _step(d, "install")
    kept = rf"kept /etc/systemd/system/{re.escape(NEW_UNIT)}\.bak-\d{{8}}T\d{{6}}Z"
    assert state == "done" and re.fullmatch(rf"installed /etc/systemd/system/{re.escape(NEW_UNIT)}; {kept}; "
                                            "daemon-reload done", detail), detail
    backup = swap.fast._backup()  # what an in-place rollback restores: the file kept, where it is on the host
    assert backup.startswith(str(d.sim.root) + "/etc/systemd/system/") and Path(backup).is_file(), backup

    target = d.sim.path(f"/etc/systemd/system/{NEW_UNIT}")
    before = target.read_text()
    Path(d.runner.session.profile.unit_draft).write_text(before.replace("--tp 4", "--tp 2"))
    # The temp name cannot be written: a directory of that name is in the way.
    d.sim.path(f"/etc/systemd/system/.{NEW_UNIT}.gpuconsole-new").mkdir()
    await _run(d, "install")
    state, detail = _step(d, "install")
    assert state == "failed" and "is unchanged" in detail, detail
    assert target.read_text() == before


async def test_a_connection_drop_during_the_stop_is_re_read_from_the_host(driven: Driven) -> None:
    d = driven
    swap = d.runner.swap
    await _until(lambda: d.state.data("service") is not None and d.state.data("gpu") is not None, 20, "readings")
    _override_all(d)
    # The drop lands while the stop is in flight: its command is held 2 s on the host before it
    # runs and the connections are cut 0.5 s in (waiting for the step's commands to show and
    # then dropping raced a stop that took 0.1 s: a clean-clone CI run saw it done first).
    transport = d.runner.session.transport
    real_run = transport.run

    async def stop_in_flight(script: str, *args: object, **kwargs: object) -> object:
        if "systemctl stop" not in script:
            return await real_run(script, *args, **kwargs)
        transport.run = real_run
        running = asyncio.ensure_future(real_run("sleep 2; " + script, *args, **kwargs))
        await asyncio.sleep(0.5)
        d.drop_connections()
        return await running

    transport.run = stop_in_flight
    assert swap.request("stop_old") is None
    await swap.wait_idle(90)
    state, detail = _step(d, "stop_old")
    r = await d.runner.session.transport.run(f"systemctl is-active {OLD_UNIT}", timeout=10)
    host_says = r.text.strip()
    assert any(e.note == "connection lost" for e in d.state.swap.audit), list(d.state.swap.audit)
    # Whatever the drop did, the step says what the host says, never an assumption.
    if host_says == "active":
        assert state == "failed" and "still active" in detail, detail
    else:
        assert state == "done" and "drained" in detail, detail


# -- the screen -------------------------------------------------------------------------------------
@contextlib.asynccontextmanager
async def _driven_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **changes: object) -> AsyncIterator[object]:
    demo_env(tmp_path, monkeypatch)
    async with story_host(tmp_path, speed=SPEED) as sim:
        yield demo_app(sim, tmp_path, **changes)


def _palette_titles(app: object) -> list[str]:
    return [c.title for c in app.get_system_commands(app.screen)]  # type: ignore[attr-defined]


async def test_the_plan_screen_confirms_the_exact_commands_and_installs_the_unit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from console.ui.panes.swap import ConfirmScreen, SwapScreen

    async with _driven_app(tmp_path, monkeypatch) as app, \
            app.run_test(size=(130, 45)) as pilot:  # type: ignore[attr-defined]
        state = app.state  # type: ignore[attr-defined]
        await _until(lambda: state.data("service") is not None, 20, "the service reading")
        titles = _palette_titles(app)
        assert "Swap plan" in titles and "Swap: install unit" in titles and "Swap: roll back" in titles
        app.action_swap_plan()  # type: ignore[attr-defined]
        await pilot.pause()
        assert isinstance(app.screen, SwapScreen)  # type: ignore[attr-defined]
        plan = str(app.screen.query_one("#swap-plan").render())  # type: ignore[attr-defined]
        assert "Install the new unit" in plan and "downtime: not started" in plan
        await pilot.press("i")
        await pilot.pause()
        confirm = app.screen  # type: ignore[attr-defined]
        assert isinstance(confirm, ConfirmScreen)
        shown = str(confirm.query_one("#confirm-text").render())
        assert "sftp put " in shown and "systemctl daemon-reload" in shown and "mv -f -- " in shown
        await pilot.press("enter")
        await pilot.press("enter")  # a second press runs nothing more
        await _until(lambda: state.swap.steps["install"].state == "done", 30, "the install")
        assert len([e for e in state.swap.audit if e.command.startswith("sftp put")]) == 1
        assert d_unit_installed(tmp_path)
        await _until(lambda: "✓ Install the new unit" in str(app.screen.query_one("#swap-plan").render()),  # type: ignore[attr-defined]
                     30, "the plan's tick for the install")
        # The palette's report: written next to this session's recording.
        app.action_swap_report()  # type: ignore[attr-defined]
        await _until(lambda: list((tmp_path / "rec").glob("*.report.html")), 20, "the report")
        md = next((tmp_path / "rec").glob("*.report.md")).read_text()
        assert "## Swap plan" in md and "| Install the new unit | done |" in md


def d_unit_installed(tmp_path: Path) -> bool:
    return (tmp_path / "host" / "etc" / "systemd" / "system" / NEW_UNIT).exists()


async def test_read_only_removes_the_swap_actions_from_the_palette(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    async with _driven_app(tmp_path, monkeypatch, read_only=True) as app, \
            app.run_test(size=(120, 40)) as pilot:  # type: ignore[attr-defined]
        titles = _palette_titles(app)
        assert "Swap plan" in titles and "Swap report" in titles
        assert not [t for t in titles if t.startswith("Swap: ")]
        app.action_swap_plan()  # type: ignore[attr-defined]
        await pilot.pause()
        await pilot.press("s")
        await pilot.pause()
        plan = str(app.screen.query_one("#swap-plan").render())  # type: ignore[attr-defined]
        assert "read-only: no action can be run" in plan
        assert app.state.swap.steps["stop_old"].state == "pending"  # type: ignore[attr-defined]


async def test_two_person_rule_over_pairing_the_driver_asks_an_observer_approves(driven_paired: Driven,
                                                                                 tmp_path: Path) -> None:
    """Through the pairing protocol: the attached driver previews (the core answers with the exact
    commands) and confirms; an observer cannot preview, but approves; the core records who did
    what by the names it knows, not by what a client claims."""
    import shutil
    import tempfile

    from console.share.client import RemoteControl, attach
    from console.share.server import ShareServer

    d = driven_paired
    await _until(lambda: d.state.data("service") is not None and d.state.data("gpu") is not None, 20, "readings")
    _override_all(d)
    short = Path(tempfile.mkdtemp(prefix="gc-"))
    server = await ShareServer(d.state, d.runner).start(unix_path=short / "core.sock")
    pumps = []
    try:
        ana = await attach(short / "core.sock", name="ana")
        pumps.append(asyncio.ensure_future(ana.pump()))
        # ben is another person: his own token (issue 21, item 3: one uid on two sockets is one person)
        ben = await attach(short / "core.sock", name="ben", token=server.invite("ben"))
        pumps.append(asyncio.ensure_future(ben.pump()))
        ana_c, ben_c = RemoteControl(ana), RemoteControl(ben)
        await _until(lambda: ana_c.who == "ana" and ben_c.who == "ben", 10, "presence")
        why, preview = await ben_c.swap_preview_async("stop_old")
        assert preview is None and "refused by the core: ben observes" in (why or "")
        why, preview = await ana_c.swap_preview_async("stop_old")
        assert why is None and any(f"systemctl stop -- {OLD_UNIT}" in line for line in preview.lines)
        assert preview.needs_approval
        ana_c.swap_confirm(preview.id)
        await _until(lambda: ben.state.swap.pending_approvals, 20, "the request, in ben's mirror")
        (req,) = ben.state.swap.pending_approvals
        assert req.requested_by == "ana"
        # ana claims to be ben: the core knows she is ana, and its answer says no (the reply is the
        # event to wait on; a sleep stood here, issue 27)
        from console.share import protocol as p

        reply = await ana.request(p.SwapDecide, request=req.request_id, decision="approve")
        assert reply.error is not None and "another person" in reply.error, reply.error
        assert d.state.swap.pending_approvals and d.state.swap.approvals[req.request_id].status == "pending"
        ben_c.swap_approve(req.request_id, "whoever")
        await d.runner.swap.wait_idle(60)
        assert _step(d, "stop_old")[0] == "done", _step(d, "stop_old")
        # ben, invited by the one who serves (issue 34 item 2: the audit names who issued the invite)
        assert d.state.swap.approvals[req.request_id].decided_by.startswith("ben (invited by ")
    finally:
        for task in pumps:
            task.cancel()
        await server.close()
        shutil.rmtree(short, ignore_errors=True)
