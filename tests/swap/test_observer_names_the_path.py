"""Issue 24 item 5: the swap-as-lived observer names the path a host took from the host's facts
alone (its log lines, its units' states, ports and GPUs), and the fleet's rows show it."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from console.domain.analysis.service_report import side_from_text
from console.core.state import HostState, LogAppended, ReadingChanged
from console.model import Reading
from console.host.parsers.sglang_log import LogEvent
from console.domain.swap.downtime_report import section
from console.core.derive.swap_observer import SwapObserver, path_summary

T0 = dt.datetime(2026, 12, 1, 10, 0, 0).timestamp()

UNIT = """[Service]
Environment="CUDA_VISIBLE_DEVICES={gpus}"
ExecStart=/opt/sglang/.venv/bin/python -m sglang.launch_server --model-path /m/{model} --tp 4 --port {port}
"""


def _side(name: str, active: str, *, port: int = 30000, gpus: str = "0,1,2,3", model: str = "a") -> Any:
    side = side_from_text(name, UNIT.format(gpus=gpus, port=port, model=model))
    return replace(side, active_state=active)


class Host:
    """A HostState and its observer; every event goes through both, as the live core does."""

    def __init__(self) -> None:
        self.state = HostState("h")
        self.observer = SwapObserver(self.state)

    def feed(self, event: Any) -> None:
        self.state.apply(event)
        for derived in self.observer.see(event):
            if self.observer.still_valid(derived):
                self.state.apply(derived)

    def service(self, at: float, old: Any, new: Any) -> None:
        report = SimpleNamespace(old=old, new=new)
        self.feed(ReadingChanged("h", "service", Reading("service", report, ok_at_s=at)))

    def log(self, at: float, text: str, kind: str = "line") -> None:
        ts = dt.datetime.fromtimestamp(at).isoformat(sep=" ", timespec="milliseconds")
        self.feed(LogAppended("h", (LogEvent(kind, text, ts=ts),)))


def test_an_in_place_update_is_named_from_the_servers_log_lines_and_its_pause_is_the_downtime() -> None:
    h = Host()
    h.service(T0, _side("old.service", "active"), _side("new.service", "inactive"))
    h.log(T0 + 1, "Decode batch. #running-req: 3", kind="decode")
    for _rank in range(4):  # every TP rank writes the line (fake_sglang, as SGLang does)
        h.log(T0 + 10, "Update engine weights online from disk begin. avail mem=4.26 GB")
    assert h.state.swap.steps["in_place"].state == "running"
    assert path_summary(h.state) == ("in-place", None, False)
    for rank in range(4):
        h.log(T0 + 24 + rank * 0.5, "Update weights end.")
    step = h.state.swap.steps["in_place"]
    assert step.state == "done" and step.observed
    d = h.state.swap.downtime
    assert d is not None and d.started_at_s == T0 + 10 and abs(d.ended_at_s - (T0 + 25.5)) < 0.01
    assert path_summary(h.state)[0] == "in-place" and abs(path_summary(h.state)[1] - 15.5) < 0.01
    r = section(h.state, h.state.swap.downtime_s(T0 + 100))
    assert r["swap_path"] == "in-place" and abs(r["downtime_s"] - 15.5) < 0.01
    assert "stop_old" not in h.state.swap.steps or h.state.swap.steps["stop_old"].state == "pending"


def test_a_failed_in_place_update_is_failed_not_a_path_taken() -> None:
    h = Host()
    h.log(T0 + 10, "Update engine weights online from disk begin. avail mem=4.26 GB")
    h.log(T0 + 14, "Failed to update weights: Unexpected key(s) in the checkpoint. Rolling back to original weights.")
    assert h.state.swap.steps["in_place"].state == "failed"
    assert path_summary(h.state) is None


def test_a_beside_start_then_the_old_stop_is_the_beside_path_with_no_downtime() -> None:
    h = Host()
    old_on = _side("old.service", "active")
    h.service(T0, old_on, _side("new.service", "inactive", port=30001, gpus="4,5,6,7"))
    h.log(T0 + 5, "Decode batch. #running-req: 3", kind="decode")
    h.service(T0 + 15, old_on, _side("new.service", "active", port=30001, gpus="4,5,6,7"))
    assert h.state.swap.steps["beside"].state == "running"
    assert "GPUs 4,5,6,7" in h.state.swap.steps["beside"].detail
    assert path_summary(h.state) == ("beside", None, False)
    h.service(T0 + 90, replace(old_on, active_state="inactive"),
              _side("new.service", "active", port=30001, gpus="4,5,6,7"))
    assert h.state.swap.steps["switch_traffic"].state == "done"
    d = h.state.swap.downtime  # the old one stopped after the new one served: an instant, as the console's
    assert d is not None and d.started_at_s == d.ended_at_s == T0 + 90 and "outside the console" in d.start_source
    assert path_summary(h.state) == ("beside", 0.0, True)
    ep = h.state.swap.paths["endpoint"].data()
    assert (ep["from_port"], ep["to_port"]) == (30000, 30001)
    r = section(h.state, h.state.swap.downtime_s(T0 + 100))
    assert r["swap_path"] == "beside" and r["downtime_s"] == 0.0


def test_a_stop_then_a_start_is_still_a_restart_with_its_downtime() -> None:
    h = Host()
    old_on = _side("old.service", "active")
    h.service(T0, old_on, _side("new.service", "inactive"))
    h.log(T0 + 5, "Decode batch. #running-req: 3", kind="decode")
    h.service(T0 + 15, replace(old_on, active_state="inactive"), _side("new.service", "inactive"))
    assert path_summary(h.state, T0 + 20)[0] == "restart"
    assert path_summary(h.state, T0 + 20)[2] is False
    assert "beside" not in h.state.swap.steps and "plan" not in h.state.swap.paths


def test_two_servers_on_the_same_port_and_gpus_are_not_beside() -> None:
    h = Host()
    old_on = _side("old.service", "active")
    h.service(T0, old_on, _side("new.service", "inactive"))
    h.service(T0 + 15, old_on, _side("new.service", "active"))
    assert "beside" not in h.state.swap.steps


def test_the_fleet_cell_names_the_path_and_its_downtime() -> None:
    from console.domain.fleet.rows import fleet_row, format_cells

    h = Host()
    h.log(T0 + 10, "Update engine weights online from disk begin. avail mem=4.26 GB")
    h.log(T0 + 25, "Update weights end.")
    assert format_cells(fleet_row(h.state, T0 + 30))["swap"] == "in place 15s"
    assert format_cells(fleet_row(Host().state, T0))["swap"] == "–"
    h.log(T0 + 40, "Update engine weights online from disk begin. avail mem=4.26 GB")  # a second update
    assert format_cells(fleet_row(h.state, T0 + 41))["swap"] == "in place…"
    h.log(T0 + 49, "Update weights end.")
    assert format_cells(fleet_row(h.state, T0 + 50))["swap"] == "in place 9s"


# -- the fleet demo, end to end (the simulator's speed factor) --------------------------------------
async def test_the_fleet_demos_hosts_swap_by_more_than_one_path_and_their_rows_say_which(
        monkeypatch: Any) -> None:
    import asyncio

    from console.demo.fleet_demo import FleetSimulator
    from console.domain.fleet.hosts import Fleet
    from console.domain.fleet.rows import fleet_row, format_cells
    from console.demo.hostsim.fleet_paths import fleet_path

    # gpu-sim-01 restarts (its old unit stops 45 scenario seconds in), gpu-sim-03 updates in place and
    # gpu-sim-04 swaps beside (both at once: their story is past 45 s); gpu-sim-02 restarts 25 s in
    sim = FleetSimulator(4, speed=4.0, exporters=False)
    assert [fleet_path(i) for i in range(4)] == ["restart", "restart", "in-place", "beside"]
    profiles = await asyncio.to_thread(sim.start)
    fleet = Fleet(profiles, demo=True)
    try:
        await fleet.start()
        want = {"gpu-sim-04": "beside 0s", "gpu-sim-03": "in place ", "gpu-sim-01": "restart "}

        def cells() -> dict[str, str]:
            return {s.host: format_cells(fleet_row(s))["swap"] for s in fleet.states}

        def seen(now: dict[str, str]) -> bool:
            return all(now.get(h, "").startswith(w) for h, w in want.items()) and not now["gpu-sim-03"].endswith("…")

        for _ in range(1200):  # generous: a condition, not a timing
            if seen(cells()):
                break
            await asyncio.sleep(0.1)
        now = cells()
        assert seen(now), now
        assert now["gpu-sim-04"] == "beside 0s", now
        assert len({c.split(" ")[0] for c in now.values() if c != "–"}) == 3
        beside = next(s for s in fleet.states if s.host == "gpu-sim-04")
        assert beside.swap.paths["endpoint"].data()["to_port"] != profiles[0].server_port
    finally:
        await fleet.close()
        await asyncio.to_thread(sim.stop)


def test_the_one_host_console_follows_a_beside_swap_seen_on_the_host_to_the_new_port() -> None:
    """The runner (the host's one writer) observes the swap in its state and points the server poll
    at the port a beside swap seen on the host moved to."""
    from console.core.runner import HostRunner

    moved: list[int] = []
    polled: list[str] = []
    session = SimpleNamespace(demo=True, profile=SimpleNamespace(server_port=30000), move_server=moved.append)
    runner = HostRunner(session, HostState("h"))  # type: ignore[arg-type]
    runner.repoll = polled.append  # type: ignore[method-assign]
    ctl = runner
    old_on = _side("old.service", "active")
    new_on = _side("new.service", "active", port=30001, gpus="4,5,6,7")
    for at, old, new in ((T0, old_on, _side("new.service", "inactive", port=30001, gpus="4,5,6,7")),
                         (T0 + 15, old_on, new_on), (T0 + 90, replace(old_on, active_state="inactive"), new_on)):
        ctl.state.apply(ReadingChanged("h", "service", Reading("service", SimpleNamespace(old=old, new=new),
                                                               ok_at_s=at)))
    assert moved == [30001] and "server" in polled
    assert path_summary(ctl.state) == ("beside", 0.0, True)
