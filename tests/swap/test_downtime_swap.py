"""Issue 24 end to end: each path driven by the swap controller on its simulated host (real SSH,
the simulated systemd, SGLang and router), each fault shown with nothing after it run, the
prediction checked against the simulator's own timing (within 10 %), the report per path."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from console.core.derive.swap_observer import log_time
from console.demo.hostsim import story
from console.demo.swap_demo import run_path_demo
from console.domain.swap import fastpath, prediction
from console.domain.swap.actions import ActionError
from console.domain.swap.report import SECTIONS, render_html, render_markdown
from console.ui.panes.service import format_service, with_install_change
from tests.kit.downtime import SimHost as Host
from tests.kit.downtime import play_path, report_headline

SPEED = 16.0


# -- pure pieces ------------------------------------------------------------------------------------
def test_the_beside_unit_gets_its_gpus_and_port_and_nothing_else() -> None:
    text = ('[Service]\nEnvironment="CUDA_VISIBLE_DEVICES=0,1,2,3" "NCCL_P2P_LEVEL=NVL"\n'
            "ExecStart=/py -m sglang.launch_server --model-path /m --port 30000 --tp 4\n")
    out = fastpath.beside_unit_text(text, (4, 5, 6, 7), 30001)
    # The old assignment leaves its line (the other one stays), the new one is the last of [Service]
    # (a later assignment wins: console/domain/analysis/unit_environment.py); nothing else changed.
    assert out == ('[Service]\nEnvironment="NCCL_P2P_LEVEL=NVL"\n'
                   "ExecStart=/py -m sglang.launch_server --model-path /m --port 30001 --tp 4\n"
                   "Environment=CUDA_VISIBLE_DEVICES=4,5,6,7\n")
    bare = fastpath.beside_unit_text("[Service]\nExecStart=/py -m sglang.launch_server --port=1\n", (2,), 9)
    assert "Environment=CUDA_VISIBLE_DEVICES=2\n" in bare and "--port=9" in bare
    with pytest.raises(ActionError, match="no --port"):
        fastpath.beside_unit_text("[Service]\nExecStart=/py -m sglang.launch_server\n", (2,), 9)


def test_curl_commands_are_bounded_and_the_reply_splits() -> None:
    cmd = fastpath.curl_json("http://127.0.0.1:30000/update_weights_from_disk", {"model_path": "/m/x y"}, 60)
    assert cmd.startswith("timeout -k 5 65 curl -sS --max-time 60 ") and "-- http://127.0.0.1:30000/" in cmd
    assert "'{\"model_path\": \"/m/x y\"}'" in cmd
    assert fastpath.split_reply('{"success": true}\n200') == (200, '{"success": true}')
    assert fastpath.split_reply("curl: (7) Failed to connect") == (None, "curl: (7) Failed to connect")
    assert fastpath.clean("Failed.\nRolling back\x1b[31m to original") == "Failed. Rolling back to original"  # the whole CSI goes (issue 34)


def test_dd_rate_and_a_cache_never_slower_than_the_disk() -> None:
    assert prediction.parse_dd_rate("1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.0899 s, 11.9 GB/s") == 11.9
    assert prediction.parse_dd_rate("134217728 bytes (134 MB, 128 MiB) copied, 0.1 s, 1.3 GB/s") == 1.3
    assert prediction.parse_dd_rate("nothing") is None
    fast = prediction.BootSample(100e9, 2.0, 1, 1, 1, 1, 4)  # 50 GB/s from "disk"
    p = prediction.predict_restart([fast], 100e9, prediction.Residency(100 * 10**9, 100 * 10**9, 1))
    assert p.phases["weights"] <= 2.0 + 1e-9


# -- end to end on the simulator --------------------------------------------------------------------
def _report(out: Path, path: str) -> None:
    """The report rendered in every format, each with every section."""
    assert {p.name for p in out.iterdir()} >= {f"swap-report-{path}.{e}" for e in ("md", "html", "json")}
    r = json.loads((out / f"swap-report-{path}.json").read_text())
    md, page = render_markdown(r), render_html(r)
    for section in SECTIONS:
        assert f"## {section}" in md and f"<h2>{section}</h2>" in page


def _steps(state) -> dict[str, str]:  # noqa: ANN001
    """Each step's state; a faster path's step that never ran is pending."""
    from collections import defaultdict

    return defaultdict(lambda: "pending", {k: s.state for k, s in state.swap.steps.items()})


def _played(factory: pytest.TempPathFactory, path: str, *, speed: float = SPEED,
            steps: tuple[str, ...] | None = None, faults: dict[str, Any] | None = None) -> tuple[Path, Any, dict, Path]:
    """One path played once on its simulated host for every test of the module that reads it."""
    played = play_path(factory, path, speed=speed, steps=steps, faults=faults)
    _report(played[3], path)
    return played


@pytest.fixture(scope="module")
def in_place(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, dict, Path]:
    return _played(tmp_path_factory, "in-place")


@pytest.fixture(scope="module")
def beside(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, dict, Path]:
    # The new server stamps its lines in whole seconds (SGLang's default) and writes its ready line
    # 0.7 s into a second: journald's time of it is not its stamp (a real server's line can be so).
    return _played(tmp_path_factory, "beside", faults={"ready_late_in_second": 0.7})


@pytest.fixture(scope="module")
def restart(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, dict, Path]:
    # Speed 8, not 16: the console's own round trips (the stop and start commands over SSH, a GPU
    # reading to see the drain) do not shrink with the simulator's clock, and at 16 they are a tenth
    # of the whole downtime on a loaded machine (the prediction test below compares within 10 %).
    return _played(tmp_path_factory, "restart", speed=8.0,
                   steps=("download", "paths", "install", "preflight", "stop_old", "start_new", "benchmark"))


def test_in_place_end_to_end_and_its_prediction(in_place: tuple[Path, Any, dict, Path]) -> None:
    rec, state, r, out = in_place
    assert _steps(state)["in_place"] == "done"
    assert r["swap_path"] == "in-place"
    d = r["downtime_paths"]
    (pause,) = [x for x in d["phases"] if x["phase"] == "pause"]
    # The prediction (from the host's recorded boot) against the simulator's own timing: within 10 %.
    assert pause["measured_s"] == pytest.approx(pause["predicted_s"], rel=0.10)
    assert r["downtime_s"] == pytest.approx(pause["measured_s"], rel=0.01)
    assert r["predicted_downtime_s"] == pause["predicted_s"]
    assert d["reply"]["success"] is True and d["paused_requests"] is not None
    assert any("beside: no free GPUs" in x for x in d["not_taken"])
    assert "Path and downtime" in (out / "swap-report-in-place.md").read_text()


# -- issue 33: each path's report says section by section what the host did -------------------------
def _head(out: Path, path: str) -> str:
    return (out / f"swap-report-{path}.md").read_text().split("## Host")[0]


def test_in_place_names_its_pause_not_a_boot(in_place: tuple[Path, Any, dict, Path]) -> None:
    _, _, r, out = in_place
    parts = [p["part"] for p in r["timing"]["downtime_parts"]]
    assert parts == ["in-place pause (requests held while the weights load)"]
    head = _head(out, "in-place")
    assert "boot to ready" not in head and "in-place pause" in head


def test_in_place_time_to_ready_is_the_servers_own_return_with_the_new_weights(
        in_place: tuple[Path, Any, dict, Path]) -> None:
    _, _, r, out = in_place
    t = r["timing"]
    assert t["time_to_ready_s"] == pytest.approx(r["downtime_s"], abs=0.5) and t["time_to_ready_s"] > 0
    assert "time to ready: –" not in _head(out, "in-place") and "pending" not in _head(out, "in-place")


def test_in_place_stop_and_start_are_skipped_with_the_reason(in_place: tuple[Path, Any, dict, Path]) -> None:
    _, state, r, _ = in_place
    steps = {s["key"]: s for s in r["steps"]}
    for key in ("stop_old", "start_new"):
        assert steps[key]["state"] == "skipped" and steps[key]["detail"].startswith("in place: ")
    assert steps["verify"]["state"] == "skipped" and "not asked for" in steps["verify"]["detail"]
    assert "pending" not in {s.state for s in state.swap.steps.values()}


def test_in_place_timeline_is_the_update_not_the_old_servers_first_boot(in_place: tuple[Path, Any, dict, Path]) -> None:
    _, _, r, _ = in_place
    assert [b["phase"] for b in r["boot"]] == ["update begin", "update end"]
    assert r["boot"][-1]["seconds"] == pytest.approx(r["downtime_s"], abs=0.5)
    assert "no server booted" in r["boot_note"]


def test_in_place_gpu_before_and_the_old_directory_are_known(in_place: tuple[Path, Any, dict, Path]) -> None:
    _, _, r, out = in_place
    assert r["gpu"]["before"] and all(isinstance(g["used_mib"], int) for g in r["gpu"]["before"])
    on = r["old_new"]
    assert on["old_model_dir"] and on["old_model_dir"] != on["model_dir"]
    assert on["old_model_dir"].endswith("Qwen3.5-122B-A10B") and on["model_dir"].endswith("-ft")
    first = _head(out, "in-place").splitlines()[2]
    old, new = first.split(" → ")
    assert old != new


def test_in_place_on_one_unit_the_diff_pane_shows_the_installs_change_as_the_report(
        in_place: tuple[Path, Any, dict, Path]) -> None:
    """The live diff pane read the installed unit against itself (0 changes) while the gate and the
    report said the install's change: the pane shows that change too, and says what it compares."""
    _, state, _, _ = in_place
    reading = state.reading("service")
    assert reading.data.change_count == 0  # the unit read against itself, as the host has it now
    shown = with_install_change(reading, state.swap.install_diff())
    text = format_service(shown, 120).plain
    assert f"{shown.data.change_count} changes" in text, text
    assert shown.data.change_count == state.swap.install_diff()["count"] >= 2
    assert "--model-path" in text and "--served-model-name" in text and "no differences" not in text, text


