"""A restart whose new server runs out of GPU memory as it boots, rolled back: the report says the
swap did not take, in every section that could say otherwise. Before: the headline said
"downtime 10s: drain 1s + boot to ready 9s" (no server was ever ready: the rollback's old server
ended it), the benchmark step stayed "pending", the Path and downtime table measured the rollback's
boot of the old server as the swap's (phases of 22.6 s against a 9.9 s downtime), and the Fit's
"the server logged" read the old server's capacity line, written after the rollback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from console.core.derive.swap_view import whole_second_parts
from tests.kit.downtime import play_path


@pytest.fixture(scope="module")
def rolled_back(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict, Path]:
    _, state, r, out = play_path(tmp_path_factory, "restart", name="swap-report-rollback",
                                 faults={"beside_oom": True})  # the new server's OOM as it boots
    return state, r, out


def test_the_new_server_failed_and_the_rollback_brought_the_old_one_back(rolled_back: tuple[Any, dict, Path]) -> None:
    state, r, _ = rolled_back
    steps = {s["key"]: s for s in r["steps"]}
    assert steps["start_new"]["state"] == "failed" and "out of memory" in steps["start_new"]["detail"], steps
    assert steps["rollback"]["state"] == "done", steps["rollback"]
    assert state.swap.downtime.end_source.endswith("(rollback)"), state.swap.downtime


def test_the_headline_says_it_was_rolled_back_and_names_no_boot_to_ready(rolled_back: tuple[Any, dict, Path]) -> None:
    _, r, out = rolled_back
    md = (out / "swap-report-rollback.md").read_text()
    head = md.split("## Host")[0]
    assert "rolled back (start the new service, wait for ready: failed; " in head.replace("\\", ""), head
    assert "boot to ready" not in head.replace("old server's boot to ready", ""), head
    parts = [p["part"] for p in r["timing"]["downtime_parts"]]
    assert parts[-2:] == ["the new server's boot until it failed", "rollback: the old server's boot to ready"], parts
    assert sum(p["seconds"] for p in r["timing"]["downtime_parts"]) == pytest.approx(r["timing"]["downtime_s"],
                                                                                     abs=0.01)
    assert r["timing"]["time_to_ready_s"] is None and r["timing"]["new_server_state"] == "failed" \
        and r["timing"]["new_server_step"] == "start_new"


def test_the_benchmark_of_the_new_model_is_skipped_with_why_never_pending(rolled_back: tuple[Any, dict, Path]) -> None:
    _, r, _ = rolled_back
    assert not [s["key"] for s in r["steps"] if s["state"] == "pending"], r["steps"]
    bench = next(s for s in r["steps"] if s["key"] == "benchmark")
    assert bench["state"] == "skipped" and "rolled back" in bench["detail"], bench


def test_the_path_table_measures_the_failed_start_and_the_rollback_not_the_old_servers_boot(
        rolled_back: tuple[Any, dict, Path]) -> None:
    state, r, _ = rolled_back
    measured = {x["phase"]: x["measured_s"] for x in r["downtime_paths"]["phases"] if x["measured_s"] is not None}
    assert not {"init", "weights", "kv", "graphs", "ready"} & set(measured), measured  # no boot got ready
    assert {"stop", "failed", "rollback"} <= set(measured), measured
    assert sum(measured.values()) == pytest.approx(r["downtime_s"], abs=0.1), measured
    start, rollback = state.swap.steps["start_new"], state.swap.steps["rollback"]
    assert measured["rollback"] == pytest.approx(state.swap.downtime.ended_at_s - start.ended_at_s, abs=0.01)
    assert rollback.started_at_s >= start.ended_at_s - 1


def test_the_fit_reads_what_the_new_server_logged_and_says_it_ran_out_of_memory(
        rolled_back: tuple[Any, dict, Path]) -> None:
    _, r, out = rolled_back
    fit = r["fit"]
    logged = {row["what"]: row["logged"] for row in fit["rows"]}
    # the new server died before its capacity line; the old server's, after the rollback, is not its
    assert "max running requests" not in logged and "KV tokens" in logged, logged
    assert any("ran out of GPU memory" in n for n in fit["notes"]), fit["notes"]
    new_kv = next(b for b in r["boot"] if b["phase"] == "kv cache")  # the new server's boot, before it died
    assert logged["KV tokens"].replace(",", "") in new_kv["detail"].replace(",", ""), (logged, new_kv)


def test_the_parts_said_in_whole_seconds_add_up_to_the_whole() -> None:
    assert whole_second_parts([("drain", 1.43), ("boot to ready", 5.22)]) == [("drain", 2), ("boot to ready", 5)]
    assert sum(n for _, n in whole_second_parts([("a", 0.73), ("b", 4.2), ("c", 0.49)])) == 5
    assert whole_second_parts([]) == [] and whole_second_parts([("x", 0.4)]) == [("x", 0)]
