"""The server's throughput series is plotted at each decode line's own time, backlog included: a
console that connects late (or attaches, or replays) draws what the live console drew."""

from __future__ import annotations

import time
from datetime import datetime

from console.domain.analysis.log_state import LogTracker
from console.core.state import HostState, ReadingChanged
from console.model import Reading
from console.host.parsers.sglang_log import LogEvent, parse_line

END = float(int(time.time()))  # the newest line's second


def stamp(t: float, shift_s: float = 0.0) -> str:
    return datetime.fromtimestamp(t - shift_s).strftime("%Y-%m-%d %H:%M:%S")


def decode(t: float, gen: float, shift_s: float = 0.0) -> LogEvent:
    return parse_line(f"[{stamp(t, shift_s)} TP0] Decode batch. #running-req: 8, #token: 62531, token usage: 0.12, "
                      f"gen throughput (token/s): {gen:.2f}, #queue-req: 0")


def lines(span_s: int = 280, shift_s: float = 0.0) -> list[tuple[float, LogEvent]]:
    """One decode line a second (two in every seventh second), ending at END."""
    out = []
    for i in range(span_s):
        t = END - span_s + 1 + i
        out.append((t, decode(t, 100.0 + i, shift_s)))
        if i % 7 == 0:
            out.append((t + 0.5, decode(t, 900.0 + i, shift_s)))  # same second, a later line
    return out


def apply(state: HostState, tracker: LogTracker, events: list[LogEvent], now_s: float) -> None:
    tracker.feed(events, now_s)
    state.apply(ReadingChanged("h", "log", Reading("log", tracker.summary(), now_s)))


def live(log: list[tuple[float, LogEvent]], batch: int = 3) -> HostState:
    state, tracker = HostState("h"), LogTracker("journal")
    for i in range(0, len(log), batch):
        chunk = log[i:i + batch]
        apply(state, tracker, [e for _, e in chunk], chunk[-1][0] + 0.4)  # delivered 0.4 s after writing
    return state


def late(log: list[tuple[float, LogEvent]], now_s: float) -> HostState:
    state, tracker = HostState("h"), LogTracker("journal")
    apply(state, tracker, [e for _, e in log], now_s)  # the backlog, read at connect
    return state


def test_a_late_console_draws_the_backlog_the_live_console_drew() -> None:
    log = lines()
    a, b = live(log), late(log, END + 2.0)
    assert len(b.bench.server_gen) == 280  # one point per second of the log, not one for the backlog
    assert list(a.bench.server_gen) == list(b.bench.server_gen)
    assert b.bench.server_gen[0] == (END - 279, 100.0) and b.bench.server_gen[-1] == (END, 379.0)
    # in other batch sizes too
    assert list(live(log, batch=50).bench.server_gen) == list(b.bench.server_gen)
    # and the chart has it: the last 300 s hold the whole backlog
    assert len(b.bench.series(END + 2.0, 300)["server gen tok/s"]) == 280


def test_a_host_in_another_time_zone_is_placed_on_our_clock() -> None:
    hour = 3600.0  # its stamps an hour behind ours (a UTC host, a CET laptop)
    state, tracker = HostState("h"), LogTracker("journal")
    apply(state, tracker, [e for _, e in lines(60, shift_s=hour)], END + 1.0)
    # one batch cannot tell an hour-old backlog from a host an hour behind: nothing drawn yet
    assert list(state.bench.server_gen) == []
    apply(state, tracker, [decode(END + 3, 1.0, hour)], END + 3.3)
    assert list(state.bench.server_gen) == []
    apply(state, tracker, [decode(END + 9, 2.0, hour)], END + 9.3)  # its stamps keep pace with our clock
    gen = list(state.bench.server_gen)
    assert gen[0] == (END - 59, 100.0) and gen[59] == (END, 159.0) and gen[-2:] == [(END + 3, 1.0), (END + 9, 2.0)]


def test_a_backlog_from_a_quiet_server_waits_for_a_live_line_to_be_placed() -> None:
    for quiet_s in (600.0, 900.0):  # 900: as old as a time zone is wide, by chance
        old = lines(30)
        quiet_until = END + quiet_s  # no decode line since: the backlog's age alone says nothing
        state, tracker = HostState("h"), LogTracker("journal")
        apply(state, tracker, [e for _, e in old], quiet_until + 0.5)
        assert list(state.bench.server_gen) == []  # not drawn at its arrival as if it were now
        apply(state, tracker, [decode(quiet_until + 9, 50.0)], quiet_until + 9.3)
        gen = list(state.bench.server_gen)
        assert gen[0] == (END - 29, 100.0) and gen[-2] == (END, 129.0) and gen[-1] == (quiet_until + 9, 50.0)


def test_a_new_boot_in_a_batch_drops_the_old_servers_points_and_the_summary_stays_small() -> None:
    tracker = LogTracker("journal")
    log = [e for _, e in lines(100)]
    launch = parse_line(f"[{stamp(END + 1)}] server_args=ServerArgs(model_path='x')")
    tracker.feed(log + [launch], END + 1.5)
    assert tracker.summary().series == () and tracker.last_decode is None
    tracker.feed([decode(END + 2, 7.0)], END + 2.3)
    assert [p.gen_tokens_per_s for p in tracker.summary().series][-1] == 7.0
    # a batch of 280 seconds carries its 280 points once; the next carries the recent ones only
    t2 = LogTracker("journal")
    t2.feed([e for _, e in lines()], END + 1.0)
    assert len(t2.summary().series) == 280
    t2.feed([decode(END + 1, 1.0)], END + 1.4)
    assert len(t2.summary().series) == 32
