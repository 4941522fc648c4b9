"""One refresh path (issues 33 and 36): the benchmark pane and the swap plan beside the panes
have no timer of their own (each polled every 0.5 s, a second and a third refresh path beside the
host screen's flush). They are drawn from the flush when their data changed, and from the screen's
one age timer when something they hold back is due (a throttled change, a running clock); with
nothing changed they are not drawn again."""

from __future__ import annotations

from console.domain.bench.runner import Progress
from console.core.state import BenchChanged, HostInfo, HostState
from console.core.derive.swap_view import SwapStep, SwapStepChanged
from tests.kit.clocks import Clock
from tests.kit.hosts import wait_for
from tests.kit.screens import screen_text


def _state(clock: Clock) -> HostState:
    state = HostState("gpu-01", label="gpu-01", clock=clock)
    state.apply(HostInfo("gpu-01", "gpu-01", log_label="journal: sglang.service"))
    return state


async def test_the_bench_pane_and_the_plan_have_no_timer_and_draw_nothing_when_nothing_changed() -> None:
    from console.ui.app import ConsoleApp
    from console.ui.panes.swap import SwapScreen

    clock = Clock()
    state = _state(clock)
    app = ConsoleApp(state, None)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("p")
        await wait_for(lambda: isinstance(app.screen, SwapScreen), timeout=30)
        plan = app.screen
        screen = app.host_screen
        bench = screen.pane("bench")
        assert not list(bench._timers), "the benchmark pane polls on a timer of its own"
        assert not [t for t in plan._timers if t.name != "screen_update"], "the swap plan polls on a timer of its own"
        # The plan docked: the panes are laid out again for their new sizes (drawn then, once).
        await wait_for(lambda: bench._laid_out_for == tuple(
            bench.query_one(f"#bench-{part}").content_size for part in ("chart", "table")), timeout=30)
        await pilot.pause()
        drawn = (bench.table_draws, bench.chart_draws, plan.plan_draws)
        for _ in range(5):  # the screen's timer ticks and flushes with nothing new: nothing drawn
            clock.t += 1.0
            screen._tick()
            screen.flush()
        assert (bench.table_draws, bench.chart_draws, plan.plan_draws) == drawn


async def test_the_plan_follows_the_swap_through_the_screens_flush() -> None:
    from console.ui.app import ConsoleApp
    from console.ui.panes.swap import SwapScreen

    clock = Clock()
    state = _state(clock)
    app = ConsoleApp(state, None)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("p")
        await wait_for(lambda: isinstance(app.screen, SwapScreen), timeout=30)
        plan = app.screen
        drawn = plan.plan_draws
        state.apply(SwapStepChanged("gpu-01", SwapStep("stop_old", "Stop the old server", "failed",
                                                       detail="a detail nobody else writes")))
        await wait_for(lambda: "a detail nobody else writes" in str(plan.query_one("#swap-plan").render()),
                       timeout=30)
        assert plan.plan_draws == drawn + 1


async def test_a_change_held_back_by_the_throttle_is_drawn_when_due_by_the_age_timer() -> None:
    from console.ui.app import ConsoleApp

    clock = Clock()
    state = _state(clock)
    app = ConsoleApp(state, None)
    async with app.run_test(size=(200, 60)) as pilot:
        screen = app.host_screen
        bench = screen.pane("bench")
        clock.t += 1.0  # a second after the pane's first draw
        state.apply(BenchChanged("gpu-01", "start", label="c=4 256/256", total=16))
        await wait_for(lambda: "RUNNING" in screen_text(app), timeout=30)
        screen.flush()
        draws = bench.table_draws
        # A request finishes within half a second of the last draw: held back (a run's table is
        # drawn at most twice a second)...
        state.apply(BenchChanged("gpu-01", "progress", progress=Progress(1, 0, 16, [0.1, 0.2], 100.0, [10.0],
                                                                         clock.t - 1)))
        screen.flush()
        await pilot.pause()
        assert bench.table_draws == draws and "1/16 done" not in screen_text(app)
        assert bench.age_due_s is not None and bench.age_due_s <= clock.t + 0.5
        # ...and drawn by the screen's age timer once its time has come, with no event.
        clock.t += 0.6
        screen._tick()
        await wait_for(lambda: "1/16 done" in screen_text(app), timeout=30)
        assert bench.table_draws == draws + 1


async def test_a_pane_left_out_beside_the_plan_is_not_drawn_until_it_is_shown_again() -> None:
    from console.ui.app import ConsoleApp
    from console.ui.panes.swap import SwapScreen

    clock = Clock()
    state = _state(clock)
    app = ConsoleApp(state, None)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.host_screen
        bench = screen.pane("bench")
        await pilot.press("p")
        await wait_for(lambda: isinstance(app.screen, SwapScreen) and not bench.display, timeout=30)
        draws = bench.table_draws
        clock.t += 1.0
        state.apply(BenchChanged("gpu-01", "start", label="c=4 256/256", total=16))
        screen.flush()
        await pilot.pause()
        assert bench.table_draws == draws  # not seen beside the plan at 80 columns: not drawn
        await pilot.press("escape")
        await wait_for(lambda: not isinstance(app.screen, SwapScreen) and bench.display, timeout=30)
        def shown() -> bool:  # the state's clock moves on, as it does live, and the screen ticks
            clock.t += 0.1
            screen._tick()
            return "RUNNING" in screen_text(app)

        await wait_for(shown, timeout=30)  # what it missed, at the restore


async def test_the_servers_own_throughput_from_its_log_reaches_the_bench_chart_without_a_benchmark() -> None:
    """The bench view is derived from the log's and the server's events too: the flush tells the
    bench pane when the view moved, whatever event moved it (the merged refresh path told it only
    of benchmark events, and a demo showed 'no throughput yet' beside the log's 580 tok/s)."""
    import time
    from datetime import datetime

    from console.core.state import ReadingChanged
    from console.domain.analysis.log_state import LogTracker
    from console.host.parsers.sglang_log import parse_line
    from console.model import Reading
    from console.ui.app import ConsoleApp

    now = float(int(time.time()))
    state = HostState("gpu-01", label="gpu-01")
    state.apply(HostInfo("gpu-01", "gpu-01", log_label="journal: sglang.service"))
    tracker = LogTracker("journal")
    app = ConsoleApp(state, None)
    async with app.run_test(size=(160, 48)):
        await wait_for(lambda: "no throughput yet" in screen_text(app), timeout=30)
        for i in range(20):
            stamp = datetime.fromtimestamp(now - 20 + i).strftime("%Y-%m-%d %H:%M:%S")
            tracker.feed([parse_line(f"[{stamp} TP0] Decode batch. #running-req: 8, #token: 62531, token usage: "
                                     f"0.12, gen throughput (token/s): {400 + i:.2f}, #queue-req: 0")], now)
        state.apply(ReadingChanged("gpu-01", "log", Reading("log", tracker.summary(), now)))
        assert state.bench.version > 0  # the view moved, with no benchmark event
        await wait_for(lambda: "no throughput yet" not in screen_text(app) and "server gen tok/s" in screen_text(app),
                       timeout=30)