def test_in_place_on_one_unit_the_reports_diff_is_the_installs_change(in_place: tuple[Path, Any, dict, Path]) -> None:
    """In place the new unit is the old one: the install rewrites its file, so a diff read after it
    compared the file with itself and the report's Diff was empty. Its old side is the unit as it
    stood before the install, kept by the observer."""
    _, state, r, out = in_place
    changes = {c["flag"]: c for c in r["diff"]["changes"]}
    assert "--model-path" in changes and "--served-model-name" in changes, changes
    model = changes["--model-path"]
    assert model["change"] == "changed" and model["old"].endswith("/Qwen3.5-122B-A10B"), model
    assert model["new"].endswith("/Qwen3.5-122B-A10B-ft"), model
    assert changes["--served-model-name"]["new"] == "qwen3.5-122b-ft"
    section = (out / "swap-report-in-place.md").read_text().split("## Diff")[1].split("## ")[0]
    assert re.search(r"^\| \\?--model-path \| changed \| \S*/Qwen3\.5-122B-A10B \| \S*/Qwen3\.5-122B-A10B-ft \|",
                     section, re.M), section
    assert state.swap.install_diff()["count"] >= len(changes) >= 2


def test_in_place_report_names_the_hosts_paths_not_the_simulators_sandbox(
        in_place: tuple[Path, Any, dict, Path]) -> None:
    """The demo's simulated host keeps its files under a sandbox directory of this machine: the
    report's words (the model directories, the download, the gate's forbidden prefix, the lints, the
    diff) name a path as the host names it; the audit keeps the exact commands the console ran."""
    _, _, r, out = in_place
    root = str(out.parent / "w" / "host")  # the simulated host's / (console.demo.swap_demo.simulated_host)
    words, audit = (out / "swap-report-in-place.md").read_text().split("## Audit log")
    assert root in audit  # the commands as they ran (this is the sandbox the words must not show)
    assert root not in words, [ln for ln in words.splitlines() if root in ln]
    on = r["old_new"]
    assert (on["old_model_dir"], on["model_dir"]) == ("/shared/models/Qwen3.5-122B-A10B",
                                                      "/shared/models/Qwen3.5-122B-A10B-ft"), on
    assert r["download"]["model_dir"] == "/shared/models/Qwen3.5-122B-A10B-ft"
    (paths,) = [g for g in r["gate"] if g["check"] == "paths"]
    assert paths["reason"].endswith("none under /data"), paths
    assert any(lint["message"].endswith("exists and is outside /data") for lint in r["diff"]["lints"]), r["diff"]


def test_the_live_gate_and_the_diffs_lints_name_the_hosts_paths_not_the_sandbox(
        in_place: tuple[Path, Any, dict, Path]) -> None:
    """Named at their source, so the plan pane's gate and the diff pane's lints say it too (not only
    the report): the forbidden prefix and the model's directory as the simulated host names them."""
    _, state, _, out = in_place
    root = str(out.parent / "w" / "host")
    gate = {c.name: c for c in state.swap.gate}
    assert gate["paths"].reason.endswith("none under /data"), gate["paths"]
    lints = [x.message for x in state.data("service").lints]
    assert not [m for m in lints if root in m], lints
    assert "/shared/models/Qwen3.5-122B-A10B-ft exists and is outside /data" in lints, lints


def test_in_place_benchmark_before_is_the_old_weights_run(in_place: tuple[Path, Any, dict, Path]) -> None:
    _, state, r, _ = in_place
    began = state.swap.steps["in_place"].started_at_s
    before = r["bench"]["before"]
    assert before is not None and r["bench"]["after"]
    earlier = [x for x in state.bench.history if float(x["timestamp"]) < began]
    assert before["output_throughput"] == earlier[-1]["output_throughput"]
    assert "no earlier run" not in state.swap.steps["benchmark"].detail


def test_beside_downtime_is_none_and_its_time_to_ready_is_the_new_servers_boot(
        beside: tuple[Path, Any, dict, Path]) -> None:
    _, state, r, out = beside
    head = _head(out, "beside")
    assert "boot to ready" not in head and "traffic moved to the new server before the old one stopped" in head
    assert r["timing"]["downtime_parts"] == []
    ttr = r["timing"]["time_to_ready_s"]
    step = state.swap.steps["beside"]
    assert ttr is not None and 0 < ttr <= step.duration_s + 0.5


def test_beside_and_its_time_to_ready_end_at_journalds_time_of_the_ready_line_not_its_whole_second_stamp(
        beside: tuple[Path, Any, dict, Path]) -> None:
    """The new server's ready line stamped T (whole seconds) and written at T+0.7: the beside step
    and the time to ready end at journald's time of the line, T+0.7, not at T."""
    _, state, r, out = beside
    host = Host("beside", out.parent / "w", r["old_new"]["old_unit"], r["old_new"]["new_unit"])
    stamp = log_time(host.logged(host.new, "The server is fired up")[-1])
    written = host.ready()  # journald's time of the line
    assert written - stamp >= 0.6, (stamp, written)
    step = state.swap.steps["beside"]
    assert step.ended_at_s == pytest.approx(written, abs=0.001)
    (start,) = [e for e in state.swap.audit if e.action == "beside" and " start -- " in e.command]
    assert r["timing"]["time_to_ready_s"] == pytest.approx(written - (start.at_s - start.duration_s), abs=0.01)
    assert r["timing"]["time_to_ready_to"] == "the new server ready"


def test_beside_before_is_the_old_models_run_and_after_the_new_ones(beside: tuple[Path, Any, dict, Path]) -> None:
    _, _, r, _ = beside
    b = r["bench"]
    assert b["before"]["model"] == "qwen3.5-397b" and [x["model"] for x in b["after"]] == ["qwen3.5-122b"]
    assert b["compared"] is not None and b["note"] is None


def test_beside_the_consoles_own_stop_and_start_are_never_written_as_outside(
        beside: tuple[Path, Any, dict, Path]) -> None:
    _, state, r, _ = beside
    assert not any(s.observed for s in state.swap.steps.values()), [(s.key, s.detail) for s in state.swap.steps.values() if s.observed]
    assert all("outside the console" not in s["detail"] for s in r["steps"])
    steps = {s["key"]: s for s in r["steps"]}
    assert steps["stop_old"]["state"] == steps["start_new"]["state"] == "skipped"


async def test_in_place_reply_failed_leaves_the_old_weights_serving(tmp_path: Path) -> None:
    _, state = await run_path_demo(tmp_path / "out", "in-place", speed=SPEED, work=tmp_path / "w", quiet=True,
                                   faults={"update_fail": True}, rollback=False)
    step = state.swap.steps["in_place"]
    assert step.state == "failed" and "the reply says it failed" in step.detail
    assert "old weights keep serving" in step.detail and "nothing after this step runs" in step.detail
    assert _steps(state)["benchmark"] == "pending"
    server = state.data("server")
    assert server.status == "ready"


async def test_in_place_server_dies_offers_rollback_by_restart(tmp_path: Path) -> None:
    _, state = await run_path_demo(tmp_path / "out", "in-place", speed=SPEED, work=tmp_path / "w", quiet=True,
                                   faults={"update_die": True})
    step = state.swap.steps["in_place"]
    assert step.state == "failed" and "the server died during the update" in step.detail
    assert "rollback by restart" in step.detail
    rb = state.swap.steps["rollback"]
    assert rb.state == "done" and "the previous unit file, the old weights" in rb.detail
    # rolled back: the new model's benchmark never runs, said so (it stayed "pending" before)
    bench = state.swap.steps["benchmark"]
    assert bench.state == "skipped" and "rolled back" in bench.detail, bench
    assert any(c.startswith("cp -p -- ") and ".bak-" in c for c in rb.commands)


def test_beside_the_plan_the_gate_and_the_fit_say_one_kv_figure(beside: tuple[Path, Any, dict, Path]) -> None:
    """The beside path's fit (the new model on the free GPUs) counts the weights the gate's fit counts:
    one KV figure in the plan, the gate and the report's Fit (972,480 in the plan against 972,224 in the
    gate before: the plan counted the shards' bytes, the gate the download's total)."""
    _, _, r, _ = beside
    plan = next(s for s in r["steps"] if s["key"] == "paths")["detail"]
    said = {int(m.replace(",", "")) for m in re.findall(r"([\d,]+) KV tokens", plan)}
    gate = next(g for g in r["gate"] if g["check"] == "fit")["reason"]
    fit = next(row for row in r["fit"]["rows"] if row["what"] == "KV tokens")
    assert said and said == {int(re.search(r"([\d,]+) KV tokens", gate).group(1).replace(",", ""))} \
        == {int(fit["predicted"].replace(",", ""))}, (plan, gate, fit)


def test_beside_end_to_end_downtime_zero(beside: tuple[Path, Any, dict, Path]) -> None:
    rec, state, r, _ = beside
    assert _steps(state)["beside"] == "done" and _steps(state)["switch_traffic"] == "done"
    gpu = state.data("gpu")
    assert len(gpu.gpus) == 8
    assert {g.index for g in gpu.gpus if g.processes} == {4, 5, 6, 7}  # the old server's 0-3 are released
    assert r["swap_path"] == "beside" and r["downtime_s"] == 0.0 and r["predicted_downtime_s"] == 0.0
    # predicted against measured, the measured a figure of the host's (the observer's clock, from the
    # router's replies before the old server's stop), never a 0 put in for a missing one
    (row,) = r["downtime_paths"]["phases"]
    assert row["predicted_s"] == row["measured_s"] == 0.0
    d = state.swap.downtime
    assert d is not None and d.start_source.startswith("beside") and d.ended_at_s == d.started_at_s
    audit = " ".join(a["command"] for a in r["audit"])
    assert "/add_worker?url=http://127.0.0.1:" in audit and "/remove_worker?url=" in audit


async def test_beside_router_refusing_the_worker_stops_the_plan(tmp_path: Path) -> None:
    _, state = await run_path_demo(tmp_path / "out", "beside", speed=SPEED, work=tmp_path / "w", quiet=True,
                                   faults={"router_refuse": True}, rollback=False)
    assert "switch_traffic" in state.swap.steps, {k: (s.state, s.detail) for k, s in state.swap.steps.items()}
    step = state.swap.steps["switch_traffic"]
    assert step.state == "failed" and "the router refused the new worker" in step.detail
    assert state.data("gpu") is not None and any(g.processes for g in state.data("gpu").gpus if g.index < 4)


async def test_beside_server_oom_stops_the_plan_the_old_serves(tmp_path: Path) -> None:
    _, state = await run_path_demo(tmp_path / "out", "beside", speed=SPEED, work=tmp_path / "w", quiet=True,
                                   faults={"beside_oom": True})
    step = state.swap.steps["beside"]
    assert step.state == "failed" and "beside the old server" in step.detail and "downtime 0" in step.detail
    assert _steps(state)["switch_traffic"] == "pending"
    rb = state.swap.steps["rollback"]
    assert rb.state == "done" and "kept serving throughout" in rb.detail
    bench = state.swap.steps["benchmark"]
    assert bench.state == "skipped" and "rolled back" in bench.detail, bench


def test_restart_prediction_within_ten_percent_of_the_simulator(restart: tuple[Path, Any, dict, Path]) -> None:
    _, state, r, _ = restart
    assert _steps(state)["start_new"] == "done"
    d = r["downtime_paths"]
    weights = next(x for x in d["phases"] if x["phase"] == "weights")
    assert weights["measured_s"] == pytest.approx(weights["predicted_s"], rel=0.10)
    # The whole downtime predicted (its stop and drain, the unit's start, the boot) against the
    # downtime the observer measured on the simulated host: within 10 %.
    assert [x["phase"] for x in d["phases"] if x["phase"] != "gap"][:2] == ["stop", "start"]
    assert r["downtime_s"] == pytest.approx(r["predicted_downtime_s"], rel=0.10), d["phases"]
    # the measured phases are the downtime's, in parts: they add up to it within 5 % (the log's own
    # clock against the observer's dates; before, the last request → stop gap was left out)
    assert sum(x["measured_s"] for x in d["phases"]) == pytest.approx(r["downtime_s"], rel=0.05), d["phases"]
    assert "from 1 earlier boot on this host" in (d["prediction_text"] or "")
    assert "0 % in page cache" in d["prediction_text"]


async def test_prewarm_filling_memory_stops_and_nothing_after_runs(tmp_path: Path) -> None:
    _, state = await run_path_demo(tmp_path / "out", "restart", speed=SPEED, work=tmp_path / "w", quiet=True,
                                   faults={"memory_pressure": 1.0, "prewarm_margin_gib": 1400},  # ~1486 GiB free at the start
                                   steps=("download", "paths", "prewarm", "install", "stop_old"))
    step = state.swap.steps["prewarm"]
    assert step.state == "failed" and "MemAvailable" in step.detail and "nothing after it runs" in step.detail
    assert _steps(state)["stop_old"] == "pending" and _steps(state)["install"] == "pending"
    pw = state.swap.paths["prewarm"].data()
    assert 0 < pw["done_bytes"] < pw["total_bytes"]


# -- issue 33, "Done when": each path's report, section by section, against what the simulated host
# recorded itself (its journal, the servers' own lifecycle files, the unit files, the console's
# bench and audit files) -----------------------------------------------------------------------------
PATHS = ("in-place", "beside", "restart")
@pytest.fixture(params=PATHS)
def lived(request: pytest.FixtureRequest) -> tuple[Host, Any, dict, str]:
    rec, state, r, out = request.getfixturevalue(request.param.replace("-", "_"))
    on = r["old_new"]
    host = Host(request.param, out.parent / "w", on["old_unit"], on["new_unit"])
    return host, state, r, (out / f"swap-report-{request.param}.md").read_text()


def test_each_paths_headline_says_what_the_host_did(lived: tuple[Host, Any, dict, str]) -> None:
    host, _, r, md = lived
    head = report_headline(md)
    units = host.work / "host" / "etc" / "systemd" / "system"
    old_file = next(units.glob(f"{host.old}.bak-*")) if host.path == "in-place" else units / host.old
    old, new = host.served_name(old_file), host.served_name(units / host.new)
    # in place the running server keeps the name it was started with until a restart
    assert head[0] == f"{old} → {new}" + (f" (still served as {old} until restart)" if host.path == "in-place"
                                          else ""), head
    downtime = {"in-place": "in-place pause (requests held while the weights load)",
                "beside": "none, traffic moved to the new server before the old one stopped",
                "restart": "boot to ready"}[host.path]
    assert head[1].startswith("downtime ") and downtime in head[1], head
    assert ("boot to ready" in head[1]) == (host.path == "restart")
    assert head[2].startswith("time to ready ") and "–" not in head[2].split("(")[0], head
    assert re.match(r"output tok/s \d+ before → \d+ after \(c=4 · 256/128\)", head[3]), head


def test_each_paths_steps_are_the_ones_the_host_lived_in_its_order(lived: tuple[Host, Any, dict, str]) -> None:
    host, state, r, _ = lived
    steps = {s["key"]: s for s in r["steps"]}
    assert all(s["state"] in ("done", "skipped") for s in r["steps"]), [(s["key"], s["state"]) for s in r["steps"]]
    assert all(s["detail"] for s in r["steps"] if s["state"] == "skipped")
    assert all(s["who"] == "ana" for s in r["steps"] if s["state"] == "done")
    assert not any(s.observed for s in state.swap.steps.values()), [(s.key, s.detail) for s in state.swap.steps.values() if s.observed]
    own = {"in-place": ("in_place",), "beside": ("beside", "switch_traffic"), "restart": ("stop_old", "start_new")}
    assert all(steps[k]["state"] == "done" for k in own[host.path])
    s = state.swap.steps
    if host.path == "restart":
        assert s["stop_old"].started_at_s <= host.systemd(host.old, "Stopping") <= s["stop_old"].ended_at_s
        assert s["start_new"].started_at_s <= host.systemd(host.new, "Started") <= s["start_new"].ended_at_s
    elif host.path == "beside":
        assert s["beside"].started_at_s <= host.systemd(host.new, "Started") <= s["beside"].ended_at_s
        assert s["switch_traffic"].started_at_s <= host.systemd(host.old, "Stopping") <= s["switch_traffic"].ended_at_s
    else:
        assert s["in_place"].started_at_s <= host.began() <= host.ready() <= s["in_place"].ended_at_s + 1
    # the report's order: a step that began later on the host is never listed before one that began earlier
    ran = [st.started_at_s for st in state.swap.ordered_steps() if st.state == "done" and st.started_at_s]
    assert ran == sorted(ran), [(st.key, st.started_at_s) for st in state.swap.ordered_steps()]


def test_each_paths_downtime_and_its_parts_are_the_hosts(lived: tuple[Host, Any, dict, str]) -> None:
    host, state, r, _ = lived
    d = state.swap.downtime
    t = r["timing"]
    if host.path == "beside":
        assert r["downtime_s"] == 0.0 and t["downtime_parts"] == []
        # the host's own order says so: the new server was ready before the old one was stopped
        assert host.ready() < host.systemd(host.old, "Stopping")
        return
    assert sum(p["seconds"] for p in t["downtime_parts"]) == pytest.approx(r["downtime_s"], abs=0.05)
    assert d.ended_at_s == pytest.approx(host.ready(), abs=0.01)
    if host.path == "in-place":
        assert d.started_at_s == pytest.approx(host.began(), abs=0.01)
    else:  # from the old server's last request or the stop command, before systemd stopped it
        assert d.started_at_s <= host.began() + 0.01 and host.began() - d.started_at_s < 5


def test_each_paths_time_to_ready_is_the_new_servers_own(lived: tuple[Host, Any, dict, str]) -> None:
    host, _, r, _ = lived
    ttr = r["timing"]["time_to_ready_s"]
    if host.path == "in-place":
        assert ttr == pytest.approx(host.ready() - host.began(), abs=0.05)
    else:  # from the start command (issued just before systemd's "Started") to the server's ready line
        booted = host.ready() - host.systemd(host.new, "Started")
        assert booted - 0.05 <= ttr <= booted + 2.0, (ttr, booted)


def test_each_paths_gpu_memory_before_after_and_freed_are_the_servers_the_host_ran(
        lived: tuple[Host, Any, dict, str]) -> None:
    host, state, r, _ = lived
    g = r["gpu"]

    def held(rows: list[dict]) -> dict[int, dict]:
        return {x["gpu"]: x for x in rows if x["used_mib"] > 1024}

    def procs(rows: dict[int, dict]) -> set[str]:
        return {p for x in rows.values() for p in x["processes"]}

    old_base = story.NEW_PID_BASE if host.path == "in-place" else story.OLD_PID_BASE  # in place: one unit
    old_gpus, new_gpus = host.life(host.old)["gpus"], host.life(host.new)["gpus"]
    before, after = held(g["before"]), held(g["after"])
    assert sorted(before) == old_gpus and sorted(after) == new_gpus, g
    assert procs(before) == {f"{old_base + rank} sglang::scheduler_TP{rank}" for rank in range(len(old_gpus))}
    assert procs(after) == {f"{story.NEW_PID_BASE + rank} sglang::scheduler_TP{rank}" for rank in range(len(new_gpus))}
    freed = {x["gpu"]: x["mib"] for x in g["freed"]}
    if host.path == "in-place":
        assert freed == {} and g["freed_by"] == "the swap"  # nothing was stopped: the weights were replaced
        return
    then = {x["gpu"]: x["used_mib"] for x in (g["stopped"] or g["after"])}
    assert freed == {i: before[i]["used_mib"] - then[i] for i in old_gpus}
    if host.path == "restart":
        assert g["freed_by"] == "the stop" and all(x["used_mib"] <= 1024 for x in g["stopped"])
        said = state.swap.steps["stop_old"].detail  # the stop step's own words read the same fact
        assert all(f"GPU {i} {mib:,} MiB" in said for i, mib in freed.items()), said


def test_each_paths_boot_timeline_is_the_servers_own_lines(lived: tuple[Host, Any, dict, str]) -> None:
    host, _, r, md = lived
    rows = {b["phase"]: b for b in r["boot"]}
    if host.path == "in-place":
        assert list(rows) == ["update begin", "update end"] and "no server booted" in r["boot_note"]
        assert "| phase | at | s since the update's begin | detail |" in md  # no launch in place
        assert rows["update end"]["seconds"] == pytest.approx(host.ready() - host.began(), abs=0.05)
        assert rows["update begin"]["clock"] == "journald" and "journald's time" in md
        return
    assert rows["launch"]["stamp"] == host.logged(host.new, "server_args=")[-1]
    assert rows["ready"]["stamp"] == host.logged(host.new, "The server is fired up")[-1]
    # the new server's boot: its launch line written (journald's time) after systemd started it (its
    # whole-second stamp may read earlier)
    assert host.logged_at(host.new, "server_args=")[-1] >= host.systemd(host.new, "Started") - 0.01
    assert rows["launch"]["at_s"] == pytest.approx(host.logged_at(host.new, "server_args=")[-1], abs=1e-3)
    assert rows["launch"]["clock"] == "journald"
    assert log_time(rows["launch"]["stamp"]) >= host.systemd(host.new, "Started") - 1.0


def test_each_paths_benchmarks_before_and_after_are_the_runs_either_side_of_the_swap(
        lived: tuple[Host, Any, dict, str]) -> None:
    host, _, r, _ = lived
    b = r["bench"]
    assert b["before"] is not None and b["after"] and b["note"] is None
    assert host.bench_time(b["before"]) < host.began() and b["before"]["model"] == r["old_new"]["old_model"]
    assert all(host.bench_time(x) >= host.ready() for x in b["after"])
    if host.path != "in-place":  # in place the server keeps the name it was started with
        assert {x["model"] for x in b["after"]} == {r["old_new"]["new_model"]}
    assert b["compared"]["before"]["concurrency"] == b["compared"]["after"]["concurrency"]


def test_each_paths_diff_lists_every_change_the_gate_counted(lived: tuple[Host, Any, dict, str]) -> None:
    _, _, r, md = lived
    (gate,) = [g for g in r["gate"] if g["check"] == "diff"]
    counted = int(re.match(r"(\d+) change", gate["reason"]).group(1))
    d = r["diff"]
    assert len(d["changes"]) + len(d["env_changes"]) + len(d["unit_changes"]) == d["count"] == counted, (gate, d)
    section = md.split("## Diff")[1].split("## ")[0]
    words = f"{counted} change" + ("" if counted == 1 else "s")
    assert f"{words}: flags, environment and unit directives" in section, section
    assert all(f"[{u['section']}] {u['directive']}".replace("[", "\\[").replace("]", "\\]") in section
               for u in d["unit_changes"]), section


def test_in_place_says_the_server_still_answers_by_the_name_it_was_started_with(
        in_place: tuple[Path, Any, dict, Path]) -> None:
    _, _, r, out = in_place
    on = r["old_new"]
    assert on["served_as"] == on["old_model"] != on["new_model"], on
    # what the server answered as after the update: the benchmark's runs name the model it served
    assert {x["model"] for x in r["bench"]["after"]} == {on["served_as"]}
    md = (out / "swap-report-in-place.md").read_text()
    assert f"still served as {on['served_as']} until restart" in md.split("## Diff")[1].split("## Fit")[0]
    assert f"still served as {on['served_as']} until restart" in md.split("## Swap plan")[0]


def test_each_paths_audit_dates_each_command_when_it_was_sent(lived: tuple[Host, Any, dict, str]) -> None:
    host, _, r, md = lived
    written = [json.loads(line) for line in (host.work / "audit.jsonl").read_text().splitlines()]
    assert len(written) == len(r["audit"])
    for a, w in zip(r["audit"], written, strict=True):
        took = w.get("duration_s")
        sent = w["at_s"] - took if took is not None else w["at_s"]
        assert a["at"] == time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(sent)), (a, w)
        assert a["answered_after_s"] == took and a["answered_at"] == time.strftime(
            "%Y-%m-%d %H:%M:%S", time.localtime(w["at_s"])), (a, w)
    audit = md.split("## Audit log")[1]
    assert "s later\\)" in audit, audit
    if host.path == "in-place":  # the update was sent as the pause began, answered once the weights were in
        (update,) = [a for a in r["audit"] if a["action"] == "in_place"]
        assert log_time(update["at"]) <= host.began() and log_time(update["answered_at"]) >= int(host.ready())
        assert update["answered_after_s"] >= host.ready() - host.began() - 0.05


def test_each_paths_audit_says_who_did_what_as_the_host_saw_it(lived: tuple[Host, Any, dict, str]) -> None:
    host, _, r, _ = lived
    audit = r["audit"]
    written = [json.loads(line) for line in (host.work / "audit.jsonl").read_text().splitlines()]
    assert [(a["action"], a["command"]) for a in audit] == [(a["action"], a["command"]) for a in written]
    assert {a["who"] for a in audit} == {"ana"} and r["approvals"] == []
    changed = [a for a in audit if a["action"] in ("stop_old", "start_new", "in_place", "beside", "switch_traffic")]
    said = " ".join(a["command"] for a in changed)
    if host.path == "in-place":
        assert "update_weights_from_disk" in said and "systemctl stop" not in said and "systemctl start" not in said
    else:
        assert f"systemctl start -- {host.new}" in said and f"systemctl stop -- {host.old}" in said
